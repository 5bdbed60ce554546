//! Mutated files: valid fixtures with truncations, byte flips and patched
//! counts/lengths/offsets give an error or a fully valid parse, never a panic.

use std::sync::OnceLock;

use proptest::prelude::*;
use rgml::gguf::GgufHeader;
use rgml::Error;

use super::fixtures;

/// Positions and widths of every count, length, type id, dim and offset in a valid file.
fn numeric_fields(b: &[u8]) -> Vec<(usize, usize)> {
    fn rd(b: &[u8], p: usize, w: usize) -> u64 {
        let mut a = [0u8; 8];
        a[..w].copy_from_slice(&b[p..p + w]);
        u64::from_le_bytes(a)
    }
    fn value(b: &[u8], p: &mut usize, ty: u64, out: &mut Vec<(usize, usize)>) {
        match ty {
            8 => {
                out.push((*p, 8));
                *p += 8 + rd(b, *p, 8) as usize;
            }
            9 => {
                out.extend([(*p, 4), (*p + 4, 8)]);
                let (et, n) = (rd(b, *p, 4), rd(b, *p + 4, 8));
                *p += 12;
                (0..n).for_each(|_| value(b, p, et, out));
            }
            ty => *p += [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8][ty as usize],
        }
    }
    let mut out = vec![(4, 4), (8, 8), (16, 8)];
    let mut p = 24;
    for _ in 0..rd(b, 16, 8) {
        value(b, &mut p, 8, &mut out);
        let ty = rd(b, p, 4);
        out.push((p, 4));
        p += 4;
        value(b, &mut p, ty, &mut out);
    }
    for _ in 0..rd(b, 8, 8) {
        value(b, &mut p, 8, &mut out);
        let n_dims = rd(b, p, 4) as usize;
        // n_dims, each ne, type, offset
        for w in [4].into_iter().chain(std::iter::repeat_n(8, n_dims)).chain([4, 8]) {
            out.push((p, w));
            p += w;
        }
    }
    out
}

/// A valid file's bytes and its numeric fields.
type Fixture = (Vec<u8>, Vec<(usize, usize)>);

fn valid_files() -> &'static [Fixture] {
    static V: OnceLock<Vec<Fixture>> = OnceLock::new();
    V.get_or_init(|| {
        let names = ["baseline", "mixed", "align1", "align64", "kv_only", "empty"];
        names
            .iter()
            .map(|n| {
                let b = std::fs::read(fixtures().join(format!("valid/{n}.gguf"))).unwrap();
                let f = numeric_fields(&b);
                (b, f)
            })
            .collect()
    })
}

#[derive(Clone, Debug)]
enum Mutation {
    Truncate(prop::sample::Index),
    Flip(prop::sample::Index, u8),
    Field(prop::sample::Index, u64),
    Splat(prop::sample::Index, u64),
}

fn interesting() -> impl Strategy<Value = u64> {
    prop_oneof![
        prop::sample::select(vec![0, 1, 2, 3, 4, 5, 9, 13, 31, 32, 33, 63, 64, 65, 255, 256, 1 << 31, 1 << 32]),
        prop::sample::select(vec![1 << 60, 1 << 62, 1 << 63, u64::MAX, u64::MAX - 31, u32::MAX as u64]),
        0..600u64,
        any::<u64>(),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<prop::sample::Index>().prop_map(Mutation::Truncate),
        (any::<prop::sample::Index>(), 1..=255u8).prop_map(|(i, x)| Mutation::Flip(i, x)),
        (any::<prop::sample::Index>(), interesting()).prop_map(|(i, v)| Mutation::Field(i, v)),
        (any::<prop::sample::Index>(), interesting()).prop_map(|(i, v)| Mutation::Splat(i, v)),
    ]
}

fn apply(bytes: &mut Vec<u8>, fields: &[(usize, usize)], m: &Mutation) {
    let put = |bytes: &mut Vec<u8>, p: usize, w: usize, v: u64| {
        let end = (p + w).min(bytes.len());
        if p < end {
            bytes[p..end].copy_from_slice(&v.to_le_bytes()[..end - p]);
        }
    };
    match m {
        Mutation::Truncate(i) => bytes.truncate(i.index(bytes.len() + 1)),
        Mutation::Flip(i, x) if !bytes.is_empty() => {
            let p = i.index(bytes.len());
            bytes[p] ^= x;
        }
        Mutation::Field(i, v) => {
            let (p, w) = fields[i.index(fields.len())];
            put(bytes, p, w, *v);
        }
        Mutation::Splat(i, v) if !bytes.is_empty() => put(bytes, i.index(bytes.len()), 8, *v),
        _ => {}
    }
}

/// Everything a successful parse promises.
fn check_parse(bytes: &[u8]) -> Result<(), TestCaseError> {
    let h = match GgufHeader::parse(bytes) {
        Err(Error::Gguf { offset, msg }) => {
            prop_assert!(offset <= bytes.len() as u64 && !msg.is_empty());
            return Ok(());
        }
        Err(e) => return Err(TestCaseError::fail(format!("not a gguf error: {e}"))),
        Ok(h) => h,
    };
    prop_assert!(h.alignment().is_power_of_two() && h.data_offset() <= bytes.len());
    prop_assert_eq!(h.file_size(), bytes.len());
    let ts = h.tensors();
    for (i, t) in ts.iter().enumerate() {
        let r = h.tensor_range(t);
        prop_assert!(r.end <= bytes.len() && t.offset % h.alignment() == 0);
        let size = t.dtype.row_size(t.ne[0]).unwrap() * t.ne[1..].iter().product::<i64>() as usize;
        prop_assert_eq!(size, t.size);
        prop_assert!(ts[..i]
            .iter()
            .all(|u| u.size == 0 || t.size == 0 || u.offset + u.size <= t.offset || t.offset + t.size <= u.offset));
        prop_assert_eq!(h.tensor(&t.name), Some(t));
    }
    for (k, v) in h.metadata() {
        prop_assert!(h.get(k).is_some_and(|g| std::ptr::eq(g, v)));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(512),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Valid fixture files with 1 to 4 mutations: truncation, byte flips, and
    /// counts/lengths/type ids/dims/offsets patched with huge or random values.
    #[test]
    fn mutated_files_never_panic(file in any::<prop::sample::Index>(), ms in prop::collection::vec(mutation(), 1..=4)) {
        let files = valid_files();
        let (orig, fields) = &files[file.index(files.len())];
        let mut bytes = orig.clone();
        for m in &ms {
            apply(&mut bytes, fields, m);
        }
        check_parse(&bytes)?;
    }
}

#[test]
fn numeric_fields_are_found() {
    let (b, f) = &valid_files()[0];
    // baseline: 3 header fields, 4 KVs (key len + type, plus string len / array type+len), 3 tensors
    let h = GgufHeader::parse(b).unwrap();
    assert_eq!(f.len(), 3 + 4 * 2 + 2 + 2 + 3 * 4 + h.tensors().iter().map(|t| t.n_dims as usize).sum::<usize>());
    let last = f.last().unwrap();
    assert_eq!(u64::from_le_bytes(b[last.0..last.0 + 8].try_into().unwrap()), h.tensors()[2].offset as u64);
}
