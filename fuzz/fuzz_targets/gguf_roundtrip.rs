//! Any bytes that parse: writing the parsed file with `GgufWriter` and parsing
//! that again gives the same metadata and tensors, and writing is idempotent.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rgml::gguf::{GgufHeader, GgufWriter};

/// The header's content written by rgml, or `None` where the writer is stricter
/// than the reader (64-byte names, 0-dim tensors).
fn rewrite(h: &GgufHeader, data: &[u8]) -> Option<Vec<u8>> {
    let mut w = GgufWriter::new();
    for (k, v) in h.metadata() {
        w.set(k, v.clone()).ok()?;
    }
    for t in h.tensors() {
        w.add_tensor(&t.name, t.dtype, &t.ne[..t.n_dims as usize], &data[h.tensor_range(t)]).ok()?;
    }
    let mut out = Vec::new();
    w.write_to(&mut out).expect("writing to a Vec");
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let Ok(h) = GgufHeader::parse(data) else { return };
    let Some(once) = rewrite(&h, data) else { return };
    let h2 = GgufHeader::parse(&once).expect("rgml reads what rgml writes");
    assert_eq!(h2.metadata().len(), h.metadata().len());
    for ((k, v), (k2, v2)) in h.metadata().iter().zip(h2.metadata()) {
        // Debug forms, as NaN != NaN; `once == twice` below compares the bits
        assert!(k == k2 && format!("{v:?}") == format!("{v2:?}"));
    }
    for (t, t2) in h.tensors().iter().zip(h2.tensors()) {
        assert!(t.name == t2.name && t.dtype == t2.dtype && t.ne == t2.ne && t.size == t2.size);
        assert_eq!(&data[h.tensor_range(t)], &once[h2.tensor_range(t2)]);
    }
    let twice = rewrite(&h2, &once).expect("the second rewrite accepts what the first did");
    assert!(once == twice, "writing is not idempotent");
});
