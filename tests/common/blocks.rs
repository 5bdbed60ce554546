//! Random but valid blocks of any block type: random bytes with every scale
//! field set to a finite f16 (or f32) of moderate size, for the types without
//! a quantizer (the i-quants) and for kernels that must accept any bytes.
//! Shared by the tests (`mod common`) and the benches (`#[path]`).

// each crate uses a different subset
#![allow(dead_code)]

use rgml::DType;

/// A finite f16 (raw bits) of magnitude about 2^-10..2^2, either sign, from `r`.
pub fn finite_f16(r: u64) -> u16 {
    let sign = (r as u16 & 1) << 15;
    let exp = 5 + ((r >> 1) % 12) as u16; // biased exponent 5..=16
    let man = (r >> 8) as u16 & 0x3ff;
    sign | (exp << 10) | man
}

/// Byte offsets of the f16 scale fields of one block of `d` (not IQ1_M, whose
/// f16 is split, nor Q8_K, whose scale is an f32; MXFP4's E8M0 byte is any byte).
fn f16_fields(d: DType) -> &'static [usize] {
    match d {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 => &[0],
        DType::Q4_1 | DType::Q5_1 | DType::Q8_1 | DType::Q4_K | DType::Q5_K => &[0, 2],
        DType::Q2_K => &[80, 82],
        DType::Q3_K => &[108],
        DType::Q6_K => &[208],
        DType::IQ4_NL
        | DType::IQ4_XS
        | DType::IQ1_S
        | DType::IQ2_XXS
        | DType::IQ2_XS
        | DType::IQ2_S
        | DType::IQ3_XXS
        | DType::IQ3_S => &[0],
        DType::TQ1_0 => &[52],
        DType::TQ2_0 => &[64],
        _ => &[],
    }
}

/// `n` blocks of `d`: bytes from `next`, scale fields finite.
pub fn random_blocks(d: DType, n: usize, mut next: impl FnMut() -> u64) -> Vec<u8> {
    let bs = d.type_size();
    let mut out: Vec<u8> = (0..n * bs).map(|_| next() as u8).collect();
    for b in out.chunks_exact_mut(bs) {
        for &at in f16_fields(d) {
            b[at..at + 2].copy_from_slice(&finite_f16(next()).to_le_bytes());
        }
        match d {
            DType::Q8_K => b[..4].copy_from_slice(&(f32::from(finite_f16(next()) & 0x7fff) / 1024.0).to_le_bytes()),
            DType::IQ1_M => {
                // the f16's nibbles go to the top of the four scale words (bytes 49, 51, 53, 55)
                let h = finite_f16(next());
                for w in 0..4 {
                    let top = &mut b[48 + 2 * w + 1];
                    *top = (*top & 0x0f) | ((((h >> (4 * w)) & 0x0f) as u8) << 4);
                }
            }
            _ => {}
        }
    }
    out
}
