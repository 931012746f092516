//! Canonical states: an engine's scheduling state packed into a few dozen bytes, and loaded
//! back into the same engine, so that the explorer runs the real engine code on every
//! transition and stores only bytes.
//!
//! What is kept is exactly what future behaviour depends on: per request its status,
//! replica, progress (`computed`, `generated`, `prefill_target`) and how many KV units it
//! holds; per replica whether a step is in flight and its plan, the waiting queue and the
//! running list in order, the router's counters and queue. Metrics (times, preemption
//! counts, allocation counters) are dropped. Two reductions make the encoding canonical:
//! - **block ids**: the scheduler never looks at a unit's id, only at the free list's
//!   length, so states differing by a renaming of ids are one state. Loading assigns ids
//!   afresh (each request's table, then the free list); invariants about ids are checked
//!   on the concrete state *before* it is packed.
//! - **queue orders**: waiting-queue keys are unbounded counters (arrivals count up,
//!   preemptions count down); only their relative order matters, so a queue is stored as
//!   its list of ids and reloaded with keys 1, 2, … (new arrivals still sort after every
//!   existing entry and re-queued requests before, as in the engine).

use crate::engine::Engine;
use crate::request::Status;

/// Bytes of one request's record.
const REQ_BYTES: usize = 10;

fn status_code(s: Status) -> u8 {
    match s {
        Status::Pending => 0,
        Status::Dispatching => 1,
        Status::Waiting => 2,
        Status::Running => 3,
        Status::Finished => 4,
        Status::Rejected => 5,
        Status::Transferring => 6,
    }
}

fn status_of(c: u8) -> Status {
    match c {
        0 => Status::Pending,
        1 => Status::Dispatching,
        2 => Status::Waiting,
        3 => Status::Running,
        4 => Status::Finished,
        6 => Status::Transferring,
        _ => Status::Rejected,
    }
}

/// Pack `e`'s state (plus the per-request timeliness counters `wait`) into `out`.
/// Sizes are bounded by the checker's limits (≤ 255 requests and units, lengths < 65,536).
pub fn encode(e: &Engine, wait: &[u8], out: &mut Vec<u8>) {
    out.clear();
    for (r, &w) in e.reqs.iter().zip(wait) {
        out.push(status_code(r.status));
        out.push(if r.replica < 0 { u8::MAX } else { r.replica as u8 });
        out.extend_from_slice(&(r.computed as u16).to_le_bytes());
        out.extend_from_slice(&(r.generated as u16).to_le_bytes());
        out.extend_from_slice(&(r.prefill_target as u16).to_le_bytes());
        out.push(r.blocks.len() as u8);
        out.push(w);
    }
    for rep in &e.replicas {
        let st = &rep.sched;
        out.push(rep.busy as u8);
        out.extend_from_slice(&(rep.outstanding_tokens as u32).to_le_bytes());
        out.extend_from_slice(&(st.used_slots as u32).to_le_bytes());
        out.push(st.kv.free_units() as u8);
        out.push(st.waiting.len() as u8);
        out.extend(st.waiting.iter().map(|id| id as u8));
        out.push(st.running.len() as u8);
        out.extend(st.running.iter().map(|&id| id as u8));
        if rep.busy {
            out.push(st.plan.len() as u8);
            for &(id, n) in &st.plan {
                out.push(id as u8);
                out.extend_from_slice(&(n as u16).to_le_bytes());
            }
        }
    }
    out.push(e.rr_next as u8);
    out.push(e.dispatch.len() as u8);
    out.extend(e.dispatch.iter().map(|&id| id as u8));
}

/// A cursor over packed bytes.
struct Rd<'a> {
    b: &'a [u8],
    at: usize,
}

impl Rd<'_> {
    fn u8(&mut self) -> u8 {
        let v = self.b[self.at];
        self.at += 1;
        v
    }
    fn u16(&mut self) -> u16 {
        let v = u16::from_le_bytes([self.b[self.at], self.b[self.at + 1]]);
        self.at += 2;
        v
    }
    fn u32(&mut self) -> u32 {
        let v = u32::from_le_bytes(self.b[self.at..self.at + 4].try_into().unwrap_or([0; 4]));
        self.at += 4;
        v
    }
}

/// Load a packed state into `e` (built from the same scenario), filling `wait`. Only
/// states whose invariants held are ever loaded.
pub fn decode(e: &mut Engine, bytes: &[u8], wait: &mut [u8]) {
    e.reset_transient();
    let mut rd = Rd { b: bytes, at: 0 };
    let mut done = 0u64;
    let mut held = [0u8; 256];
    for (i, r) in e.reqs.iter_mut().enumerate() {
        r.status = status_of(rd.u8());
        let rep = rd.u8();
        r.replica = if rep == u8::MAX { -1 } else { rep as i32 };
        r.computed = rd.u16() as u32;
        r.generated = rd.u16() as u32;
        r.prefill_target = rd.u16() as u32;
        held[i] = rd.u8();
        wait[i] = rd.u8();
        r.blocks.clear();
        r.order = 0;
        r.preemptions = 0;
        done += matches!(r.status, Status::Finished | Status::Rejected) as u64;
    }
    debug_assert_eq!(rd.at, e.reqs.len() * REQ_BYTES);
    e.done_requests = done;
    let priority_order = e.params.priority_order;
    let mut max_rank = 0i64;
    for ri in 0..e.replicas.len() {
        // Fresh unit ids: each request's table in id order, then the free list.
        let total = e.replicas[ri].sched.kv.total();
        let mut next = 0u32;
        for (i, r) in e.reqs.iter_mut().enumerate() {
            if r.replica == ri as i32 && held[i] > 0 {
                r.blocks.extend(next..next + held[i] as u32);
                next += held[i] as u32;
            }
        }
        let rep = &mut e.replicas[ri];
        rep.busy = rd.u8() != 0;
        rep.outstanding_tokens = rd.u32() as u64;
        let st = &mut rep.sched;
        st.used_slots = rd.u32() as u64;
        let free = rd.u8() as u32;
        let list = st.kv.free_list_mut();
        list.clear();
        list.extend((next..total.min(next + free)).rev());
        st.waiting.clear();
        let nw = rd.u8();
        for rank in 1..=nw as i64 {
            let id = rd.u8() as u32;
            let r = &mut e.reqs[id as usize];
            r.order = rank;
            st.waiting.insert((if priority_order { r.priority } else { 0 }, rank), id);
        }
        max_rank = max_rank.max(nw as i64);
        st.running.clear();
        let nr = rd.u8();
        for _ in 0..nr {
            st.running.push(rd.u8() as u32);
        }
        st.plan.clear();
        st.preempted.clear();
        st.front_counter = 0;
        if rep.busy {
            let np = rd.u8();
            for _ in 0..np {
                let id = rd.u8() as u32;
                let n = rd.u16() as u32;
                st.plan.push((id, n));
            }
        }
    }
    e.order_counter = max_rank;
    e.rr_next = rd.u8() as usize;
    e.dispatch.clear();
    let nd = rd.u8();
    for _ in 0..nd {
        e.dispatch.push_back(rd.u8() as u32);
    }
}

/// 64-bit hash of a packed state (multiply-xorshift over 8-byte words; deterministic).
#[inline]
pub fn hash(b: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (b.len() as u64).wrapping_mul(K);
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
        h = (h ^ w).wrapping_mul(K).rotate_left(29);
    }
    let mut tail = 0u64;
    for (i, &x) in chunks.remainder().iter().enumerate() {
        tail |= (x as u64) << (8 * i);
    }
    h = (h ^ tail).wrapping_mul(K);
    h ^ (h >> 32)
}

/// One slot of the [`Store`] index: enough to reject a mismatch, to compare a candidate
/// and to re-place the entry when the table grows without touching any other array.
///
/// No length is kept: the encoding is prefix-free (a decoder of a given engine's shape
/// knows where each state ends), so `state == bytes[off..off + state.len()]` holds only for
/// the stored state itself — a shorter stored state would be a proper prefix of `state`,
/// a longer one would have `state` as a proper prefix.
#[derive(Clone, Copy, Default)]
struct Slot {
    hash: u64,
    /// Id + 1 (0 = empty).
    id1: u32,
    /// Where the state's bytes start.
    off: u32,
}

/// Every state seen, packed back to back, with an open-addressing index for lookups.
/// Ids are dense and in insertion (= breadth-first) order.
#[derive(Default)]
pub struct Store {
    bytes: Vec<u8>,
    offs: Vec<u32>,
    /// Power-of-two size, at most half full; linear probing.
    table: Vec<Slot>,
}

impl Store {
    pub fn len(&self) -> usize {
        self.offs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offs.is_empty()
    }

    pub fn get(&self, id: u32) -> &[u8] {
        let start = self.offs[id as usize] as usize;
        let end = self.offs.get(id as usize + 1).map_or(self.bytes.len(), |&o| o as usize);
        &self.bytes[start..end]
    }

    /// Memory held, in bytes (for the result).
    pub fn memory_bytes(&self) -> usize {
        self.bytes.capacity() + 4 * self.offs.capacity() + std::mem::size_of::<Slot>() * self.table.capacity()
    }

    /// Read the index slot `hash` starts probing at and, when its tag matches, the first
    /// byte of the state it names, so that the cache lines are in cache when
    /// [`Store::intern_hashed`] needs them. Called over a batch of independent hashes, the
    /// misses overlap (a plain load: no `unsafe` prefetch). Returns a value to feed to
    /// `black_box` so that the loads are kept.
    #[inline]
    pub fn touch(&self, hash: u64) -> u32 {
        let n = self.table.len();
        if n == 0 {
            return 0;
        }
        let s = self.table[hash as usize & (n - 1)];
        if s.id1 != 0 && s.hash == hash {
            let end = (s.off as usize + 96).min(self.bytes.len());
            self.bytes[s.off as usize] as u32 + self.bytes[end - 1] as u32
        } else {
            s.id1
        }
    }

    /// The id of `state`, inserting it if new: `(id, is_new)`.
    pub fn intern(&mut self, state: &[u8]) -> (u32, bool) {
        self.intern_hashed(state, hash(state))
    }

    /// [`Store::intern`] with the state's [`hash`] already computed.
    pub fn intern_hashed(&mut self, state: &[u8], h: u64) -> (u32, bool) {
        if (self.offs.len() + 1) * 2 > self.table.len() {
            self.grow();
        }
        let mask = self.table.len() - 1;
        let mut slot = h as usize & mask;
        loop {
            let s = self.table[slot];
            if s.id1 == 0 {
                break;
            }
            if s.hash == h && self.bytes.get(s.off as usize..s.off as usize + state.len()) == Some(state) {
                debug_assert_eq!(self.get(s.id1 - 1), state);
                return (s.id1 - 1, false);
            }
            slot = (slot + 1) & mask;
        }
        let id = self.offs.len() as u32;
        let off = self.bytes.len() as u32;
        self.table[slot] = Slot { hash: h, id1: id + 1, off };
        self.offs.push(off);
        self.bytes.extend_from_slice(state);
        (id, true)
    }

    fn grow(&mut self) {
        let size = (self.table.len() * 2).max(1024);
        let old = std::mem::replace(&mut self.table, vec![Slot::default(); size]);
        let mask = size - 1;
        // Where an entry lands does not change any lookup's answer (only exact matches
        // are returned), so the old slots are re-placed in table order.
        for s in old.into_iter().filter(|s| s.id1 != 0) {
            let mut slot = s.hash as usize & mask;
            while self.table[slot].id1 != 0 {
                slot = (slot + 1) & mask;
            }
            self.table[slot] = s;
        }
    }
}
