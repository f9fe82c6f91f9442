//! A tiny self-contained PRNG (splitmix64): synthetic samples and shuffles must be
//! reproducible from a seed and safe to generate on any thread, which tch's global RNG is not.

/// splitmix64 (Steele, Lea & Flood 2014): one add and a 64-bit finaliser per draw; plenty
/// for noise and permutations, and any seed (even 0) gives a good stream.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// A generator seeded from several values (seed, split, index, …) hashed together, so
    /// that nearby inputs give unrelated streams.
    pub fn derived(parts: &[u64]) -> Self {
        let mut h = 0x6a09_e667_f3bc_c909u64;
        for &p in parts {
            h = SplitMix64::new(h ^ SplitMix64::new(p).next_u64()).next_u64();
        }
        SplitMix64::new(h)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (multiply-shift; the bias, below 2⁻³², is irrelevant here).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Fisher–Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_values_and_ranges() {
        // First output of splitmix64 seeded with 0, as in the reference C implementation.
        assert_eq!(SplitMix64::new(0).next_u64(), 0xe220_a839_7b1d_cdaf);
        let mut r = SplitMix64::derived(&[1, 2, 3]);
        let mut counts = [0usize; 4];
        for _ in 0..4000 {
            counts[r.below(4) as usize] += 1;
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
        }
        assert!(counts.iter().all(|&c| (850..1150).contains(&c)), "{counts:?}");
        assert_ne!(SplitMix64::derived(&[1, 2]).next_u64(), SplitMix64::derived(&[2, 1]).next_u64());
    }
}
