use bytemuck::Zeroable;
use half::{bf16, f16};

use super::search::nearest_int;
use super::*;
use crate::dtype::DType;
use crate::error::Error;

/// The block types with a quantizer.
const BLOCK_TYPES: [DType; 17] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q8_1,
    DType::Q2_K,
    DType::Q3_K,
    DType::Q4_K,
    DType::Q5_K,
    DType::Q6_K,
    DType::Q8_K,
    DType::IQ4_NL,
    DType::IQ4_XS,
    DType::MXFP4,
    DType::TQ1_0,
    DType::TQ2_0,
];

#[test]
fn block_types_with_quantizers() {
    let q: Vec<DType> = DType::QUANTIZED.into_iter().filter(|&d| has_quantizer(d)).collect();
    assert_eq!(q, BLOCK_TYPES);
    for d in DType::QUANTIZED.into_iter().filter(|&d| !has_quantizer(d)) {
        let n = d.block_size();
        let e = quantize_row(d, &vec![0.5; n], &mut vec![0u8; d.type_size()]);
        assert!(matches!(e, Err(Error::Unsupported { dtype, .. }) if dtype == d), "{d}: {e:?}");
        // but they dequantize
        dequantize_row(d, &vec![0u8; d.type_size()], &mut vec![0f32; n]).unwrap();
    }
}

/// A small deterministic generator (xorshift64*), uniform in [-1, 1).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        ((r >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

fn roundtrip(dtype: DType, x: &[f32]) -> Vec<f32> {
    let mut q = vec![0u8; dtype.row_size(x.len() as i64).unwrap()];
    quantize_row(dtype, x, &mut q).unwrap();
    let mut y = vec![0f32; x.len()];
    dequantize_row(dtype, &q, &mut y).unwrap();
    y
}

#[test]
fn block_trait_matches_dtype_table() {
    fn check<B: Block>() {
        assert_eq!(B::VALUES, B::DTYPE.block_size(), "{}", B::DTYPE);
        assert_eq!(std::mem::size_of::<B>(), B::DTYPE.type_size(), "{}", B::DTYPE);
        assert_eq!(std::mem::align_of::<B>(), B::DTYPE.align(), "{}", B::DTYPE);
    }
    check::<BlockQ4_0>();
    check::<BlockQ4_1>();
    check::<BlockQ5_0>();
    check::<BlockQ5_1>();
    check::<BlockQ8_0>();
    check::<BlockQ8_1>();
    check::<BlockQ2_K>();
    check::<BlockQ3_K>();
    check::<BlockQ4_K>();
    check::<BlockQ5_K>();
    check::<BlockQ6_K>();
    check::<BlockQ8_K>();
    check::<BlockIQ4_NL>();
    check::<BlockIQ4_XS>();
    check::<BlockMXFP4>();
    check::<BlockIQ1_S>();
    check::<BlockIQ1_M>();
    check::<BlockIQ2_XXS>();
    check::<BlockIQ2_XS>();
    check::<BlockIQ2_S>();
    check::<BlockIQ3_XXS>();
    check::<BlockIQ3_S>();
    check::<BlockTQ1_0>();
    check::<BlockTQ2_0>();
}

#[test]
fn f16_widening_is_exact_for_every_pattern() {
    for h in 0..=u16::MAX {
        let x = f16_to_f32(h);
        let v = f16::from_bits(h);
        if v.is_nan() {
            // payload and signaling bit kept: the low 13 bits are zero and the rest is the f16's
            let b = x.to_bits();
            assert!(x.is_nan());
            assert_eq!(b & 0x1fff, 0, "{h:#06x}");
            assert_eq!(b >> 13 & 0x3ff, u32::from(h & 0x3ff), "{h:#06x}");
            assert_eq!(b >> 31, u32::from(h >> 15), "{h:#06x}");
        } else {
            assert_eq!(x.to_bits(), v.to_f32().to_bits(), "{h:#06x}");
            assert_eq!(f32_to_f16(x), h, "{h:#06x}");
        }
    }
}

#[test]
fn f16_narrowing_rounds_to_nearest_even() {
    // every midpoint between neighbouring finite f16s, and the floats just around it
    for h in 0..0x7bffu16 {
        let (lo, hi) = (f16_to_f32(h), f16_to_f32(h + 1));
        let mid = (lo + hi) / 2.0; // exact: f16 has fewer mantissa bits
        let even = if h % 2 == 0 { h } else { h + 1 };
        assert_eq!(f32_to_f16(mid), even, "midpoint above {h:#06x}");
        assert_eq!(f32_to_f16(f32::from_bits(mid.to_bits() - 1)), h);
        assert_eq!(f32_to_f16(f32::from_bits(mid.to_bits() + 1)), h + 1);
        assert_eq!(f32_to_f16(-mid), even | 0x8000);
    }
    assert_eq!(f32_to_f16(65519.996), 0x7bff);
    assert_eq!(f32_to_f16(65520.0), 0x7c00, "overflow rounds to inf");
    assert_eq!(f32_to_f16(f32::INFINITY), 0x7c00);
    assert_eq!(f32_to_f16(f32::NEG_INFINITY), 0xfc00);
    assert_eq!(f32_to_f16(f32::NAN), 0x7e00);
    assert_eq!(f32_to_f16(f32::from_bits(0xffa0_0001)), 0xfe00, "NaN: ggml's canonical quiet NaN, sign kept");
    assert_eq!(f32_to_f16(1e-10), 0);
    assert_eq!(f32_to_f16(2.0f32.powi(-25)), 0, "tie to even at the bottom of the subnormals");
    assert_eq!(f32_to_f16(2.0f32.powi(-25) * 1.5), 1);
}

/// ggml's `ggml_compute_fp32_to_bf16`, written from its description.
fn bf16_ggml(x: f32) -> u16 {
    let u = x.to_bits();
    if u & 0x7fff_ffff > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    ((u as u64 + (0x7fff + ((u >> 16) & 1)) as u64) >> 16) as u16
}

#[test]
fn bf16_matches_ggml_including_nan() {
    let mut r = 0x1234_5678_9abc_def0u64;
    let check = |u: u32| {
        let x = f32::from_bits(u);
        assert_eq!(bf16::from_f32(x).to_bits(), bf16_ggml(x), "{u:#010x}");
    };
    for u in [0, 0x8000_0000, 0x7f80_0000, 0xff80_0000, 0x7f80_0001, 0x7fbf_ffff, 0xffc0_0000, 0x7f7f_ffff, 0x0000_8000]
    {
        check(u);
    }
    for hi in 0..=0xffffu32 {
        // the tie, just below and just above it, and a random low half
        for lo in [0x8000, 0x7fff, 0x8001, 0] {
            check(hi << 16 | lo);
        }
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        check(hi << 16 | (r as u32 & 0xffff));
    }
    let mut q = [0u8; 2];
    quantize_row(DType::BF16, &[f32::from_bits(0x7f80_0001)], &mut q).unwrap();
    assert_eq!(u16::from_le_bytes(q), 0x7fc0, "signaling NaN made quiet");
}

#[test]
fn nearest_int_rounds_half_to_even() {
    for i in -2_000_000..2_000_000 {
        let x = i as f32 * 0.25;
        assert_eq!(nearest_int(x), x.round_ties_even() as i32, "{x}");
    }
}

#[test]
fn lengths_and_types_are_checked() {
    let mut y = [0f32; 64];
    let e = dequantize_row(DType::Q4_0, &[0u8; 35], &mut y);
    assert!(matches!(e, Err(Error::Shape { .. })), "{e:?}");
    let m = e.unwrap_err().to_string();
    assert!(m.contains("36") && m.contains("35"), "{m}");
    let e = dequantize_row(DType::Q4_K, &[0u8; 144], &mut y[..48]);
    assert!(matches!(e, Err(Error::Shape { .. })), "{e:?}");
    let e = dequantize_row(DType::I32, &[0u8; 16], &mut y[..4]);
    assert!(matches!(e, Err(Error::Unsupported { dtype: DType::I32, .. })), "{e:?}");
    let e = quantize_row(DType::I8, &y[..4], &mut [0u8; 4]);
    assert!(matches!(e, Err(Error::Unsupported { dtype: DType::I8, .. })), "{e:?}");
    let e = quantize_row(DType::Q8_0, &y[..40], &mut [0u8; 34]);
    assert!(matches!(e, Err(Error::Shape { .. })), "{e:?}");
    let e = quantize_row(DType::F16, &y[..4], &mut [0u8; 7]);
    assert!(matches!(e, Err(Error::Shape { .. })), "{e:?}");
    // empty rows are fine
    dequantize_row(DType::Q6_K, &[], &mut []).unwrap();
    quantize_row(DType::Q2_K, &[], &mut []).unwrap();
}

#[test]
fn hand_made_blocks_decode_as_documented() {
    // Q4_0: d = 0.5, nibbles (low, high) = (j, 15 - j)
    let mut b = [0u8; 18];
    b[..2].copy_from_slice(&f16::from_f32(0.5).to_bits().to_le_bytes());
    for j in 0..16 {
        b[2 + j] = j as u8 | ((15 - j as u8) << 4);
    }
    let mut y = [0f32; 32];
    dequantize_row(DType::Q4_0, &b, &mut y).unwrap();
    for j in 0..16 {
        assert_eq!(y[j], (j as f32 - 8.0) * 0.5);
        assert_eq!(y[j + 16], (7.0 - j as f32) * 0.5);
    }
    // Q5_0: fifth bits from a little-endian u32
    let mut b = BlockQ5_0 { d: f16::ONE, qh: 0x8000_0001u32.to_le_bytes(), qs: [0; 16] };
    b.qs[0] = 0x21;
    b.dequantize(&mut y);
    assert_eq!((y[0], y[1], y[16], y[31]), (1.0, -16.0, -14.0, 0.0));
    // Q8_K: an f32 scale
    let mut b = BlockQ8_K::zeroed();
    b.d = 0.25;
    b.qs[3] = -128;
    b.qs[255] = 127;
    let mut y = [0f32; 256];
    dequantize_row(DType::Q8_K, bytemuck::bytes_of(&b), &mut y).unwrap();
    assert_eq!((y[3], y[255], y[0]), (-32.0, 31.75, 0.0));
    // Q6_K: value 200 = half 1, quarter 2, l = 8: high nibble of ql[64 + 8], qh[32 + 8] bits 4..6
    let mut b = BlockQ6_K::zeroed();
    b.d = f16::from_f32(2.0);
    b.scales[200 / 16] = -3;
    b.ql[72] = 0x50;
    b.qh[40] = 0b10_0000;
    b.dequantize(&mut y);
    assert_eq!(y[200], 2.0 * -3.0 * ((0x5 | 2 << 4) - 32) as f32);
    assert_eq!(y[191], 0.0, "other groups have scale 0");
}

#[test]
fn zero_rows_give_zero_blocks() {
    let x = [0f32; 512];
    for dtype in BLOCK_TYPES {
        let mut q = vec![0xa5u8; dtype.row_size(512).unwrap()];
        quantize_row(dtype, &x, &mut q).unwrap();
        let mut y = [1f32; 512];
        dequantize_row(dtype, &q, &mut y).unwrap();
        assert!(y.iter().all(|&v| v == 0.0), "{dtype}: {y:?}");
        // the scales (and all other fields but the offset-coded quants) are zero
        match dtype {
            DType::Q2_K | DType::Q3_K | DType::Q4_K | DType::Q5_K | DType::Q6_K | DType::Q8_K => {
                assert!(q.iter().all(|&b| b == 0), "{dtype}: {q:?}")
            }
            // the first field is the f16 scale; Q4_0 and Q5_0 store max / -8 = -0.0 (as ggml does),
            // IQ4_XS -max_scale / 32 = -0.0
            DType::Q4_0 | DType::Q5_0 | DType::IQ4_XS => assert_eq!(&q[..2], &[0, 0x80], "{dtype}"),
            // the ternary types store their scale last
            DType::TQ1_0 | DType::TQ2_0 => {
                let bs = dtype.type_size();
                assert!(q.chunks(bs).all(|b| b[bs - 2..] == [0, 0]), "{dtype}: {q:?}")
            }
            _ => assert_eq!(&q[..2], &[0, 0], "{dtype}"),
        }
    }
}

#[test]
fn odd_inputs_never_panic() {
    let rows: [&[f32]; 6] = [
        &[f32::NAN; 256],
        &[f32::INFINITY; 256],
        &[f32::MIN_POSITIVE / 8.0; 256],
        &[f32::MAX; 256],
        &[-f32::MAX; 256],
        &[1e30; 256],
    ];
    for dtype in BLOCK_TYPES.into_iter().chain([DType::F16, DType::BF16, DType::F32]) {
        for (i, row) in rows.iter().enumerate() {
            let mut mixed = row.to_vec();
            mixed[7] = 1.0;
            mixed[100] = -3.0;
            for x in [row.to_vec(), mixed] {
                let mut q = vec![0u8; dtype.row_size(256).unwrap()];
                quantize_row(dtype, &x, &mut q).unwrap_or_else(|e| panic!("{dtype} row {i}: {e}"));
                let mut y = [0f32; 256];
                dequantize_row(dtype, &q, &mut y).unwrap();
            }
        }
    }
    // finite values of ordinary size never give NaN
    let mut r = Rng(7);
    let x: Vec<f32> = (0..1024).map(|i| if i % 97 == 0 { 0.0 } else { r.next() * 1e-3 }).collect();
    for dtype in BLOCK_TYPES {
        assert!(roundtrip(dtype, &x).iter().all(|v| v.is_finite()), "{dtype}");
    }
}

#[test]
fn sums_in_q8_1_and_q8_k() {
    let mut r = Rng(11);
    let x: Vec<f32> = (0..256).map(|_| r.next() * 3.0).collect();
    let b = BlockQ8_1::quantize(&x[..32]);
    let sum: i32 = b.qs.iter().map(|&q| i32::from(q)).sum();
    let amax = x[..32].iter().fold(0f32, |a, v| a.max(v.abs()));
    assert_eq!(b.d, f16::from_f32(amax / 127.0));
    assert_eq!(b.s, f16::from_f32(sum as f32 * (amax / 127.0)), "s uses the f32 scale, not the stored f16");
    let b = BlockQ8_K::quantize(&x);
    for (g, s) in b.bsums.iter().enumerate() {
        assert_eq!(i32::from(*s), b.qs[16 * g..16 * g + 16].iter().map(|&q| i32::from(q)).sum::<i32>());
    }
    assert!(b.qs.iter().any(|&q| q == 127 || q == -127));
}

#[test]
fn float_rows_round_trip() {
    let x = [1.0f32, -2.5, 1e-8, 65504.0, 1e6, f32::NEG_INFINITY, 0.1];
    let y = roundtrip(DType::F32, &x);
    assert_eq!(y, x);
    let y = roundtrip(DType::F16, &x);
    let want: Vec<f32> = x.iter().map(|&v| f16::from_f32(v).to_f32()).collect();
    assert_eq!(y, want);
    let y = roundtrip(DType::BF16, &x);
    let want: Vec<f32> = x.iter().map(|&v| bf16::from_f32(v).to_f32()).collect();
    assert_eq!(y, want);
}
