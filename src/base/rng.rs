//! A small, fast, seedable PRNG (xoshiro256++) — no hidden global state:
//! every coroutine owns one, seeded from the run's seed and its ids.
//!
//! Why hand-written and not `rand`: a `sim` run is a pure function of its
//! config and seed, and its `history_hash`/`memory_hash` are compared
//! across builds (`verbena check`, the README's figures, saved sweeps), so
//! the stream drawn from a seed must never change. `rand`'s `StdRng`
//! promises no such thing across versions, and `rand`'s `gen_range`
//! rejects samples where [`Rng::below`] uses one multiply-shift, so the
//! draws would differ even from the same words. `rand_xoshiro` could supply
//! the ten-line step function below, but not `derive`, `below` or `unit`,
//! which define the streams; the dependency would pin nothing that matters
//! here. A published algorithm (Blackman and Vigna, 2018, xoshiro256++,
//! seeded by SplitMix64) is cheaper to keep fixed in-tree.
//!
//! Invariants: `new(seed)` and `derive(seed, ids)` give the same stream on
//! every platform and build; `below(n)` draws exactly one word.

#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    /// A seed derived from several ids, for independent streams.
    pub fn derive(seed: u64, ids: &[u64]) -> Rng {
        let mut h = seed ^ 0x6a09_e667_f3bc_c908;
        for id in ids {
            h = (h ^ id).wrapping_mul(0x1000_0000_01b3).rotate_left(29);
            h ^= h >> 32;
        }
        Rng::new(h)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let result = (self.s[0].wrapping_add(self.s[3]))
            .rotate_left(23)
            .wrapping_add(self.s[0]);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, bound)`; `bound > 0`.
    #[inline]
    pub fn below(&mut self, bound: u64) -> u64 {
        debug_assert!(bound > 0);
        ((self.next_u64() as u128 * bound as u128) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}
