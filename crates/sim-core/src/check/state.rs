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

use crate::engine::{Engine, Replica};
use crate::request::{Req, Status};
use crate::sched::SchedState;

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

/// Statuses by code (a table: decoding does not branch on the status).
const STATUS_OF: [Status; 7] = [
    Status::Pending,
    Status::Dispatching,
    Status::Waiting,
    Status::Running,
    Status::Finished,
    Status::Rejected,
    Status::Transferring,
];

#[inline]
fn status_of(c: u8) -> Status {
    STATUS_OF.get(c as usize).copied().unwrap_or(Status::Rejected)
}

/// Pack `e`'s state (plus the per-request timeliness counters `wait`) into `out`.
/// Sizes are bounded by the checker's limits (≤ 255 requests and units, lengths < 65,536).
pub fn encode(e: &Engine, wait: &[u8], out: &mut Vec<u8>) {
    out.clear();
    encode_into(e, wait, out);
}

/// [`encode`] appending to `out` (the explorer packs a batch of successors back to back).
pub fn encode_into(e: &Engine, wait: &[u8], out: &mut Vec<u8>) {
    out.reserve(e.reqs.len() * REQ_BYTES + 16 + e.dispatch.len());
    for (r, &w) in e.reqs.iter().zip(wait) {
        let mut rec = [0u8; REQ_BYTES];
        rec[0] = status_code(r.status);
        rec[1] = if r.replica < 0 { u8::MAX } else { r.replica as u8 };
        rec[2..4].copy_from_slice(&(r.computed as u16).to_le_bytes());
        rec[4..6].copy_from_slice(&(r.generated as u16).to_le_bytes());
        rec[6..8].copy_from_slice(&(r.prefill_target as u16).to_le_bytes());
        rec[8] = r.blocks.len() as u8;
        rec[9] = w;
        out.extend_from_slice(&rec);
    }
    for rep in &e.replicas {
        let st = &rep.sched;
        let mut head = [0u8; 11];
        // Bit 0: a step is in flight; bit 1: its plan follows. With a topology an idle
        // replica's last plan is kept too: a dropped step's completion coming due later
        // would meet it (the explorer's `Stale` action), so it is part of the state.
        let plan = rep.busy || (e.fabric.is_some() && !st.plan.is_empty());
        head[0] = rep.busy as u8 | (plan as u8) << 1;
        head[1..5].copy_from_slice(&(rep.outstanding_tokens as u32).to_le_bytes());
        head[5..9].copy_from_slice(&(st.used_slots as u32).to_le_bytes());
        head[9] = st.kv.free_units() as u8;
        head[10] = st.waiting.len() as u8;
        out.extend_from_slice(&head);
        out.extend(st.waiting.iter().map(|id| id as u8));
        out.push(st.running.len() as u8);
        out.extend(st.running.iter().map(|&id| id as u8));
        if plan {
            out.push(st.plan.len() as u8);
            for &(id, n) in &st.plan {
                let [a, b] = (n as u16).to_le_bytes();
                out.extend_from_slice(&[id as u8, a, b]);
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
    fn u32(&mut self) -> u32 {
        let v = u32::from_le_bytes(self.b[self.at..self.at + 4].try_into().unwrap_or([0; 4]));
        self.at += 4;
        v
    }
    fn skip(&mut self, n: usize) {
        self.at += n;
    }
    /// Skip the rest of a replica section after its waiting count `nw`: the waiting ids,
    /// the running ones, and (when kept) the step's plan entries of 3 bytes.
    fn skip_queues(&mut self, nw: usize, busy: bool) {
        self.skip(nw);
        let nr = self.u8() as usize;
        self.skip(nr);
        if busy {
            let np = self.u8() as usize;
            self.skip(3 * np);
        }
    }
}

/// Every replica (the mask of [`decode`]).
pub const ALL_REPLICAS: u64 = u64::MAX;

/// Replica `i`'s bit of a mask; replicas past 63 share every bit (never split).
#[inline]
fn bit(i: usize) -> u64 {
    1u64.checked_shl(i as u32).filter(|_| i < 64).unwrap_or(ALL_REPLICAS)
}

/// Where each replica's section of a packed state starts, and the router's: found by a
/// full [`decode`], reused by the partial decodes of the same state.
#[derive(Debug, Default, Clone)]
pub struct Layout {
    reps: Vec<u32>,
    tail: u32,
    /// Scratch: the next unit id of each replica while tables are laid out.
    next: Vec<u32>,
}

/// Load a packed state into `e` (built from the same scenario), filling `wait`: with
/// [`ALL_REPLICAS`], the whole state (and `layout`); with a smaller mask, only the
/// replicas of the mask with their requests, the requests on no replica and the router —
/// which undoes an action that touched only those ([`touched`]) on an engine loaded with
/// this state. Units get fresh ids (each request's table in id order, then the free list),
/// waiting queues keys 1, 2, … in queue order. Only states whose invariants held are ever
/// loaded.
pub fn decode(e: &mut Engine, bytes: &[u8], wait: &mut [u8], mask: u64, layout: &mut Layout) {
    e.reset_transient();
    let n = e.reqs.len();
    let reps = e.replicas.len();
    let full = mask == ALL_REPLICAS;
    let mut done = 0u64;
    // Units: each request's table in id order (here), then the free list (below).
    layout.next.clear();
    layout.next.resize(reps, 0);
    for (i, (r, w)) in e.reqs.iter_mut().zip(wait.iter_mut()).enumerate() {
        let rec = &bytes[i * REQ_BYTES..(i + 1) * REQ_BYTES];
        let status = status_of(rec[0]);
        done += matches!(status, Status::Finished | Status::Rejected) as u64;
        *w = rec[9];
        let replica = if rec[1] == u8::MAX { -1 } else { rec[1] as i32 };
        if replica >= 0 && mask & bit(replica as usize) == 0 {
            continue;
        }
        r.status = status;
        r.replica = replica;
        r.computed = u16::from_le_bytes([rec[2], rec[3]]) as u32;
        r.generated = u16::from_le_bytes([rec[4], rec[5]]) as u32;
        r.prefill_target = u16::from_le_bytes([rec[6], rec[7]]) as u32;
        r.order = 0;
        r.preemptions = 0;
        r.blocks.clear();
        let held = rec[8] as u32;
        if held > 0 {
            if let Some(next) = usize::try_from(replica).ok().and_then(|ri| layout.next.get_mut(ri)) {
                r.blocks.extend(*next..*next + held);
                *next += held;
            }
        }
    }
    e.done_requests = done;
    if full {
        layout.reps.clear();
    }
    let params = e.params;
    let mut rd = Rd { b: bytes, at: n * REQ_BYTES };
    let mut max_rank = 0i64;
    for ri in 0..reps {
        if full {
            layout.reps.push(rd.at as u32);
        } else {
            rd.at = layout.reps[ri] as usize;
        }
        let on = mask & bit(ri) != 0;
        let flags = rd.u8();
        let (busy, with_plan) = (flags & 1 != 0, flags & 2 != 0);
        let outstanding = rd.u32() as u64;
        let used_slots = rd.u32() as u64;
        let free = rd.u8() as u32;
        let nw = rd.u8() as usize;
        max_rank = max_rank.max(nw as i64);
        if !on {
            // Skip the section (its length is in its counts).
            rd.skip_queues(nw, with_plan);
            continue;
        }
        let next = layout.next[ri];
        let rep = &mut e.replicas[ri];
        rep.busy = busy;
        rep.outstanding_tokens = outstanding;
        let st = &mut rep.sched;
        st.used_slots = used_slots;
        let total = st.kv.total();
        st.kv.reset_free(next..total.min(next + free));
        st.waiting.clear();
        for rank in 1..=nw as i64 {
            let id = rd.u8() as u32;
            let r = &mut e.reqs[id as usize];
            r.order = rank;
            st.waiting.insert(crate::sched::SchedState::waiting_key(&params, r), id);
        }
        st.running.clear();
        let nr = rd.u8() as usize;
        st.running.extend(bytes[rd.at..rd.at + nr].iter().map(|&id| id as u32));
        rd.skip(nr);
        st.plan.clear();
        if with_plan {
            let np = rd.u8() as usize;
            let plan = bytes[rd.at..rd.at + 3 * np].chunks_exact(3);
            st.plan.extend(plan.map(|c| (c[0] as u32, u16::from_le_bytes([c[1], c[2]]) as u32)));
            rd.skip(3 * np);
        }
        st.preempted.clear();
        st.front_counter = 0;
    }
    if full {
        layout.tail = rd.at as u32;
    } else {
        rd.at = layout.tail as usize;
    }
    e.order_counter = max_rank;
    e.rr_next = rd.u8() as usize;
    e.dispatch.clear();
    let nd = rd.u8() as usize;
    e.dispatch.extend(bytes[rd.at..rd.at + nd].iter().map(|&id| id as u32));
    debug_assert_eq!(rd.at + nd, bytes.len());
}

/// The replicas an action changed in an engine loaded with the packed state `bytes`: the
/// replica whose step completed (`completed`) and every replica the router dispatched a
/// request to. No other replica can change: a replica's scheduler runs only when it is
/// offered a step, which happens only to these, and it touches only its own requests.
pub fn touched(e: &Engine, bytes: &[u8], completed: Option<u32>) -> u64 {
    let mut mask = completed.map_or(0, |r| bit(r as usize));
    for (i, r) in e.reqs.iter().enumerate() {
        if bytes[i * REQ_BYTES + 1] == u8::MAX && r.replica >= 0 {
            mask |= bit(r.replica as usize);
        }
    }
    mask
}

/// The Petri-net marking of a packed state without loading it: requests per status code
/// and free units summed over the replicas.
pub fn marking(bytes: &[u8], requests: usize, replicas: usize) -> ([u8; 6], u32) {
    let mut counts = [0u8; 6];
    for rec in bytes[..requests * REQ_BYTES].chunks_exact(REQ_BYTES) {
        if let Some(c) = counts.get_mut(rec[0] as usize) {
            *c += 1;
        }
    }
    let mut rd = Rd { b: bytes, at: requests * REQ_BYTES };
    let mut free = 0u32;
    for _ in 0..replicas {
        let with_plan = rd.u8() & 2 != 0;
        rd.skip(8);
        free += rd.u8() as u32;
        let nw = rd.u8() as usize;
        rd.skip_queues(nw, with_plan);
    }
    (counts, free)
}

/// 64-bit hash of a packed state (deterministic): multiply-xorshift over 8-byte words in
/// four independent lanes (word i feeds lane i mod 4), so that the multiplications of a
/// state's words overlap instead of waiting for one another, then the lanes are mixed.
#[inline]
pub fn hash(b: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    const SEEDS: [u64; 4] = [0, 0xC2B2_AE3D_27D4_EB4F, 0x1656_67B1_9E37_79F9, 0x85EB_CA77_C2B2_AE63];
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
    let step = |l: u64, w: u64| (l ^ w).wrapping_mul(K).rotate_left(29);
    let mut lanes = SEEDS;
    lanes[0] ^= b.len() as u64;
    let mut rounds = b.chunks_exact(32);
    for c in &mut rounds {
        for (l, w) in lanes.iter_mut().zip(c.chunks_exact(8)) {
            *l = step(*l, word(w));
        }
    }
    let mut words = rounds.remainder().chunks_exact(8);
    for (l, w) in lanes.iter_mut().zip(&mut words) {
        *l = step(*l, word(w));
    }
    let mut tail = 0u64;
    for (i, &x) in words.remainder().iter().enumerate() {
        tail |= (x as u64) << (8 * i);
    }
    lanes[3] = step(lanes[3], tail);
    let h = (lanes[0] ^ lanes[1].rotate_left(17) ^ lanes[2].rotate_left(31) ^ lanes[3].rotate_left(47)).wrapping_mul(K);
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
    /// Power-of-two size, at most three quarters full; linear probing.
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

    /// The id of `state`, if it is stored.
    pub fn find(&self, state: &[u8]) -> Option<u32> {
        let n = self.table.len();
        if n == 0 {
            return None;
        }
        let h = hash(state);
        let mut slot = h as usize & (n - 1);
        loop {
            let s = self.table[slot];
            if s.id1 == 0 {
                return None;
            }
            if s.hash == h && self.bytes.get(s.off as usize..s.off as usize + state.len()) == Some(state) {
                return Some(s.id1 - 1);
            }
            slot = (slot + 1) & (n - 1);
        }
    }

    /// [`Store::intern`] with the state's [`hash`] already computed.
    pub fn intern_hashed(&mut self, state: &[u8], h: u64) -> (u32, bool) {
        if (self.offs.len() + 1) * 4 > self.table.len() * 3 {
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
        let size = (self.table.len() * 2).max(64);
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

// What the packed state keeps of the engine, field by field. Each function below
// destructures one engine type WITHOUT `..`: adding a field to `Req`, `Replica` or
// `SchedState` then fails to compile here until the field is listed and classified —
// packed by [`encode_into`] and restored by [`decode`], or left out with the reason it
// cannot tell two states apart. Without this, new engine state would silently merge
// distinct states in the checker. (The engine-wide fields the state keeps — `rr_next` and
// `dispatch` — are private to the engine and listed in [`encode_into`].)

/// Every field of a request, by what the packed state does with it.
#[cfg_attr(not(test), allow(dead_code))]
fn req_fields(r: &Req) {
    let Req {
        // Packed.
        status: _,
        replica: _,
        computed: _,
        generated: _,
        prefill_target: _,
        blocks: _, // how many units only (ids are renamed, see the module doc)
        // Fixed by the scenario: the same in every state of one check (arrival times
        // included: every order of arrivals is explored, the times are never advanced).
        prompt: _,
        output: _,
        req_block: _,
        id: _,
        priority: _,
        arrival_ns: _,
        template_depth: _,
        adversarial: _,
        lora: _,
        // A metric, which no decision reads.
        lora_waited: _,
        // Rebuilt by `decode` from the waiting queue's order.
        order: _,
        // Metrics and times, which no decision reads in a check (steps are unpriced, there
        // is no dispatch timeout, and `preemptions` is read only with prefix caching).
        preemptions: _,
        first_sched_ns: _,
        first_token_ns: _,
        finish_ns: _,
        reason: _,
        queued_ns: _,
        // Prefix caching only, which is off in every check.
        apc_private: _,
        apc_gate: _,
    } = r;
}

/// Every field of a replica, by what the packed state does with it.
#[cfg_attr(not(test), allow(dead_code))]
fn replica_fields(rep: &Replica) {
    let Replica {
        // Packed (the scheduler's state field by field in `sched_fields`).
        sched: _,
        busy: _,
        outstanding_tokens: _,
        // The identity of the step in flight: the explorer completes that step by its own
        // identity and a dropped one by 0, so only `busy` (and the kept plan) matter.
        step_seq: _,
        // Times and prices of steps, which are unpriced in a check.
        step_start_ns: _,
        last_end_ns: _,
        last_dur_ns: _,
        last_comm_s: _,
        last_decision_ns: _,
        // Kernels compiled while serving: steps are unpriced in a check (and its linear
        // cost model has no warm-up), so it stays 0.
        compiled: _,
        // Metrics.
        series: _,
        stats: _,
        // Lazy steady decode steps: off in a check (`steady_ok = false`), reset at load.
        steady: _,
        // The lazy decode set: off in a check too, reset at load.
        set: _,
        // Async scheduling's arrivals during a step. NOT packed: empty unless a check's
        // scenario sets `scheduler.async_scheduling = true` (the checker's linear cost
        // model leaves it off by default); with it on, a check is not sound today (its
        // requests vanish at load, a false `one_state` violation).
        inbox: _,
    } = rep;
}

/// Every field of a replica's scheduler state, by what the packed state does with it.
#[cfg_attr(not(test), allow(dead_code))]
fn sched_fields(st: &SchedState) {
    let SchedState {
        // Packed: queue and list orders, KV slots written, free units (ids renamed), and
        // the plan of a step in flight.
        waiting: _,
        running: _,
        used_slots: _,
        kv: _,
        plan: _,
        // Rebuilt by `decode`: preempted requests go before keys 1, 2, … again.
        front_counter: _,
        // Scratch of the step being planned, rebuilt when the next step is planned.
        preempted: _,
        budget_left: _,
        shape: _,
        prefill_items: _,
        shape_dirty: _,
        step_queries: _,
        step_hits: _,
        admitted_hits: _,
        admission: _,
        step_loras: _,
        // A counter (metrics), which no decision reads.
        lora_waits: _,
    } = st;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Scenario;
    use crate::{Format, SimOptions};

    /// A fresh engine of a two-replica check configuration.
    fn engine() -> Engine {
        let text = super::super::tests::small("vllm", None, 6, 2, 8, &[(6, 4, 0), (5, 3, 0)]);
        let sc = Scenario::parse(&text, Format::Json).unwrap();
        crate::api::build_inner(sc, SimOptions::default(), None, true).unwrap().engine
    }

    #[test]
    fn every_packed_field_changes_the_packed_state() {
        let base = engine();
        // The classification above covers every field (it would not compile otherwise).
        req_fields(&base.reqs[0]);
        replica_fields(&base.replicas[0]);
        sched_fields(&base.replicas[0].sched);
        let wait = vec![0u8; base.reqs.len()];
        let mut before = Vec::new();
        encode(&base, &wait, &mut before);
        type Change = (&'static str, fn(&mut Engine));
        let changes: &[Change] = &[
            ("status", |e| e.reqs[0].status = Status::Waiting),
            ("replica", |e| e.reqs[0].replica = 1),
            ("computed", |e| e.reqs[0].computed = 3),
            ("generated", |e| e.reqs[0].generated = 2),
            ("prefill_target", |e| e.reqs[0].prefill_target = 6),
            ("blocks", |e| e.reqs[0].blocks.push(0)),
            ("busy", |e| e.replicas[0].busy = true),
            ("outstanding_tokens", |e| e.replicas[0].outstanding_tokens = 9),
            ("used_slots", |e| e.replicas[1].sched.used_slots = 4),
            ("running", |e| e.replicas[1].sched.running.push(1)),
            ("rr_next", |e| e.rr_next = 1),
            ("dispatch", |e| e.dispatch.push_back(1)),
        ];
        for (name, change) in changes {
            let mut e = engine();
            change(&mut e);
            let mut after = Vec::new();
            encode(&e, &wait, &mut after);
            assert_ne!(after, before, "{name} is not in the packed state");
        }
    }
}
