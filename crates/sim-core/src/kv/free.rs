//! A pool's free stack, stored lazily: the units never handed out are a range, not a list.
//!
//! The stack a pool of `total` units starts with is `(0..total).rev()` (unit 0 on top); a
//! freed unit is pushed on top. So at any time it is the units never handed out, highest at
//! the bottom, with every freed unit above them: [`FreeStack`] keeps the first part as the
//! range `fresh` and the second as a list, and takes units in exactly the order the whole
//! stack would give them. A pool's memory then follows the units it has handed out
//! ([`FreeStack::issued`]), not its size: 10⁹ blocks cost nothing until they are used.
//!
//! The list has room for every unit handed out (a freed unit never makes it grow): it is
//! reserved, fallibly, when a fresh unit is handed out ([`FreeStack::make_room`]), with room
//! for the free queue's holes too when the pool caches (the list becomes that queue when its
//! cache wakes, [`crate::kv::prefix::BlockCache::activate`]).

use std::collections::TryReserveError;
use std::ops::Range;

/// Free units, a stack: `freed` on top (its last entry taken next), then `fresh` from its
/// start.
#[derive(Debug, Clone)]
pub struct FreeStack {
    /// Units freed since they were handed out, the top (taken next) last.
    freed: Vec<u32>,
    /// Units never handed out, taken lowest first once `freed` is empty.
    fresh: Range<u32>,
}

impl FreeStack {
    /// Every unit of a pool of `total` free, none handed out (nothing allocated).
    pub fn new(total: u32) -> FreeStack {
        FreeStack { freed: Vec::new(), fresh: 0..total }
    }

    /// Free units.
    #[inline]
    pub fn len(&self) -> usize {
        self.freed.len() + self.fresh.len()
    }

    /// No free unit.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Units handed out at some time (all below this; those from it on never were).
    #[inline]
    pub fn issued(&self) -> u32 {
        self.fresh.start
    }

    /// Room in the list for `units`, fallibly: every unit handed out once `need` more are
    /// taken, plus `extra(issued)` (the free queue's holes, for a caching pool). A no-op when
    /// the freed units cover `need` (taking them hands out nothing new).
    #[inline]
    pub fn make_room(&mut self, need: usize, extra: impl Fn(u32) -> u32) -> Result<(), TryReserveError> {
        let new = need.saturating_sub(self.freed.len()).min(self.fresh.len());
        if new == 0 {
            return Ok(());
        }
        let issued = self.fresh.start + new as u32;
        let want = issued as usize + extra(issued) as usize;
        if self.freed.capacity() < want {
            self.freed.try_reserve(want - self.freed.len())?;
        }
        Ok(())
    }

    /// Room reserved up front for `units` handed out (and `extra(units)` more), so that a
    /// run that hands out no more never grows the list.
    pub fn reserve_exact(&mut self, units: u32, extra: impl Fn(u32) -> u32) -> Result<(), TryReserveError> {
        let units = units.min(self.fresh.end);
        let want = units as usize + extra(units) as usize;
        self.freed.try_reserve_exact(want.saturating_sub(self.freed.len()))
    }

    /// Take the top unit.
    #[inline]
    pub fn pop(&mut self) -> Option<u32> {
        self.freed.pop().or_else(|| self.fresh.next())
    }

    /// Append the top `need` units to `table`, top first (the caller has checked there are
    /// that many).
    #[inline]
    pub fn take_into(&mut self, table: &mut Vec<u32>, need: usize) {
        let old = need.min(self.freed.len());
        let at = self.freed.len() - old;
        table.extend(self.freed.drain(at..).rev());
        let new = (need - old).min(self.fresh.len()) as u32;
        table.extend(self.fresh.start..self.fresh.start + new);
        self.fresh.start += new;
    }

    /// Push `units`, the last on top (no allocation: they were handed out, so there is room).
    #[inline]
    pub fn push_all(&mut self, units: impl Iterator<Item = u32>) {
        self.freed.extend(units);
    }

    /// The free units, bottom first (the order of the whole stack).
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.fresh.clone().rev().chain(self.freed.iter().copied())
    }

    /// The free units handed out before, bottom first.
    pub fn freed(&self) -> impl Iterator<Item = u32> + '_ {
        self.freed.iter().copied()
    }

    /// Free exactly `fresh` (highest at the bottom), keeping the list's allocation: a pool
    /// emptied, or a model checker's canonical state.
    pub fn reset(&mut self, fresh: Range<u32>) {
        self.freed.clear();
        self.fresh = fresh;
    }

    /// Take the whole stack (it is left empty): its freed units, the top last, and the
    /// range of units never handed out.
    pub fn take(&mut self) -> (Vec<u32>, Range<u32>) {
        let end = self.fresh.end;
        (std::mem::take(&mut self.freed), std::mem::replace(&mut self.fresh, end..end))
    }

    /// Hand back the list's allocation (emptied) with `fresh` free: a pool emptied after its
    /// cache took the list over.
    pub fn restore(&mut self, mut list: Vec<u32>, fresh: Range<u32>) {
        list.clear();
        self.freed = list;
        self.fresh = fresh;
    }

    /// Entries the list has room for (tests).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.freed.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The lazy stack hands out and lists units exactly as the whole stack,
        /// `(0..total).rev()` with freed units pushed on top, does.
        #[test]
        fn the_lazy_stack_is_the_whole_stack(
            total in 0u32..40,
            ops in prop::collection::vec((0u8..3, 0u8..8), 0..80),
        ) {
            let mut lazy = FreeStack::new(total);
            let mut eager: Vec<u32> = (0..total).rev().collect();
            let mut held: Vec<u32> = Vec::new();
            for (op, n) in ops {
                match op {
                    0 => {
                        lazy.make_room(1, |_| 0).unwrap();
                        let u = lazy.pop();
                        prop_assert_eq!(u, eager.pop());
                        held.extend(u);
                    }
                    1 => {
                        let n = usize::from(n).min(eager.len());
                        lazy.make_room(n, |_| 0).unwrap();
                        let cap = lazy.capacity();
                        let (mut a, at) = (Vec::new(), eager.len() - n);
                        lazy.take_into(&mut a, n);
                        let b: Vec<u32> = eager.drain(at..).rev().collect();
                        prop_assert_eq!(&a, &b);
                        prop_assert!(cap >= lazy.issued() as usize && lazy.capacity() == cap);
                        held.extend(a);
                    }
                    _ => {
                        let n = usize::from(n).min(held.len());
                        let back: Vec<u32> = held.drain(held.len() - n..).collect();
                        let cap = lazy.capacity();
                        lazy.push_all(back.iter().rev().copied());
                        eager.extend(back.iter().rev());
                        prop_assert_eq!(lazy.capacity(), cap, "a freed unit never grows the list");
                    }
                }
                prop_assert_eq!(lazy.len(), eager.len());
                prop_assert_eq!(lazy.iter().collect::<Vec<_>>(), eager.clone());
            }
        }
    }
}
