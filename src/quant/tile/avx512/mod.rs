//! AVX-512 VNNI tiles: 16 weight rows, one per i32 lane of a `__m512`.
//!
//! Per chunk of blocks the weight rows are packed: a block becomes vectors
//! whose lane `r` holds four unsigned quants of row `r` (each vector pairs with
//! four activation quants, broadcast), plus the rows' scales. Each activation
//! row then costs, per 32 values, 8 `vpdpbusd` for 16 × 32 multiply-adds.
//! [`legacy`] holds the 32-value types (Q4_0, Q4_1, Q5_0, Q8_0, IQ4_NL), [`k`] the k-quants with
//! Q8_K activations (Q4_K, Q5_K, Q6_K) and [`k_single`] their one-row
//! kernels on repacked Q4_K/Q5_K/Q6_K, [`iq4_xs`](mod@iq4_xs) IQ4_XS (Q8_K activations
//! too); [`lanes`] their shared loads and transposes.

// index loops read best over the lanes and vectors of a block
#![allow(clippy::needless_range_loop)]

#[macro_use]
mod k;
mod iq4_xs;
mod k_single;
mod lanes;
mod legacy;

pub(super) use iq4_xs::{iq4_xs, iq4_xs_packed};
pub(super) use k::{q4_k, q5_k, q6_k};
pub(super) use k_single::{q4_k_packed, q5_k_packed, q6_k_packed};
pub(super) use lanes::MR;
pub(super) use legacy::{
    iq4_nl, iq4_nl_packed, q4_0, q4_0_packed, q4_1, q4_1_packed, q5_0, q5_0_packed, q8_0, q8_0_packed,
};
