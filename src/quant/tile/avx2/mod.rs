//! AVX2 tiles: 8 weight rows, one per i32 lane of a `__m256`, packed per
//! chunk of blocks as in the AVX-512 tiles, with `vpmaddubsw` for the byte
//! products (unsigned weight quants times signed activation quants, pairs
//! summed in i16) and `vpmaddwd` to widen them. [`legacy`] holds the 32-value
//! types (Q4_0, Q4_1, Q5_0, Q8_0, IQ4_NL), [`k`] the k-quants with Q8_K activations (Q4_K, Q5_K,
//! Q6_K) and [`k_single`] their one-row kernels on repacked groups; [`lanes`] their shared loads and transposes.

// index loops read best over the lanes and vectors of a block
#![allow(clippy::needless_range_loop)]

mod k;
mod k_single;
mod lanes;
mod legacy;

pub(super) use k::{q4_k, q5_k, q6_k};
pub(super) use k_single::{q4_k_packed, q5_k_packed, q6_k_packed};
pub(super) use lanes::MR;
pub(super) use legacy::{
    iq4_nl, iq4_nl_packed, q4_0, q4_0_packed, q4_1, q4_1_packed, q5_0, q5_0_packed, q8_0, q8_0_packed,
};
