//! The sampler's random numbers: xoshiro256** (Blackman and Vigna, 2018),
//! seeded through SplitMix64, both exactly as in the authors' reference C code
//! (<https://prng.di.unimi.it/>). Pure integer arithmetic: the same seed gives
//! the same stream on every platform and in every version of this crate.

/// SplitMix64's increment (the golden ratio in 64-bit fixed point).
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// One step of SplitMix64: advances `state` and returns the next output.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(GOLDEN_GAMMA);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The xoshiro256** generator: 256 bits of state, period `2^256 - 1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xoshiro256StarStar {
    s: [u64; 4],
}

impl Xoshiro256StarStar {
    /// The generator whose state is the first four outputs of SplitMix64
    /// started at `seed` (the seeding the xoshiro authors recommend). Never
    /// all zero, for any seed.
    pub fn seed_from_u64(seed: u64) -> Xoshiro256StarStar {
        let mut sm = seed;
        let s = [splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm)];
        Xoshiro256StarStar { s }
    }

    /// The generator with the given raw state; `None` for the all-zero state,
    /// which xoshiro never leaves.
    pub fn from_state(s: [u64; 4]) -> Option<Xoshiro256StarStar> {
        (s != [0; 4]).then_some(Xoshiro256StarStar { s })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A uniform `f64` in `[0, 1)`: the top 53 bits of [`next_u64`](Self::next_u64)
    /// times `2^-53` (every multiple of `2^-53` in the range, equally likely).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}
