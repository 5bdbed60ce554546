//! Best-fit free list over one buffer: blocks sorted by offset, merged with
//! their neighbours on free; the buffer's size is the high-water mark.

/// Free ranges of a growing buffer.
#[derive(Debug, Default)]
pub(crate) struct FreeList {
    /// Free `(offset, size)` blocks, sorted by offset, never adjacent.
    blocks: Vec<(usize, usize)>,
    /// End of the used part of the buffer.
    end: usize,
    /// Largest `end` ever reached.
    peak: usize,
}

impl FreeList {
    /// Takes `size` bytes (a multiple of the alignment): the smallest free
    /// block that fits (lowest offset on ties); else the free block at the top,
    /// grown; else fresh space at the top.
    pub(crate) fn alloc(&mut self, size: usize) -> usize {
        let best = self
            .blocks
            .iter()
            .enumerate()
            .filter(|(_, &(_, s))| s >= size)
            .min_by_key(|(_, &(o, s))| (s, o))
            .map(|(i, _)| i);
        if let Some(i) = best {
            let (o, s) = self.blocks[i];
            if s == size {
                self.blocks.remove(i);
            } else {
                self.blocks[i] = (o + size, s - size);
            }
            return o;
        }
        let offset = match self.blocks.last() {
            Some(&(o, s)) if o + s == self.end => {
                self.blocks.pop();
                o
            }
            _ => self.end,
        };
        self.end = offset + size;
        self.peak = self.peak.max(self.end);
        offset
    }

    /// Returns `[offset, offset + size)`, merging it with free neighbours.
    pub(crate) fn free(&mut self, offset: usize, size: usize) {
        if size == 0 {
            return;
        }
        let i = self.blocks.partition_point(|&(o, _)| o < offset);
        let (mut o, mut s) = (offset, size);
        if i < self.blocks.len() && o + s == self.blocks[i].0 {
            s += self.blocks[i].1;
            self.blocks.remove(i);
        }
        if i > 0 && self.blocks[i - 1].0 + self.blocks[i - 1].1 == o {
            o = self.blocks[i - 1].0;
            s += self.blocks[i - 1].1;
            self.blocks.remove(i - 1);
            self.blocks.insert(i - 1, (o, s));
        } else {
            self.blocks.insert(i, (o, s));
        }
    }

    /// The high-water mark: bytes the buffer needs.
    pub(crate) fn peak(&self) -> usize {
        self.peak
    }
}

#[cfg(test)]
mod tests {
    use super::FreeList;

    #[test]
    fn best_fit_merge_and_peak() {
        let mut f = FreeList::default();
        let a = f.alloc(64);
        let b = f.alloc(128);
        let c = f.alloc(64);
        assert_eq!((a, b, c, f.peak()), (0, 64, 192, 256));
        f.free(b, 128);
        // best fit: the 128 hole for a 64 request, at its start
        assert_eq!(f.alloc(64), 64);
        f.free(64, 64);
        f.free(a, 64);
        // neighbours merged into one 192-byte block at 0
        assert_eq!(f.blocks, vec![(0, 192)]);
        assert_eq!(f.alloc(192), 0);
        f.free(0, 192);
        f.free(c, 64);
        assert_eq!(f.blocks, vec![(0, 256)]);
        // a request larger than any block grows the top block
        assert_eq!(f.alloc(512), 0);
        assert_eq!(f.peak(), 512);
    }

    #[test]
    fn smallest_block_wins_then_lowest_offset() {
        let mut f = FreeList::default();
        let offs: Vec<usize> = [64, 64, 128, 64, 64, 64].iter().map(|&s| f.alloc(s)).collect();
        f.free(offs[0], 64); // hole of 64 at 0
        f.free(offs[2], 128); // hole of 128 at 128
        f.free(offs[4], 64); // hole of 64 at 320
        assert_eq!(f.alloc(64), 0);
        assert_eq!(f.alloc(64), 320);
        assert_eq!(f.alloc(64), 128);
        assert_eq!(f.peak(), 448);
    }
}
