//! Any bytes: the safetensors parser returns an error or a header whose
//! promises hold (tensor data inside the data section, exactly the shape's
//! size, not overlapping; `ne` the shape reversed); it never panics.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rgml::safetensors::SafetensorsHeader;

fuzz_target!(|data: &[u8]| {
    let Ok(h) = SafetensorsHeader::parse(data) else { return };
    assert!(h.data_start() <= data.len());
    let mut ranges: Vec<_> = h.tensors().iter().map(|t| t.range.clone()).collect();
    for t in h.tensors() {
        assert!(t.range.start >= h.data_start() && t.range.end <= data.len());
        let n: u64 = t.shape.iter().product();
        assert_eq!(n * t.dtype.type_size() as u64, t.range.len() as u64);
        assert!(t.shape.len() <= 4);
        for (k, &d) in t.shape.iter().rev().enumerate() {
            assert_eq!(t.ne[k], d as i64);
        }
        assert_eq!(h.tensor(&t.name), Some(t));
    }
    ranges.extend(h.skipped().iter().map(|t| t.range.clone()));
    ranges.retain(|r| !r.is_empty());
    ranges.sort_by_key(|r| r.start);
    for w in ranges.windows(2) {
        assert!(w[0].end <= w[1].start);
    }
});
