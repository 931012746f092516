//! The client side of the engine: closed-loop sessions and client timeouts.
//!
//! **Sessions.** A request with `after = {parent, think_ns}` (a session's later turn) is
//! sent `think_ns` after its parent *finishes*, and not before its own `arrival_ns` (a
//! trace's recorded send time, a scheduled slot), so its arrival depends on the simulated
//! latency. Until then it is `Pending` with no arrival time. If the parent does not finish
//! — rejected for any reason, or timed out — the client abandons the rest of the session:
//! the turn, and every turn after it, is rejected with reason `session aborted` at the
//! moment the parent ended (a multi-turn benchmark client cannot send turn k + 1 without
//! turn k's answer). Sent turns arrive like any request, in id order with the others of the
//! same instant. With a serving front end ([`crate::frontend`]) the client's clock is the
//! one that counts: the turn is sent `think_ns` after the parent's last token *reached the
//! client*, and reaches the engine after the front end's ingest; a timeout counts from the
//! client's send.
//!
//! **Timeouts** (`workload.timeout_s`). A request not finished `timeout_s` after its
//! arrival is aborted at that exact instant, as a client that gives up: taken out of
//! whichever queue holds it (the router's, a replica's async-scheduling inbox, waiting
//! queue or running batch, a step in flight, a KV transfer), its KV freed — its full blocks stay cached, as vLLM's
//! abort frees through the same path as a finish — and rejected with reason `timeout`. A
//! step in flight still takes its time (the GPU work was launched); the aborted request
//! just gets nothing from it. A request finishing at its deadline counts as finished (step
//! completions come first at an instant). Deadlines are a heap of (deadline, id), pushed at
//! arrival and only when the field is set; an entry whose request is already done is
//! dropped when it reaches the top.

use std::cmp::Reverse;

use super::Engine;
use crate::request::{Reason, Status};

impl Engine {
    /// The next fixed arrival or sent session turn.
    pub(crate) fn next_arrival_ns(&self) -> Option<u64> {
        let fixed = self.arrival_order.get(self.next_arrival).map(|&id| self.reqs[id as usize].arrival_ns);
        let sent = self.sent.peek().map(|Reverse((t, _))| *t);
        match (fixed, sent) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Every arrival at `t`, fixed ones and sent turns merged in id order. Returns how many.
    pub(crate) fn arrivals_at(&mut self, t: u64) -> u64 {
        let mut n = 0;
        loop {
            let fixed = self.arrival_order.get(self.next_arrival).copied().filter(|&id| self.reqs[id as usize].arrival_ns == t);
            let sent = self.sent.peek().filter(|Reverse((at, _))| *at == t).map(|Reverse((_, id))| *id);
            let id = match (fixed, sent) {
                (None, None) => break,
                (Some(a), Some(b)) if b < a => {
                    self.sent.pop();
                    b
                }
                (Some(a), _) => {
                    self.next_arrival += 1;
                    a
                }
                (None, Some(b)) => {
                    self.sent.pop();
                    b
                }
            };
            self.arrive(id);
            n += 1;
        }
        self.events += n;
        n
    }

    /// Requests that just finished: drop their prefix-cache memo, send the session turns
    /// waiting for them.
    pub(crate) fn finished(&mut self, now: u64) {
        for k in 0..self.finished_buf.len() {
            let id = self.finished_buf[k];
            self.forget_cached(id);
            let Some(s) = self.sessions.as_deref() else { continue };
            for &c in s.children_of(id) {
                let think = s.after[c as usize].map_or(0, |a| a.think_ns);
                // The client sees the last token after the front end's way back, thinks,
                // sends (not before the turn's own arrival), and the engine gets the turn
                // after the front end's ingest.
                let (back, ingest) = match self.client.as_slice() {
                    [] => (0, 0),
                    cl => (u64::from(cl[id as usize].out_last_ns), u64::from(cl[c as usize].ingest_ns)),
                };
                let send = now.saturating_add(back).saturating_add(think).max(s.earliest[c as usize]);
                let at = send.saturating_add(ingest);
                let r = &mut self.reqs[c as usize];
                r.arrival_ns = at;
                r.queued_ns = at;
                self.sent.push(Reverse((at, c)));
            }
        }
    }

    /// Request `id` ended without finishing at `at`: its later turns are never sent.
    pub(crate) fn drop_turns_after(&mut self, id: u32, at: u64) {
        let Some(s) = self.sessions.take() else { return };
        let mut stack: Vec<u32> = s.children_of(id).to_vec();
        while let Some(c) = stack.pop() {
            let r = &mut self.reqs[c as usize];
            if r.status != Status::Pending {
                continue;
            }
            r.status = Status::Rejected;
            r.reason = Reason::SessionAborted;
            // Never sent: its client's clock (the engine's less the front end's ingest)
            // reads the moment the parent ended, the end too.
            let ingest = self.client.get(c as usize).map_or(0, |cl| u64::from(cl.ingest_ns));
            r.arrival_ns = at.saturating_add(ingest);
            r.finish_ns = at;
            self.done_requests += 1;
            stack.extend_from_slice(s.children_of(c));
        }
        self.sessions = Some(s);
    }

    /// The next live client deadline (stale entries dropped).
    pub(crate) fn next_deadline_ns(&mut self) -> Option<u64> {
        while let Some(&Reverse((t, id))) = self.deadlines.peek() {
            if matches!(self.reqs[id as usize].status, Status::Finished | Status::Rejected) {
                self.deadlines.pop();
            } else {
                return Some(t);
            }
        }
        None
    }

    /// Abort every request whose deadline is `t`. Returns how many entries were handled.
    pub(crate) fn expire_due(&mut self, t: u64) -> u64 {
        let mut n = 0;
        while let Some(&Reverse((d, id))) = self.deadlines.peek() {
            if d != t {
                break;
            }
            self.deadlines.pop();
            self.expire(id);
            n += 1;
        }
        self.events += n;
        n
    }

    /// The client of request `id` gives up now.
    fn expire(&mut self, id: u32) {
        let now = self.now_ns;
        let r = &self.reqs[id as usize];
        match r.status {
            Status::Pending | Status::Finished | Status::Rejected => return,
            Status::Dispatching => {
                // The router's own timeout may have come first (it is checked lazily).
                let dispatch_deadline = r.queued_ns.saturating_add(self.dispatch_timeout_ns);
                if let Some(at) = self.dispatch.iter().position(|&x| x == id) {
                    self.dispatch.remove(at);
                }
                if dispatch_deadline < now {
                    return self.reject(id, Reason::DispatchQueueFull, dispatch_deadline);
                }
            }
            // Its KV is on the way; it is dropped when it lands.
            Status::Transferring => {}
            Status::Waiting | Status::Running => {
                let rep = r.replica as usize;
                let replica = &mut self.replicas[rep];
                // The batch changes: apply the steady steps owed and end the steady run.
                replica.steady.settle(&mut replica.sched, &mut self.reqs, &mut self.apc);
                replica.steady.left = 0;
                replica.set.dissolve(&mut self.reqs);
                let in_flight = replica.busy;
                let st = &mut replica.sched;
                let r = &mut self.reqs[id as usize];
                // The tokens its table was last allocated for (vLLM hashed its blocks full of
                // them): those of the step in flight too.
                let mut alloc = r.computed;
                if let Some(at) = replica.inbox.iter().position(|e| e.0 == id) {
                    // Routed while the replica was busy under async scheduling: not yet in
                    // its waiting queue (it would be enqueued, alive again, when released).
                    replica.inbox.remove(at);
                } else if r.status == Status::Waiting {
                    st.waiting.remove(id);
                } else {
                    if let Some(at) = st.running.iter().position(|&x| x == id) {
                        st.running.remove(at);
                    }
                    // In the step in flight (or the last one, which a steady run repeats).
                    if let Some(at) = st.plan.iter().position(|&(x, _)| x == id) {
                        if in_flight {
                            alloc += st.plan[at].1;
                        }
                        st.plan.remove(at);
                    }
                }
                st.used_slots -= r.computed as u64;
                replica.outstanding_tokens -= (r.prompt + r.output - r.generated) as u64;
                if let Some(off) = self.apc.offload.as_deref_mut() {
                    off.forget_request(id);
                }
                // Drafts of a speculative step are never cached: at most the tokens it holds.
                let alloc = alloc.min(r.num_tokens());
                self.apc.release_after(&mut st.kv, r, false, alloc);
                r.blocks = Vec::new();
                self.mark(rep);
            }
        }
        self.reject(id, Reason::Timeout, now);
    }
}
