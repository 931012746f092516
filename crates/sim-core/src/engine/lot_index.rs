//! The least-outstanding-tokens router's index: a tournament tree over the replicas keyed
//! by (no queue room, outstanding tokens, index), so that a dispatch costs O(log n) instead
//! of a scan of every replica (issue 30: at 1,000 replicas the scan was most of a
//! saturated run's work).
//!
//! A replica's key changes only where the engine touches it: a step completing there,
//! a step starting there (its waiting queue shrinks, its inbox is released), a request
//! routed there, a client timing out there. Each of those marks it dirty
//! ([`LotIndex::touch`]); a pick first re-reads the dirty replicas' keys, then reads the
//! root. The keys are read lazily, at the pick, so a replica marked before its change and
//! not picked in between is read after it. Used only where nothing else decides room (no
//! fabric whose links take replicas down, no autoscaler draining them): elsewhere the scan
//! runs as before. Debug builds check every pick against the scan.

/// A key: (1 when the replica has no queue room, else 0) · 2⁶⁴ + outstanding tokens.
type Key = (u128, u32);

const EMPTY: Key = (u128::MAX, u32::MAX);

#[derive(Debug, Clone)]
pub(crate) struct LotIndex {
    /// Leaves at `size + i`; node k holds the least of its two children.
    tree: Vec<Key>,
    size: usize,
    dirty: Vec<u32>,
    is_dirty: Vec<bool>,
}

impl LotIndex {
    /// An index over `n` replicas, every one dirty (read at the first pick).
    pub(crate) fn new(n: usize) -> LotIndex {
        let size = n.next_power_of_two().max(1);
        LotIndex { tree: vec![EMPTY; 2 * size], size, dirty: (0..n as u32).collect(), is_dirty: vec![true; n] }
    }

    pub(crate) fn len(&self) -> usize {
        self.is_dirty.len()
    }

    /// Replica `rep`'s key may have changed: re-read it at the next pick.
    #[inline]
    pub(crate) fn touch(&mut self, rep: usize) {
        if let Some(f) = self.is_dirty.get_mut(rep) {
            if !*f {
                *f = true;
                self.dirty.push(rep as u32);
            }
        }
    }

    /// Re-read the dirty replicas' keys with `key(rep) = (has room, outstanding tokens)`,
    /// then return the replica with room and the fewest outstanding tokens (then the lower
    /// index), if any has room.
    pub(crate) fn pick(&mut self, key: impl Fn(usize) -> (bool, u64)) -> Option<usize> {
        for k in 0..self.dirty.len() {
            let rep = self.dirty[k] as usize;
            self.is_dirty[rep] = false;
            let (room, out) = key(rep);
            self.set(rep, (u128::from(!room) << 64 | u128::from(out), rep as u32));
        }
        self.dirty.clear();
        let (k, rep) = self.tree[1.min(self.tree.len() - 1)];
        (k >> 64 == 0 && rep != u32::MAX).then_some(rep as usize)
    }

    fn set(&mut self, rep: usize, key: Key) {
        let mut pos = self.size + rep;
        self.tree[pos] = key;
        while pos > 1 {
            pos /= 2;
            let (a, b) = (self.tree[2 * pos], self.tree[2 * pos + 1]);
            let m = if b < a { b } else { a };
            if self.tree[pos] == m {
                break; // nothing above changes
            }
            self.tree[pos] = m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LotIndex;

    /// Random keys, random touches: every pick equals the scan's answer.
    #[test]
    fn every_pick_is_the_scans_pick() {
        let mut state = 0x1234_5678u64;
        let mut rnd = move |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        for n in [1usize, 2, 3, 7, 64, 100] {
            let mut keys: Vec<(bool, u64)> = (0..n).map(|_| (true, 0)).collect();
            let mut ix = LotIndex::new(n);
            for _ in 0..2000 {
                for _ in 0..rnd(4) {
                    let i = rnd(n as u64) as usize;
                    keys[i] = (rnd(5) != 0, rnd(50));
                    ix.touch(i);
                }
                let scan = (0..n).filter(|&i| keys[i].0).min_by_key(|&i| (keys[i].1, i));
                assert_eq!(ix.pick(|i| keys[i]), scan);
            }
        }
    }
}
