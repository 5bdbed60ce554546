//! Anonymous maps that start on a huge-page boundary (Linux).
//!
//! A transparent huge page backs an aligned 2 MiB of a mapping only, and the
//! kernel places an anonymous map whose length is not a multiple of 2 MiB on
//! any 4 KiB boundary: a 9 MiB buffer then gets three or four huge pages, a
//! 2.5 MiB one usually none. Weight streams over 4 KiB pages run slower (the
//! hardware prefetchers stop at each page's end), so large buffers reserve
//! 2 MiB more than they need, keep the aligned part and give the rest back.

use std::ptr::NonNull;

/// The boundary the map starts on, and the huge-page size it is advised for.
const HUGE_PAGE: usize = 2 << 20;

/// A private, zero-filled, read-write anonymous map whose first byte lies on a
/// [`HUGE_PAGE`] boundary, advised to use transparent huge pages.
pub(super) struct HugeMap {
    ptr: NonNull<u8>,
    /// Mapped bytes: the length asked for, rounded up to whole pages.
    mapped: usize,
}

// SAFETY: the map is owned memory, as a `Vec<u8>`'s: nothing else refers to it.
unsafe impl Send for HugeMap {}
// SAFETY: shared access only reads (`Deref`); writes need `&mut` (`DerefMut`).
unsafe impl Sync for HugeMap {}

impl HugeMap {
    /// `len` zero bytes (`len > 0`), or `None` when the system refuses the map.
    pub(super) fn zeroed(len: usize) -> Option<HugeMap> {
        // SAFETY: sysconf reads a constant of the system.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok().filter(|&p| p > 0)?;
        let mapped = len.checked_next_multiple_of(page)?;
        let reserve = mapped.checked_add(HUGE_PAGE)?;
        if len == 0 || !HUGE_PAGE.is_multiple_of(page) {
            return None;
        }
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        // SAFETY: a new anonymous map at an address the kernel picks; it touches no existing memory.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), reserve, prot, flags, -1, 0) };
        if base == libc::MAP_FAILED {
            return None;
        }
        let start = base as usize;
        let head = start.next_multiple_of(HUGE_PAGE) - start;
        let tail = reserve - head - mapped;
        let aligned = base.cast::<u8>().wrapping_add(head);
        // SAFETY: the head and tail are whole pages (the map and HUGE_PAGE are page
        // multiples) of the reservation made above, which nothing else refers to.
        unsafe {
            if head > 0 {
                libc::munmap(base, head);
            }
            if tail > 0 {
                libc::munmap(aligned.add(mapped).cast(), tail);
            }
            // advice only: a kernel without transparent huge pages leaves 4 KiB ones
            libc::madvise(aligned.cast(), mapped, libc::MADV_HUGEPAGE);
        }
        Some(HugeMap { ptr: NonNull::new(aligned)?, mapped })
    }
}

impl std::ops::Deref for HugeMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `mapped` readable bytes from `ptr`, alive until drop.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.mapped) }
    }
}

impl std::ops::DerefMut for HugeMap {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.mapped) }
    }
}

impl Drop for HugeMap {
    fn drop(&mut self) {
        // SAFETY: exactly the range `zeroed` kept, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.mapped) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_on_a_huge_page_and_is_zero_and_writable() {
        for len in [1, 4095, HUGE_PAGE - 1, HUGE_PAGE, HUGE_PAGE + 1, 5 * HUGE_PAGE + 12345] {
            let mut m = HugeMap::zeroed(len).unwrap();
            assert_eq!(m.as_ptr() as usize % HUGE_PAGE, 0, "len {len}");
            assert!(m.len() >= len && m.len() < len + 4096 * 16);
            assert!(m.iter().all(|&b| b == 0));
            let n = m.len();
            m[0] = 1;
            m[n - 1] = 2;
            assert_eq!((m[0], m[n - 1]), (1, 2));
        }
    }

    #[test]
    fn refuses_what_cannot_be_mapped() {
        assert!(HugeMap::zeroed(0).is_none());
        assert!(HugeMap::zeroed(usize::MAX - 10).is_none());
        assert!(HugeMap::zeroed(usize::MAX / 2).is_none());
    }
}
