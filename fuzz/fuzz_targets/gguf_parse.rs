//! Any bytes: the GGUF parser returns an error or a header whose promises hold
//! (tensor data inside the input, aligned, not overlapping); it never panics,
//! aborts, or allocates more than the input can back.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rgml::gguf::GgufHeader;

fuzz_target!(|data: &[u8]| {
    let Ok(h) = GgufHeader::parse(data) else { return };
    assert!(h.alignment().is_power_of_two() && h.data_offset() <= data.len());
    let mut ranges: Vec<_> = h.tensors().iter().map(|t| (h.tensor_range(t), t)).collect();
    for (r, t) in &ranges {
        assert!(r.end <= data.len() && r.len() == t.size && t.offset % h.alignment() == 0);
        assert_eq!(h.tensor(&t.name), Some(*t));
        let _ = (t.n_elements(), t.nb());
    }
    ranges.retain(|(r, _)| !r.is_empty());
    ranges.sort_by_key(|(r, _)| r.start);
    assert!(ranges.windows(2).all(|w| w[0].0.end <= w[1].0.start), "overlapping tensors");
    for (k, v) in h.metadata() {
        assert!(h.get(k).is_some_and(|g| std::ptr::eq(g, v)));
        let _ = (h.get_u32(k), h.get_i64(k), h.get_f64(k), h.get_str(k), h.get_array(k), h.get_str_array(k));
    }
});
