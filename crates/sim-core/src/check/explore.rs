//! The breadth-first explorer. A state is the engine between two instants (see
//! [`super::state`]); an action is one event at a fresh instant — a request that has not
//! arrived arrives, or a replica's in-flight step completes — followed by exactly what the
//! engine does at the end of every instant (drain the router's queue, offer idle replicas a
//! step). Any order of these events is explored, whatever the step durations and arrival
//! times that would produce it: an over-approximation of every timing, so a property that
//! holds here holds for every workload timing and cost model.
//!
//! With a topology, more events are explored (every one at any moment):
//! - **links** named by the scenario's `link_down`/`link_up` events (at most
//!   [`super::MAX_LINKS`]; their times are ignored) go down and come up again, any number of
//!   times: replicas that lose a TP/PP peer stop and their requests move, replicas whose
//!   group is whole again restart, exactly as the simulator does on those events. The state
//!   keeps which of these links are down; the fabric of a state is the initial one with those
//!   links down (taken down in order), so the state's bytes decide every successor;
//! - **completions of dropped steps**: a replica stopped mid-step leaves its step's
//!   completion pending in the simulator's event queue; it comes later, at any moment, and
//!   must change nothing (the state keeps one bit per replica for it);
//! - **KV arrivals** (`disagg`): a prefilled request's KV cache lands at its decode replica
//!   whenever its transfer ends.
//!
//! States are expanded in id order, which is breadth-first order, so the first violation
//! found of each property is one of the shortest. A state is loaded into the engine once
//! per expansion; after each action only what the action touched (the replicas it changed,
//! the router, the requests on no replica) is loaded again for the next one. The engine
//! starts steps unpriced (`Engine::unpriced_steps`): durations do not matter here.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use crate::engine::Engine;
use crate::fabric::Fabric;
use crate::request::Status;
use crate::topo::events::Action as LinkAction;
use crate::SimError;

use super::props::{self, Broken, CAN_FINISH, NO_DEADLOCK, PROPERTIES, TIMELINESS};
use super::state::{decode, encode, encode_into, hash, marking, touched, Layout, Store, ALL_REPLICAS};

/// States expanded per batch: their successors are all generated (and their index slots
/// touched, so the cache misses overlap) before any is interned, in the same order as one
/// at a time, so ids, edges and counterexamples do not depend on the batch size.
const BATCH: usize = 256;

/// A successor generated but not yet interned.
struct Succ {
    act: Action,
    hash: u64,
    /// Its packed bytes in `Explorer::pend`.
    off: u32,
    len: u32,
    done: bool,
    /// Index of what it breaks in `Explorer::broken` (`u32::MAX`: nothing).
    broken: u32,
}

/// One event of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The request (by id) arrives.
    Arrive(u32),
    /// The replica's in-flight step completes.
    Complete(u32),
    /// Explored link `k` (index into the checked links) goes down.
    LinkDown(u32),
    /// Explored link `k` comes up again.
    LinkUp(u32),
    /// The request's KV cache lands at its decode replica (`disagg`).
    Land(u32),
    /// The completion of a step the replica dropped when it stopped comes due.
    Stale(u32),
}

impl Action {
    fn pack(self) -> u16 {
        match self {
            Action::Arrive(i) => i as u16,
            Action::LinkDown(k) => 0x1000 | k as u16,
            Action::LinkUp(k) => 0x2000 | k as u16,
            Action::Land(i) => 0x3000 | i as u16,
            Action::Stale(r) => 0x4000 | r as u16,
            Action::Complete(r) => 0x8000 | r as u16,
        }
    }
    fn unpack(v: u16) -> Action {
        let x = (v & 0x0fff) as u32;
        match v >> 12 {
            0 => Action::Arrive(x),
            1 => Action::LinkDown(x),
            2 => Action::LinkUp(x),
            3 => Action::Land(x),
            4 => Action::Stale(x),
            _ => Action::Complete((v & 0x7fff) as u32),
        }
    }

    /// The replica whose step completes, if this is a completion (of its step in flight or
    /// of a dropped one).
    pub(crate) fn completed(self) -> Option<u32> {
        match self {
            Action::Complete(r) | Action::Stale(r) => Some(r),
            _ => None,
        }
    }
}

/// The links a check explores going down and up, and the fabric of each set of them down.
struct Links {
    /// Topology link ids.
    ids: Vec<u32>,
    /// The fabric with the links of mask `m` down (index `m`), built when first needed.
    fabrics: Vec<Option<Box<Fabric>>>,
    /// Which mask the engine's fabric is now (`u8::MAX`: changed by an action, to reload).
    loaded: u8,
}

/// Reverse sweeps of the liveness fixpoint before it falls back to backward reachability.
const MAX_SWEEPS: u32 = 8;

const VIOLATING: u8 = 1;
const DONE: u8 = 2;

/// The first (shortest) violation found of one property.
#[derive(Debug, Clone)]
pub struct Found {
    pub broken: Broken,
    /// The state where it shows.
    pub state: u32,
}

/// Breadth-first exploration over one engine.
pub struct Explorer {
    pub(crate) engine: Engine,
    store: Store,
    parent: Vec<u32>,
    action: Vec<u16>,
    depth: Vec<u16>,
    flags: Vec<u8>,
    edge_start: Vec<u32>,
    edges: Vec<u32>,
    cursor: usize,
    pub found: Vec<Found>,
    /// Every violating state met, with the index in [`PROPERTIES`] of what it breaks.
    violating: Vec<(u32, u8)>,
    /// Timeliness bound (scheduler steps), and whether the policy has priorities.
    k: u8,
    timeliness: bool,
    scratch: props::Scratch,
    /// Where the sections of the loaded state start (for partial reloads).
    layout: Layout,
    buf: Vec<u8>,
    pub(crate) wait: Vec<u8>,
    steps_before: Vec<u64>,
    enabled: Vec<Action>,
    pend: Vec<u8>,
    succ: Vec<Succ>,
    /// What the batch's violating successors break.
    broken: Vec<Broken>,
    /// Per state of the batch: its id and the end of its successors in `succ`.
    batch: Vec<(u32, u32)>,
    pub transitions: u64,
    pub max_depth: u32,
    /// Liveness was analysed (the graph is complete).
    pub liveness_checked: bool,
    /// Links explored going down and up (none without `link_down`/`link_up` events).
    links: Links,
    /// The loaded state's tail: `[links down (bit mask), replicas with a dropped step's
    /// completion pending (bit mask)]`; only stored when links are explored.
    tail: [u8; 2],
    /// Bytes of the tail in every stored state (0 or 2).
    tail_len: usize,
}

impl Explorer {
    /// An explorer starting from `engine`'s initial state (every request pending).
    /// `links`: topology link ids explored going down and up (at most 8; none when empty).
    pub fn new(engine: Engine, k: u8, links: Vec<u32>) -> Explorer {
        let n = engine.reqs.len();
        let timeliness = engine.params.priority_preemption;
        let reps = engine.replicas.len();
        let mut x = Explorer {
            engine,
            store: Store::default(),
            parent: Vec::new(),
            action: Vec::new(),
            depth: Vec::new(),
            flags: Vec::new(),
            edge_start: vec![0],
            edges: Vec::new(),
            cursor: 0,
            found: Vec::new(),
            violating: Vec::new(),
            k,
            timeliness,
            scratch: props::Scratch::default(),
            layout: Layout::default(),
            buf: Vec::new(),
            wait: vec![0; n],
            steps_before: vec![0; reps],
            enabled: Vec::new(),
            pend: Vec::new(),
            succ: Vec::new(),
            broken: Vec::new(),
            batch: Vec::new(),
            transitions: 0,
            max_depth: 0,
            liveness_checked: false,
            tail: [0; 2],
            tail_len: if links.is_empty() { 0 } else { 2 },
            links: Links { fabrics: vec![None; 1 << links.len().min(8)], ids: links, loaded: 0 },
        };
        if x.tail_len > 0 {
            x.links.fabrics[0] = x.engine.fabric.clone();
        }
        x.pack_loaded();
        let buf = std::mem::take(&mut x.buf);
        x.store.intern(&buf);
        x.buf = buf;
        x.parent.push(u32::MAX);
        x.action.push(0);
        x.depth.push(0);
        x.flags.push(0);
        x
    }

    pub fn states(&self) -> usize {
        self.store.len()
    }

    /// States discovered but not yet expanded.
    pub fn frontier(&self) -> usize {
        self.store.len() - self.cursor
    }

    pub fn is_complete(&self) -> bool {
        self.cursor == self.store.len()
    }

    pub fn memory_bytes(&self) -> usize {
        self.store.memory_bytes() + 4 * (self.parent.len() * 2 + self.edges.len() + self.edge_start.len())
    }

    /// Load state `id` into the engine.
    pub(crate) fn load(&mut self, id: u32) {
        self.load_masked(id, ALL_REPLICAS);
    }

    /// Load state `id` (only the replicas of `mask` and what [`decode`] reloads with them),
    /// its tail, and the fabric of its links.
    fn load_masked(&mut self, id: u32, mask: u64) {
        let bytes = self.store.get(id);
        let body = bytes.len() - self.tail_len;
        decode(&mut self.engine, &bytes[..body], &mut self.wait, mask, &mut self.layout);
        if self.tail_len > 0 {
            self.tail.copy_from_slice(&bytes[body..]);
            let m = self.tail[0];
            if self.links.loaded != m {
                let f = self.fabric_for(m);
                self.engine.fabric = Some(f);
                self.links.loaded = m;
            }
        }
    }

    /// The fabric with the explored links of mask `m` down: the initial one with them taken
    /// down in index order (so it depends on the mask only).
    fn fabric_for(&mut self, m: u8) -> Box<Fabric> {
        if let Some(f) = &self.links.fabrics[m as usize] {
            return f.clone();
        }
        let mut f = self.links.fabrics[0].clone().unwrap_or_else(|| unreachable!("the initial fabric is kept"));
        for (k, &l) in self.links.ids.iter().enumerate() {
            if m >> k & 1 != 0 {
                f.apply_actions(0, &[LinkAction::LinkDown(l)]);
            }
        }
        self.links.fabrics[m as usize] = Some(f.clone());
        f
    }

    /// How many links are explored going down and up.
    pub(crate) fn links(&self) -> usize {
        self.links.ids.len()
    }

    /// `src–dst` of explored link `k`.
    pub(crate) fn link_label(&self, k: u32) -> String {
        let Some(f) = self.engine.fabric.as_ref() else { return format!("#{k}") };
        let Some(l) = self.links.ids.get(k as usize).and_then(|&l| f.topo.links.get(l as usize)) else {
            return format!("#{k}");
        };
        format!("{}–{}", f.topo.nodes[l.src as usize].id, f.topo.nodes[l.dst as usize].id)
    }

    /// Pack the engine's state and the explorer's tail into `self.buf`.
    fn pack_loaded(&mut self) {
        encode(&self.engine, &self.wait, &mut self.buf);
        self.buf.extend_from_slice(&self.tail[..self.tail_len]);
    }

    /// Apply one action to the loaded state with the engine's own code, then judge the
    /// result. Returns the broken property, if any.
    pub(crate) fn apply(&mut self, act: Action) -> Option<Broken> {
        let e = &mut self.engine;
        for (b, rep) in self.steps_before.iter_mut().zip(&e.replicas) {
            *b = rep.stats.steps;
        }
        match act {
            Action::Arrive(i) => e.arrive(i),
            Action::Complete(r) => {
                let seq = e.replicas[r as usize].step_seq;
                e.complete_step(r as usize, seq);
            }
            Action::Stale(r) => {
                // The simulator's queue entry of a dropped step: never the step in flight
                // (step identities start at 1).
                e.complete_step(r as usize, 0);
                self.tail[1] &= !(1u8 << r);
            }
            Action::Land(i) => {
                let to = e.reqs[i as usize].replica.max(0) as usize;
                e.land_kv(i, to);
            }
            Action::LinkDown(k) | Action::LinkUp(k) => {
                let up = matches!(act, Action::LinkUp(_));
                let link = self.links.ids[k as usize];
                let busy: Vec<bool> = e.replicas.iter().map(|r| r.busy).collect();
                let changed = match e.fabric.as_mut() {
                    Some(f) if up => f.apply_actions(0, &[LinkAction::LinkUp(link)]),
                    Some(f) => f.apply_actions(0, &[LinkAction::LinkDown(link)]),
                    None => Default::default(),
                };
                for &rep in &changed.stopped {
                    if busy[rep] {
                        self.tail[1] |= 1u8 << rep.min(7);
                    }
                }
                e.apply_changed(changed);
                if up {
                    self.tail[0] &= !(1u8 << k);
                } else {
                    self.tail[0] |= 1u8 << k;
                }
                self.links.loaded = u8::MAX; // reload the state's own fabric next time
            }
        }
        let e = &mut self.engine;
        e.drain_dispatch();
        let kicked = e.kick_idle();
        // A broken invariant explains a stall that follows from it: report it first.
        if let Err(b) = props::check_with(e, &mut self.scratch) {
            return Some(b);
        }
        if let Err(err) = kicked {
            let message = match err {
                SimError::Stalled { message } => message,
                other => other.to_string(),
            };
            return Some(Broken { property: NO_DEADLOCK, message });
        }
        if self.timeliness {
            if let Some(b) = update_wait(e, &self.steps_before, &mut self.wait, self.k) {
                return Some(b);
            }
        }
        let busy = e.replicas.iter().any(|r| r.busy);
        // Events that can still make progress: arrivals, KV arrivals, a link coming up.
        let pending = e.reqs.iter().any(|r| matches!(r.status, Status::Pending | Status::Transferring));
        let link_down = self.tail[0] != 0;
        if !busy && !pending && !link_down && !e.is_done() {
            let stuck: Vec<String> = e
                .reqs
                .iter()
                .filter(|r| !matches!(r.status, Status::Finished | Status::Rejected))
                .map(|r| format!("request {} {}", r.id, props::status_name(r.status)))
                .collect();
            return Some(Broken {
                property: NO_DEADLOCK,
                message: format!("no event can happen and work is left: {}", stuck.join(", ")),
            });
        }
        None
    }

    /// The actions enabled in the loaded state: completions (replica order), arrivals (id
    /// order), KV arrivals (id order), completions of dropped steps (replica order), links
    /// going down, links coming up (link order).
    fn collect_enabled(&mut self) {
        self.enabled.clear();
        let e = &self.engine;
        for (i, rep) in e.replicas.iter().enumerate() {
            if rep.busy {
                self.enabled.push(Action::Complete(i as u32));
            }
        }
        for r in &e.reqs {
            if r.status == Status::Pending {
                self.enabled.push(Action::Arrive(r.id));
            }
        }
        for r in &e.reqs {
            if r.status == Status::Transferring {
                self.enabled.push(Action::Land(r.id));
            }
        }
        for i in 0..e.replicas.len().min(8) {
            if self.tail[1] >> i & 1 != 0 {
                self.enabled.push(Action::Stale(i as u32));
            }
        }
        for k in 0..self.links.ids.len() as u32 {
            if self.tail[0] >> k & 1 == 0 {
                self.enabled.push(Action::LinkDown(k));
            }
        }
        for k in 0..self.links.ids.len() as u32 {
            if self.tail[0] >> k & 1 != 0 {
                self.enabled.push(Action::LinkUp(k));
            }
        }
    }

    /// Expand states until `more` new states were found, the graph is complete, or
    /// `max_states` states are known. Returns whether exploration ended (complete or full).
    pub fn run(&mut self, more: usize, max_states: usize) -> bool {
        let target = self.store.len().saturating_add(more);
        while self.cursor < self.store.len() {
            self.generate_batch();
            // Taken out (and put back, keeping their allocations) while interning.
            let batch = std::mem::take(&mut self.batch);
            let succ = std::mem::take(&mut self.succ);
            let mut at = 0usize;
            let (mut full, mut capped) = (false, false);
            for &(id, end) in &batch {
                // A state's successors are interned together: stop before one whose
                // successors could take the store past `max_states` (it is never exceeded).
                let succs = end as usize - at;
                capped = self.store.len().saturating_add(succs) > max_states;
                if capped || self.store.len() >= target {
                    // The rest of the batch is generated again by the next call.
                    full = true;
                    break;
                }
                debug_assert_eq!(id as usize, self.cursor);
                for s in &succ[at..end as usize] {
                    self.intern_succ(id, s);
                }
                at = end as usize;
                self.cursor += 1;
                self.edge_start.push(self.edges.len() as u32);
            }
            self.batch = batch;
            self.succ = succ;
            if full {
                return capped;
            }
        }
        if !self.liveness_checked {
            self.liveness_checked = true;
            self.check_liveness();
        }
        true
    }

    /// Generate the successors of the next (up to) [`BATCH`] states from the cursor.
    fn generate_batch(&mut self) {
        self.batch.clear();
        self.succ.clear();
        self.broken.clear();
        self.pend.clear();
        let end = self.store.len().min(self.cursor + BATCH);
        for idx in self.cursor..end {
            let id = idx as u32;
            if self.flags[idx] & (VIOLATING | DONE) == 0 {
                self.load(id);
                self.collect_enabled();
                let acts = std::mem::take(&mut self.enabled);
                let mut mask = 0u64;
                for (k, &act) in acts.iter().enumerate() {
                    if k > 0 {
                        // Undo the previous action: reload only what it touched.
                        self.load_masked(id, mask);
                        #[cfg(debug_assertions)]
                        {
                            self.pack_loaded();
                            debug_assert_eq!(self.buf.as_slice(), self.store.get(id), "restore of state {id}");
                        }
                    }
                    let broken = self.apply(act);
                    mask = match act {
                        Action::Arrive(_) | Action::Complete(_) | Action::Stale(_) => {
                            touched(&self.engine, self.store.get(id), act.completed())
                        }
                        // Requests move between replicas (and the fabric changes): reload all.
                        Action::Land(_) | Action::LinkDown(_) | Action::LinkUp(_) => ALL_REPLICAS,
                    };
                    let off = self.pend.len();
                    encode_into(&self.engine, &self.wait, &mut self.pend);
                    self.pend.extend_from_slice(&self.tail[..self.tail_len]);
                    let bytes = &self.pend[off..];
                    let h = hash(bytes);
                    let len = bytes.len() as u32;
                    let done = self.engine.is_done() && !self.engine.replicas.iter().any(|r| r.busy);
                    let broken = match broken {
                        Some(b) => {
                            self.broken.push(b);
                            self.broken.len() as u32 - 1
                        }
                        None => u32::MAX,
                    };
                    self.succ.push(Succ { act, hash: h, off: off as u32, len, done, broken });
                }
                self.enabled = acts;
            }
            self.batch.push((id, self.succ.len() as u32));
        }
        // Independent loads of every successor's index slot (and candidate's bytes): the
        // cache misses overlap here instead of stalling one intern after another.
        let mut acc = 0u32;
        for s in &self.succ {
            acc = acc.wrapping_add(self.store.touch(s.hash));
        }
        std::hint::black_box(acc);
    }

    fn intern_succ(&mut self, from: u32, s: &Succ) {
        self.transitions += 1;
        let bytes = &self.pend[s.off as usize..(s.off + s.len) as usize];
        let (to, new) = self.store.intern_hashed(bytes, s.hash);
        self.edges.push(to);
        if !new {
            return;
        }
        let d = self.depth[from as usize] + 1;
        self.max_depth = self.max_depth.max(d as u32);
        self.parent.push(from);
        self.action.push(s.act.pack());
        self.depth.push(d);
        let mut f = 0;
        if s.done {
            f |= DONE;
        }
        if let Some(b) = self.broken.get(s.broken as usize).cloned() {
            f |= VIOLATING;
            let prop = PROPERTIES.iter().position(|&p| p == b.property).unwrap_or(0) as u8;
            self.violating.push((to, prop));
            if !self.found.iter().any(|x| x.broken.property == b.property) {
                self.found.push(Found { broken: b, state: to });
            }
        }
        self.flags.push(f);
    }

    /// `can_finish` on the complete graph: every state must reach a finished state (or a
    /// state already reported as violating). The least fixpoint of "good = finished, or some
    /// successor good", computed by sweeps in reverse id order: ids are breadth-first, so
    /// most edges lead to later states and a sweep or two settle it; a graph that is still
    /// changing after [`MAX_SWEEPS`] is finished by backward reachability over reversed
    /// edges.
    fn check_liveness(&mut self) {
        let n = self.store.len();
        let mut good: Vec<bool> = self.flags.iter().map(|&f| f & (VIOLATING | DONE) != 0).collect();
        let mut changed = true;
        let mut sweeps = 0;
        while changed && sweeps < MAX_SWEEPS {
            changed = false;
            sweeps += 1;
            for s in (0..n).rev() {
                if good[s] {
                    continue;
                }
                let (a, b) = (self.edge_start[s] as usize, self.edge_start[s + 1] as usize);
                if self.edges[a..b].iter().any(|&t| good[t as usize]) {
                    good[s] = true;
                    changed = true;
                }
            }
        }
        if changed {
            self.propagate_backwards(&mut good);
        }
        if let Some(bad) = good.iter().position(|g| !g) {
            self.load(bad as u32);
            let left: Vec<String> = self
                .engine
                .reqs
                .iter()
                .filter(|r| !matches!(r.status, Status::Finished | Status::Rejected))
                .map(|r| format!("{} ({})", r.id, props::status_name(r.status)))
                .collect();
            let message = format!(
                "from this state no order of events finishes every request; unfinished: {}",
                left.join(", ")
            );
            self.found.push(Found { broken: Broken { property: CAN_FINISH, message }, state: bad as u32 });
        }
    }

    /// The reversed graph (of the expanded states' edges) as `(start, predecessors)`: the
    /// predecessors of state `s` are `preds[start[s]..start[s + 1]]`.
    fn reversed(&self) -> (Vec<u32>, Vec<u32>) {
        let n = self.store.len();
        let expanded = self.edge_start.len() - 1;
        let mut start = vec![0u32; n + 1];
        for &t in &self.edges {
            start[t as usize + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut preds = vec![0u32; self.edges.len()];
        let mut fill = start.clone();
        for from in 0..expanded {
            let (a, b) = (self.edge_start[from] as usize, self.edge_start[from + 1] as usize);
            for &t in &self.edges[a..b] {
                preds[fill[t as usize] as usize] = from as u32;
                fill[t as usize] += 1;
            }
        }
        (start, preds)
    }

    /// Mark every state that reaches a `good` one: backward reachability over the reversed
    /// edges (linear in the graph whatever its shape).
    fn propagate_backwards(&self, good: &mut [bool]) {
        let (start, preds) = self.reversed();
        let n = self.store.len();
        let mut stack: Vec<u32> = (0..n as u32).filter(|&i| good[i as usize]).collect();
        while let Some(s) = stack.pop() {
            for &p in &preds[start[s as usize] as usize..start[s as usize + 1] as usize] {
                if !good[p as usize] {
                    good[p as usize] = true;
                    stack.push(p);
                }
            }
        }
    }

    /// The violating states met that break `property`.
    pub(crate) fn violating_states(&self, property: &str) -> Vec<u32> {
        let idx = PROPERTIES.iter().position(|&p| p == property).map(|i| i as u8);
        self.violating.iter().filter(|v| Some(v.1) == idx).map(|v| v.0).collect()
    }

    /// Each state's distance (actions) to the nearest of `targets` in the explored graph;
    /// `u32::MAX` where none is reachable.
    pub(crate) fn distances_to(&self, targets: &[u32]) -> Vec<u32> {
        let (start, preds) = self.reversed();
        let mut dist = vec![u32::MAX; self.store.len()];
        let mut queue = std::collections::VecDeque::new();
        for &t in targets {
            if dist[t as usize] == u32::MAX {
                dist[t as usize] = 0;
                queue.push_back(t);
            }
        }
        while let Some(s) = queue.pop_front() {
            let d = dist[s as usize] + 1;
            for &p in &preds[start[s as usize] as usize..start[s as usize + 1] as usize] {
                if dist[p as usize] == u32::MAX {
                    dist[p as usize] = d;
                    queue.push_back(p);
                }
            }
        }
        dist
    }

    /// The actions enabled in the loaded state, in the order the explorer takes them.
    pub(crate) fn enabled_actions(&mut self) -> Vec<Action> {
        self.collect_enabled();
        self.enabled.clone()
    }

    /// The id of the engine's current state, if the exploration met it.
    pub(crate) fn current_id(&mut self) -> Option<u32> {
        self.pack_loaded();
        self.store.find(&self.buf)
    }

    /// Whether state `id` was never expanded: every request done, or a violation.
    pub(crate) fn is_leaf(&self, id: u32) -> bool {
        self.flags[id as usize] & (VIOLATING | DONE) != 0
    }

    /// The actions from the initial state to `state`, in order.
    pub fn path_to(&self, state: u32) -> Vec<Action> {
        let mut acts = Vec::new();
        let mut s = state;
        while self.parent[s as usize] != u32::MAX {
            acts.push(Action::unpack(self.action[s as usize]));
            s = self.parent[s as usize];
        }
        acts.reverse();
        acts
    }

    /// The distinct markings of the states seen, violating ones left out (not states of
    /// the correct net), for the Petri-net projection: `(counts by status code, free units
    /// summed over replicas)`, sorted. Read from the packed bytes, without loading states.
    pub fn markings(&self) -> Vec<([u8; 6], u32)> {
        let (n, reps) = (self.engine.reqs.len(), self.engine.replicas.len());
        let mut seen: HashSet<u64, BuildHasherDefault<KeyHasher>> = HashSet::default();
        let mut out = Vec::new();
        let mut last = u64::MAX;
        for id in 0..self.store.len() as u32 {
            if self.flags[id as usize] & VIOLATING != 0 {
                continue;
            }
            let (c, free) = marking(self.store.get(id), n, reps);
            let key = c.iter().fold(free as u64, |k, &x| k << 8 | x as u64);
            // Neighbouring states often share a marking: skip the set then.
            if key != last && seen.insert(key) {
                out.push((c, free));
            }
            last = key;
        }
        out.sort_unstable();
        out
    }
}

/// Hasher of the marking keys (distinct 64-bit integers): one multiply.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (x ^ x >> 29).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Timeliness bookkeeping after an action: on every replica that started a step, the head
/// of the waiting queue (its most urgent request, first come among equals), when more
/// urgent than some running request, has waited one more step; every other waiting
/// request's count restarts. Broken when a count exceeds `k`.
pub(crate) fn update_wait(e: &Engine, steps_before: &[u64], wait: &mut [u8], k: u8) -> Option<Broken> {
    for r in &e.reqs {
        if r.status != Status::Waiting {
            wait[r.id as usize] = 0;
        }
    }
    for (i, rep) in e.replicas.iter().enumerate() {
        if rep.stats.steps == steps_before[i] {
            continue;
        }
        let least_urgent = rep.sched.running.iter().map(|&id| e.reqs[id as usize].priority).max();
        for (pos, id) in rep.sched.waiting.iter().enumerate() {
            let w = &mut wait[id as usize];
            let prio = e.reqs[id as usize].priority;
            // Only the head counts: a request behind an equally urgent one is queueing
            // among peers, not suffering an inversion.
            if pos == 0 && least_urgent.is_some_and(|l| prio < l) {
                *w = w.saturating_add(1);
                if *w > k {
                    return Some(Broken {
                        property: TIMELINESS,
                        message: format!(
                            "request {id} (priority {prio}) has waited {} steps of replica {i} while a less urgent \
                             request (priority {}) runs; the bound is {k}",
                            *w,
                            least_urgent.unwrap_or(prio)
                        ),
                    });
                }
            } else {
                *w = 0;
            }
        }
    }
    None
}
