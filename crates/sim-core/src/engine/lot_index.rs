//! The least-outstanding-tokens router's index: a tournament tree over the replicas keyed
//! by (no queue room, outstanding tokens, index), so that a dispatch costs O(log n) instead
//! of a scan of every replica (issue 30: at 1,000 replicas the scan was most of a
//! saturated run's work).
//!
//! A replica's key changes only where the engine works on it: a step completing there, a
//! step starting there (its waiting queue shrinks, its inbox is released), a request routed
//! there, a client timing out there. Each of those ends by offering the replica a step
//! ([`Engine::mark`](super::Engine)) or by starting one, and both re-key it then, while its
//! state is still in cache ([`LotIndex::set`], O(log n), usually a level or three: a parent
//! that keeps its minimum stops the climb). Used only where nothing else decides room (no
//! fabric whose links take replicas down, no autoscaler draining them): elsewhere the scan
//! runs as before. Debug builds check every pick against the scan.

/// A key: ((1 when the replica has no queue room, else 0) · 2⁶⁴ + outstanding tokens, index).
type Key = (u128, u32);

const EMPTY: Key = (u128::MAX, u32::MAX);

#[derive(Debug, Clone)]
pub(crate) struct LotIndex {
    /// Leaves at `size + i`; node k holds the least of its two children.
    tree: Vec<Key>,
    size: usize,
    n: usize,
}

impl LotIndex {
    /// An index over `n` replicas keyed by `key(rep) = (has room, outstanding tokens)`.
    pub(crate) fn new(n: usize, key: impl Fn(usize) -> (bool, u64)) -> LotIndex {
        let size = n.next_power_of_two().max(1);
        let mut tree = vec![EMPTY; 2 * size];
        for (rep, leaf) in tree[size..size + n].iter_mut().enumerate() {
            let (room, out) = key(rep);
            *leaf = (u128::from(!room) << 64 | u128::from(out), rep as u32);
        }
        for k in (1..size).rev() {
            tree[k] = tree[2 * k].min(tree[2 * k + 1]);
        }
        LotIndex { tree, size, n }
    }

    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// The replica with room and the fewest outstanding tokens (then the lower index), if
    /// any has room.
    pub(crate) fn pick(&self) -> Option<usize> {
        let (k, rep) = self.tree[1.min(self.tree.len() - 1)];
        (k >> 64 == 0 && rep != u32::MAX).then_some(rep as usize)
    }

    /// Replica `rep` now has (`room`, `outstanding` tokens).
    #[inline]
    pub(crate) fn set(&mut self, rep: usize, room: bool, outstanding: u64) {
        if rep >= self.n {
            return;
        }
        let key = (u128::from(!room) << 64 | u128::from(outstanding), rep as u32);
        let mut pos = self.size + rep;
        if self.tree[pos] == key {
            return;
        }
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

    /// Random keys, random updates: every pick equals the scan's answer.
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
            let mut keys: Vec<(bool, u64)> = (0..n).map(|i| (i % 3 != 0, (i as u64 * 7) % 5)).collect();
            let mut ix = LotIndex::new(n, |i| keys[i]);
            for _ in 0..2000 {
                for _ in 0..rnd(4) {
                    let i = rnd(n as u64) as usize;
                    keys[i] = (rnd(5) != 0, rnd(50));
                    ix.set(i, keys[i].0, keys[i].1);
                }
                let scan = (0..n).filter(|&i| keys[i].0).min_by_key(|&i| (keys[i].1, i));
                assert_eq!(ix.pick(), scan);
            }
        }
    }
}
