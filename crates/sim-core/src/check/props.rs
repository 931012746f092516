//! The properties the model checker proves, as functions of the real engine's state. The
//! same function backs [`check_invariants`], so a replayed counterexample is judged
//! by exactly the code that judged it in the explorer.
//!
//! State invariants (checked in every reachable state):
//! - [`SINGLE_EXECUTION`]: no request is in `running` twice (on one replica or two) nor
//!   scheduled twice in one step;
//! - [`ONE_STATE`]: every request is in exactly one state, and its status agrees with the
//!   one queue that holds it (pending/finished/rejected: none; dispatching: the router's
//!   queue; waiting: its replica's waiting queue; running: its replica's running list);
//!   the engine's count of done requests equals the finished and rejected ones (each
//!   counted once), and no request has produced more tokens than it asked for;
//! - [`BLOCK_ACCOUNTING`]: per replica, free + held units = total, no unit held twice (or
//!   both held and free), no units held by a request that is not running. With prefix
//!   caching a cached unit may be held by several requests (vLLM's shared blocks): then
//!   each unit's holders must equal its reference count, a free unit has none, and the
//!   cache's own structure (free queue, key map) must be consistent;
//! - [`NO_LEAK_WHEN_QUIET`]: a replica with nothing running has every unit free;
//! - [`BOUNDED_QUEUES`]: `running ≤ max_num_seqs`, and with a waiting bound
//!   `waiting + running ≤ max_waiting + max_num_seqs` (preempted requests return to waiting
//!   past the dispatch bound, never beyond this).
//!
//! Properties of the explored graph (see the explorer): [`NO_DEADLOCK`] (work pending but
//! nothing can ever run), [`TIMELINESS`] (the head of a waiting queue, when more urgent
//! than a running request, waits at most k scheduler steps of its replica; policies with
//! priorities) and
//! [`CAN_FINISH`] (from every reachable state some continuation finishes every request).

use serde::Serialize;

use crate::engine::Engine;
use crate::request::Status;

pub const SINGLE_EXECUTION: &str = "single_execution";
pub const ONE_STATE: &str = "one_state";
pub const BLOCK_ACCOUNTING: &str = "block_accounting";
pub const NO_LEAK_WHEN_QUIET: &str = "no_leak_when_quiet";
pub const BOUNDED_QUEUES: &str = "bounded_queues";
pub const NO_DEADLOCK: &str = "no_deadlock";
pub const TIMELINESS: &str = "preemption_timeliness";
pub const CAN_FINISH: &str = "can_finish";

/// Every property, in the order they are reported.
pub const PROPERTIES: &[&str] =
    &[SINGLE_EXECUTION, ONE_STATE, BLOCK_ACCOUNTING, NO_LEAK_WHEN_QUIET, BOUNDED_QUEUES, NO_DEADLOCK, TIMELINESS, CAN_FINISH];

/// A broken property and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Broken {
    pub property: &'static str,
    pub message: String,
}

fn broken(property: &'static str, message: String) -> Broken {
    Broken { property, message }
}

/// Reusable buffers of [`check_with`] (the explorer calls it once per transition).
#[derive(Default)]
pub struct Scratch {
    in_wait: Vec<u8>,
    in_run: Vec<u8>,
    in_disp: Vec<u8>,
    in_plan: Vec<u8>,
    seen: Vec<bool>,
}

/// The state invariants of the model checker as the engine's
/// [`crate::engine::InvariantObserver`]: no request scheduled twice, each request in exactly
/// one state, block accounting, bounded queues. The error is `property: what is wrong`.
/// Defined here, not in the engine, so that the engine does not depend on the checker;
/// [`crate::api`] plugs it in.
pub fn check_invariants(e: &Engine) -> std::result::Result<(), String> {
    check_state(e).map_err(|v| format!("{}: {}", v.property, v.message))
}

/// Check every state invariant of `e`; the first broken one (in [`PROPERTIES`] order).
pub fn check_state(e: &Engine) -> Result<(), Broken> {
    check_with(e, &mut Scratch::default())
}

/// [`check_state`] with caller-owned buffers.
pub fn check_with(e: &Engine, s: &mut Scratch) -> Result<(), Broken> {
    if all_hold_small(e) {
        return Ok(());
    }
    check_all(e, s)
}

#[inline]
fn bit(id: u32) -> u64 {
    1u64.wrapping_shl(id)
}

/// The set (bit mask) of `ids`, and whether one is listed twice or is not below `n`.
#[inline]
fn id_set(ids: impl Iterator<Item = u32>, n: usize) -> (u64, bool) {
    let (mut set, mut odd) = (0u64, false);
    for id in ids {
        odd |= set & bit(id) != 0 || id as usize >= n;
        set |= bit(id);
    }
    (set, odd)
}

/// Every state invariant holds, decided with bit masks on engines of at most 64 requests,
/// 8 replicas and 64 units per pool (every model-checked one). `true` only when
/// [`check_all`] finds nothing: anything unusual — a repeated entry, an id out of range, a
/// larger engine — answers `false`, and [`check_all`] then decides and names what is
/// broken. Sets of requests and units are bit masks.
fn all_hold_small(e: &Engine) -> bool {
    let (n, reps) = (e.reqs.len(), e.replicas.len());
    if n > 64 || reps > 8 {
        return false;
    }
    let mut bad = false;
    // One pass over the requests: by status, by replica, and the units each replica's
    // requests hold.
    let (mut st_run, mut st_wait, mut st_disp) = (0u64, 0u64, 0u64);
    let mut done = 0u64;
    let mut on = [0u64; 8];
    let mut units = [0u64; 8];
    let mut held = [0u32; 8];
    let mut totals = [0u32; 8];
    for (t, rep) in totals.iter_mut().zip(&e.replicas) {
        *t = rep.sched.kv.total();
        // Shared units: decided by `check_all` (the model checker runs without caching).
        bad |= rep.sched.kv.queued();
    }
    for (k, r) in e.reqs.iter().enumerate() {
        bad |= r.id as usize != k;
        let b = bit(k as u32);
        match r.status {
            Status::Running => st_run |= b,
            Status::Waiting => st_wait |= b,
            Status::Dispatching => st_disp |= b,
            Status::Finished | Status::Rejected => done += 1,
            _ => {}
        }
        bad |= r.generated > r.output;
        let has = !r.blocks.is_empty();
        if r.replica < 0 || r.replica as usize >= reps {
            bad |= has || r.replica >= 0;
            continue;
        }
        let ri = r.replica as usize;
        on[ri] |= b;
        bad |= has && r.status != Status::Running;
        for &u in &r.blocks {
            bad |= units[ri] & bit(u) != 0 || u >= totals[ri];
            units[ri] |= bit(u);
        }
        held[ri] += r.blocks.len() as u32;
    }
    // Queues: each request in exactly the queue its status names, on its own replica (a
    // running one may also be in the step's plan, nothing else may); a request in the same
    // kind of queue of two replicas is there twice.
    let (mut run, mut wait, mut plan) = (0u64, 0u64, 0u64);
    let seqs = e.params.max_num_seqs as u64;
    for (i, rep) in e.replicas.iter().enumerate() {
        let st = &rep.sched;
        let (r, odd_r) = id_set(st.running.iter().copied(), n);
        // a replica's async-scheduling inbox is part of its waiting queue
        let (w, odd_w) = id_set(st.waiting.iter().chain(rep.inbox.iter().map(|e| e.0)), n);
        let (p, odd_p) = if rep.busy { id_set(st.plan.iter().map(|x| x.0), n) } else { (0, false) };
        bad |= odd_r || odd_w || odd_p || (r | w) & !on[i] != 0;
        bad |= run & r != 0 || wait & w != 0 || plan & p != 0;
        run |= r;
        wait |= w;
        plan |= p;
        // Units: none twice (free or held), all below the total, free + held = total.
        let kv = &st.kv;
        let total = totals[i];
        // (A larger pool is decided by `check_all`: its free ids are not listed here.)
        for u in kv.free_ids().take_while(|_| total <= 64) {
            bad |= units[i] & bit(u) != 0 || u >= total;
            units[i] |= bit(u);
        }
        let free = kv.free_units();
        bad |= total > 64 || held[i] + free != total;
        bad |= st.running.is_empty() && free != total;
        let (running, waiting) = (st.running.len() as u64, (st.waiting.len() + rep.inbox.len()) as u64);
        bad |= running > seqs || e.max_waiting.is_some_and(|m| waiting + running > m as u64 + seqs);
    }
    let (disp, odd_d) = id_set(e.dispatch.iter().copied(), n);
    bad |= odd_d || run != st_run || wait != st_wait || disp != st_disp || plan & !st_run != 0;
    bad |= done != e.done_requests;
    !bad
}

/// Check every state invariant, naming the first broken one.
fn check_all(e: &Engine, s: &mut Scratch) -> Result<(), Broken> {
    let n = e.reqs.len();
    for v in [&mut s.in_wait, &mut s.in_run, &mut s.in_disp, &mut s.in_plan] {
        v.clear();
        v.resize(n, 0);
    }
    let bump = |v: &mut Vec<u8>, id: u32| {
        if let Some(c) = v.get_mut(id as usize) {
            *c = c.saturating_add(1);
        }
    };
    for (i, rep) in e.replicas.iter().enumerate() {
        for &id in &rep.sched.running {
            bump(&mut s.in_run, id);
            if e.reqs[id as usize].replica != i as i32 {
                return Err(broken(ONE_STATE, format!("request {id} is running on replica {i} but assigned elsewhere")));
            }
        }
        for id in rep.sched.waiting.iter().chain(rep.inbox.iter().map(|e| e.0)) {
            bump(&mut s.in_wait, id);
            if e.reqs[id as usize].replica != i as i32 {
                return Err(broken(ONE_STATE, format!("request {id} waits on replica {i} but is assigned elsewhere")));
            }
        }
        if rep.busy {
            for &(id, _) in &rep.sched.plan {
                bump(&mut s.in_plan, id);
            }
        }
    }
    for &id in &e.dispatch {
        bump(&mut s.in_disp, id);
    }
    for id in 0..n {
        if s.in_run[id] > 1 {
            return Err(broken(SINGLE_EXECUTION, format!("request {id} is in running {} times", s.in_run[id])));
        }
        if s.in_plan[id] > 1 {
            return Err(broken(SINGLE_EXECUTION, format!("request {id} is scheduled {} times in one step", s.in_plan[id])));
        }
    }
    for r in &e.reqs {
        let id = r.id as usize;
        let (w, run, d, pl) = (s.in_wait[id], s.in_run[id], s.in_disp[id], s.in_plan[id]);
        let ok = match r.status {
            Status::Pending | Status::Finished | Status::Rejected | Status::Transferring => w + run + d + pl == 0,
            Status::Dispatching => d == 1 && w + run + pl == 0,
            Status::Waiting => w == 1 && run + d + pl == 0,
            Status::Running => run == 1 && w + d == 0,
        };
        if !ok {
            let mut places = Vec::new();
            for (k, name) in [(w, "waiting"), (run, "running"), (d, "dispatch"), (pl, "the step")] {
                if k > 0 {
                    places.push(format!("{name}×{k}"));
                }
            }
            let places = if places.is_empty() { "no queue".to_string() } else { places.join(", ") };
            return Err(broken(ONE_STATE, format!("request {} is {} but in {places}", r.id, status_name(r.status))));
        }
    }
    let done = e.reqs.iter().filter(|r| r.status.is_done()).count() as u64;
    if done != e.done_requests {
        return Err(broken(
            ONE_STATE,
            format!("{} request(s) counted as done but {done} are finished or rejected", e.done_requests),
        ));
    }
    if let Some(r) = e.reqs.iter().find(|r| r.generated > r.output) {
        return Err(broken(ONE_STATE, format!("request {} generated {} of {} tokens", r.id, r.generated, r.output)));
    }
    for (i, rep) in e.replicas.iter().enumerate() {
        let kv = &rep.sched.kv;
        if kv.queued() {
            check_cached_pool(e, i)?;
        } else {
            check_pool(e, i, s)?;
        }
        if rep.sched.running.is_empty() && kv.free_units() as usize + loading_units(e, i) != kv.total() as usize {
            return Err(broken(
                NO_LEAK_WHEN_QUIET,
                format!("replica {i} runs nothing but only {} of {} units are free", kv.free_units(), kv.total()),
            ));
        }
        let (running, waiting, seqs) = (rep.sched.running.len() as u64, (rep.sched.waiting.len() + rep.inbox.len()) as u64, e.params.max_num_seqs as u64);
        if running > seqs {
            return Err(broken(BOUNDED_QUEUES, format!("replica {i} runs {running} requests, max_num_seqs is {seqs}")));
        }
        if let Some(m) = e.max_waiting {
            if waiting + running > m as u64 + seqs {
                return Err(broken(
                    BOUNDED_QUEUES,
                    format!("replica {i}: {waiting} waiting + {running} running exceeds max_waiting {m} + max_num_seqs {seqs}"),
                ));
            }
        }
    }
    Ok(())
}

/// Is `r` waiting for an async load from a KV offload tier (then it holds the GPU blocks the
/// load fills)?
fn awaits_load(e: &Engine, r: &crate::request::Req) -> bool {
    r.status == Status::Waiting && e.apc.offload.as_deref().is_some_and(|o| o.awaits_load(r.id))
}

/// Distinct units of replica `i` held by requests waiting for tier loads (not leaked: the
/// loads fill them).
fn loading_units(e: &Engine, i: usize) -> usize {
    if e.apc.offload.is_none() {
        return 0;
    }
    let mut units: Vec<u32> = e.reqs.iter().filter(|r| r.replica == i as i32 && awaits_load(e, r)).flat_map(|r| r.blocks.iter().copied()).collect();
    units.sort_unstable();
    units.dedup();
    units.len()
}

/// Block accounting of replica `i`'s pool without caching: every unit free or held by one
/// running request, never both. Units never handed out (from [`crate::kv::KvPool::issued`]
/// on) are free and held by nobody, so a large pool marks only those handed out.
fn check_pool(e: &Engine, i: usize, s: &mut Scratch) -> Result<(), Broken> {
    let kv = &e.replicas[i].sched.kv;
    // Small pools (every model-checked one) mark units in a bit mask.
    let small = kv.total() <= 64;
    let mut bits = 0u64;
    let issued = kv.issued();
    if !small {
        s.seen.clear();
        s.seen.resize(issued as usize, false);
    }
    let seen = &mut s.seen;
    let total = kv.total();
    let limit = if small { total } else { issued };
    let mut mark = |u: u32, who: &dyn Fn() -> String| -> Result<(), Broken> {
        if u >= limit {
            return Err(broken(BLOCK_ACCOUNTING, format!("replica {i}: unit {u} out of range or never handed out ({})", who())));
        }
        let twice = if small {
            let was = bits >> u & 1 != 0;
            bits |= 1 << u;
            was
        } else {
            std::mem::replace(&mut seen[u as usize], true)
        };
        if twice {
            return Err(broken(BLOCK_ACCOUNTING, format!("replica {i}: unit {u} held twice ({})", who())));
        }
        Ok(())
    };
    if small {
        for u in kv.free_ids() {
            mark(u, &|| "free list".into())?;
        }
    } else {
        for u in kv.freed_ids() {
            mark(u, &|| "free list".into())?;
        }
    }
    let mut held = 0usize;
    for r in e.reqs.iter().filter(|r| r.replica == i as i32) {
        if r.status != Status::Running && !r.blocks.is_empty() && !awaits_load(e, r) {
            return Err(broken(
                BLOCK_ACCOUNTING,
                format!("request {} holds {} unit(s) while {}", r.id, r.blocks.len(), status_name(r.status)),
            ));
        }
        for &u in &r.blocks {
            mark(u, &|| format!("request {}", r.id))?;
        }
        held += r.blocks.len();
    }
    if held + kv.free_units() as usize != kv.total() as usize {
        return Err(broken(
            BLOCK_ACCOUNTING,
            format!("replica {i}: free {} + used {held} != total {}", kv.free_units(), kv.total()),
        ));
    }
    Ok(())
}

/// Block accounting of replica `i`'s pool with prefix caching: every unit either free
/// (on the free queue, cached or not, held by nobody) or held by exactly as many running
/// requests as its reference count says (vLLM shares cached blocks), no request holding a
/// unit twice, distinct held + free = total, and the cache's structure consistent.
fn check_cached_pool(e: &Engine, i: usize) -> Result<(), Broken> {
    let kv = &e.replicas[i].sched.kv;
    let total = kv.total() as usize;
    let fail = |m: String| Err(broken(BLOCK_ACCOUNTING, format!("replica {i}: {m}")));
    // Units never handed out (from `issued` on) are free and held by nobody: only those
    // handed out are marked (their free ones listed, the queue's count checks the rest).
    let issued = kv.issued() as usize;
    let mut free = vec![false; issued];
    let mut holders = vec![0u32; issued];
    let mut last = vec![u32::MAX; issued];
    let mut nfree = total - issued;
    for u in kv.freed_ids() {
        match free.get_mut(u as usize) {
            None => return fail(format!("unit {u} out of range (free queue)")),
            Some(f) if *f => return fail(format!("unit {u} twice in the free queue")),
            Some(f) => *f = true,
        }
        nfree += 1;
    }
    for r in e.reqs.iter().filter(|r| r.replica == i as i32) {
        if r.status != Status::Running && !r.blocks.is_empty() && !awaits_load(e, r) {
            return Err(broken(
                BLOCK_ACCOUNTING,
                format!("request {} holds {} unit(s) while {}", r.id, r.blocks.len(), status_name(r.status)),
            ));
        }
        for &u in &r.blocks {
            let Some(h) = holders.get_mut(u as usize) else {
                return fail(format!("unit {u} out of range (request {})", r.id));
            };
            if last[u as usize] == r.id {
                return fail(format!("unit {u} held twice (request {})", r.id));
            }
            last[u as usize] = r.id;
            *h += 1;
        }
    }
    let mut held = 0usize;
    let refs = kv.ref_counts();
    for u in 0..issued {
        let h = holders[u];
        if free[u] && h > 0 {
            return fail(format!("unit {u} held twice (free queue and {h} request(s))"));
        }
        let rc = refs.get(u).copied().unwrap_or(0);
        if h != rc {
            return fail(format!("unit {u} is held by {h} request(s) but its reference count is {rc}"));
        }
        held += (h > 0) as usize;
    }
    if held + nfree != total {
        return fail(format!("free {nfree} + used {held} != total {total}"));
    }
    match kv.cache.as_deref().map(|c| c.check()) {
        Some(Err(m)) => fail(format!("prefix cache: {m}")),
        _ => Ok(()),
    }
}

/// Lower-case name of a status (messages, traces).
pub fn status_name(s: Status) -> &'static str {
    match s {
        Status::Pending => "pending",
        Status::Dispatching => "dispatching",
        Status::Waiting => "waiting",
        Status::Running => "running",
        Status::Transferring => "transferring",
        Status::Finished => "finished",
        Status::Rejected => "rejected",
    }
}
