//! The launch layer: a bound operand (device address and layout, checked
//! against its region), the kernel views of it, the launch macro and launch
//! configurations, and the driver-error conversions. The op modules build on
//! this and nothing above it.

use std::marker::PhantomData;

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::kernels::{KRope, KTensor};
use crate::error::{Error, Result};
use crate::layout::Layout;

// SAFETY: both are #[repr(C)] plain data matching the kernels' `RgT` and
// `RgRope` field for field (sizes checked in kernels.rs's tests).
unsafe impl DeviceRepr for KTensor {}
// SAFETY: as above.
unsafe impl DeviceRepr for KRope {}

/// Threads per block of every kernel (a multiple of 32, at most 1024: the
/// block reductions in the prelude rely on it).
const BLOCK: u32 = 256;

/// A driver error during a run, as an [`Error::Cuda`] naming the step.
pub(crate) fn cuda_err(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| Error::Cuda { what: what.into(), source: Box::new(e) }
}

/// What a kernel may do through a [`Bound`] operand: read only.
#[derive(Debug)]
pub(crate) enum Read {}
/// What a kernel may do through a [`Bound`] operand: write (and read).
#[derive(Debug)]
pub(crate) enum Write {}

/// One operand on the device: the address of its first byte and its layout.
/// `Bound` (the default, [`Read`]) is a source; [`BoundMut`] is the one
/// operand a kernel writes, so a source cannot be passed where the
/// destination goes.
#[derive(Debug)]
pub(crate) struct Bound<A = Read> {
    pub ptr: u64,
    pub l: Layout,
    access: PhantomData<A>,
}

/// The destination of a kernel.
pub(crate) type BoundMut = Bound<Write>;

impl<A> Clone for Bound<A> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A> Copy for Bound<A> {}

impl<A> Bound<A> {
    /// The tensor at `offs` bytes into a region of `len` bytes at `base`;
    /// errors unless its whole extent lies inside the region.
    pub fn new(base: u64, len: usize, offs: usize, l: Layout) -> Result<Self> {
        if offs.checked_add(l.nbytes()).is_none_or(|e| e > len) {
            return Err(Error::internal(format!("{}+{} bytes outside a {len}-byte region", offs, l.nbytes())));
        }
        let ptr = base + offs as u64;
        let align = l.dtype.align() as u64;
        let strides_aligned = l.nb.iter().zip(l.ne).all(|(&nb, ne)| ne <= 1 || (nb as u64).is_multiple_of(align));
        if !l.is_empty() && (!ptr.is_multiple_of(align) || !strides_aligned) {
            return Err(Error::Unsupported { op: "cuda (misaligned view)", dtype: l.dtype });
        }
        Ok(Bound::at(ptr, l))
    }
    /// The operand at device address `ptr` (a scratch buffer the caller owns).
    pub(crate) fn at(ptr: u64, l: Layout) -> Self {
        Bound { ptr, l, access: PhantomData }
    }
    /// The same bytes as a source (a kernel reading what an earlier one wrote).
    pub(crate) fn as_src(&self) -> Bound {
        Bound::at(self.ptr, self.l)
    }
    /// The kernel view of any type the kernels know (block types included:
    /// only `get_rows` and the F32 conversion read those).
    pub(crate) fn k(&self, op: &'static str) -> Result<KTensor> {
        KTensor::of(op, &self.l)
    }
    /// The kernel view of any type the kernels know, block types blocked
    /// along any dim (for the kernels that read through `kernels/quant.cuh`).
    pub(crate) fn q(&self, op: &'static str) -> Result<KTensor> {
        KTensor::of_blocked(op, &self.l)
    }
    /// The kernel view of a plain type (F32, F16, BF16, I32), for the kernels
    /// that load elements with `rg_load`.
    pub(crate) fn p(&self, op: &'static str) -> Result<KTensor> {
        if self.l.dtype.block_size() > 1 {
            return Err(Error::Unsupported { op, dtype: self.l.dtype });
        }
        KTensor::of(op, &self.l)
    }
}

/// Launches `$func` of `$module` with `$cfg` and the listed arguments (each
/// bound to a local first so its address outlives the launch call).
macro_rules! launch {
    ($dev:expr, $module:literal, $func:literal, $cfg:expr; $($arg:expr),* $(,)?) => {{
        use ::cudarc::driver::PushKernelArg as _;
        let cfg: ::cudarc::driver::LaunchConfig = $cfg;
        if cfg.grid_dim.0 > 0 {
            let f = $dev.function($module, $func)?;
            $dev.allow_shared(&f, $func, cfg.shared_mem_bytes)?;
            let mut b = $dev.stream.launch_builder(&f);
            $( let a = $arg; b.arg(&a); )*
            // SAFETY: the arguments are, in order, the kernel's parameters
            // (types mirrored from kernels/*.cu), and every pointer addresses an
            // operand whose whole extent was checked to lie in device memory.
            unsafe { b.launch(cfg) }
                .map_err($crate::backend::cuda::launch::cuda_err(concat!("launch ", $func)))?;
        }
    }};
}
pub(crate) use launch;

/// A grid-stride launch over `n` elements.
pub(crate) fn flat(n: i64) -> LaunchConfig {
    let blocks = (n.max(0) as u64).div_ceil(u64::from(BLOCK)).min(1 << 20) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 }
}

/// One block per row (`rows` of them).
pub(crate) fn per_row(rows: i64, shared: u32) -> Result<LaunchConfig> {
    let g = u32::try_from(rows).ok().filter(|&g| g <= i32::MAX as u32);
    let g = g.ok_or_else(|| Error::Invalid(format!("CUDA: {rows} rows exceed one grid")))?;
    Ok(LaunchConfig { grid_dim: (g, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: shared })
}

/// A driver error while opening the device or loading kernels, as [`Error::Unavailable`].
pub(crate) fn driver_err(what: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Error::Unavailable { what: "CUDA device".into(), why: format!("{what}: {e:?}") }
}
