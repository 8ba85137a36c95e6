//! A fast, non-cryptographic hasher for the analyzer's own maps (the multiply-rotate scheme
//! rustc uses). Keys are identifiers and body ids from the code being linted: no adversary
//! chooses them to collide, so SipHash's flooding protection buys nothing here and cost ~2% of
//! a run.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

#[derive(Debug, Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut word = [0; 8];
            word.copy_from_slice(c);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

pub type FxBuild = BuildHasherDefault<FxHasher>;
pub type FxHashMap<K, V> = HashMap<K, V, FxBuild>;
pub type FxHashSet<T> = HashSet<T, FxBuild>;

#[cfg(test)]
mod tests {
    use super::FxHashMap;

    #[test]
    fn keys_of_every_length_are_found() {
        let keys: Vec<String> = (0..200)
            .map(|i| "k".repeat(i % 23) + &i.to_string())
            .collect();
        let mut m = FxHashMap::default();
        for (i, k) in keys.iter().enumerate() {
            m.insert(k.clone(), i);
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(m.get(k.as_str()), Some(&i));
        }
        assert_eq!(m.len(), keys.len());
    }
}
