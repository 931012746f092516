//! The scheduling and routing policies, each defined once: its name (as `scheduler.policy`
//! or `deployment.router` spells it), and for a scheduling policy the label and chart colour
//! the front ends show, a one-line summary and the traits the rest of the core reads
//! (flags, never names). The scenario parser accepts exactly these names, and
//! [`crate::registry`] exports the same records to every front end (`o1sim.presets()`, the
//! WASM module's `presets()`), so no front end keeps a list of its own.
//!
//! Adding a scheduling policy: a variant here, its arm in [`Policy::info`] and in
//! [`Policy::ALL`] (display order), and its knobs in `sched.rs`'s `Params::for_policy`
//! (an exhaustive `match`: it does not compile until the policy is there).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::check;

/// A scheduling policy (`scheduler.policy`). Written as its name in scenarios and results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Policy {
    Orca,
    #[default]
    Vllm,
    Sarathi,
    O1pro,
    /// TensorRT-LLM's batch manager ([`crate::sched`]'s `trtllm` module).
    Trtllm,
    Disagg,
}

/// What the core and the front ends know of one scheduling policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PolicyInfo {
    /// As in `scheduler.policy`.
    pub name: &'static str,
    /// For people (legends, checkboxes).
    pub label: &'static str,
    /// `#rrggbb`: the policy's colour in every chart (dashboard, report, page). Distinct.
    pub color: &'static str,
    /// One line: what the policy does.
    pub summary: &'static str,
    /// Runs only with a `topology` (its KV cache moves over the fabric).
    pub needs_topology: bool,
    /// Prefill and decode on separate replicas (`deployment.prefill_replicas` the first
    /// ones), each request's KV cache moved between them.
    pub disaggregated: bool,
    /// Built on vLLM's scheduler: takes `scheduler.scheduling_policy` (fcfs or priority).
    pub vllm_scheduler: bool,
    /// Keeps a prefix cache (on by default; `enable_prefix_caching = true` is an error
    /// where false).
    pub prefix_cache: bool,
    /// The seed's O1-Pro front door: a waiting queue bounded at 4 × `max_num_seqs` unless
    /// `scheduler.max_waiting` says otherwise, prompt templates nested deeper than
    /// [`crate::workload::adversarial::O1PRO_MAX_TEMPLATE_DEPTH`] rejected, and the
    /// scheduling decision's latency (§3.3) added to each step.
    #[serde(skip)]
    pub o1pro_admission: bool,
}

impl Policy {
    /// Every policy, in display order (the co-located ones first).
    pub const ALL: [Policy; 6] = [Policy::Orca, Policy::Vllm, Policy::Sarathi, Policy::O1pro, Policy::Trtllm, Policy::Disagg];

    /// The policy's record.
    pub const fn info(self) -> PolicyInfo {
        const BASE: PolicyInfo = PolicyInfo {
            name: "",
            label: "",
            color: "",
            summary: "",
            needs_topology: false,
            disaggregated: false,
            vllm_scheduler: false,
            prefix_cache: true,
            o1pro_admission: false,
        };
        match self {
            Policy::Orca => PolicyInfo {
                name: "orca",
                label: "Orca",
                color: "#e0752d",
                summary: "iteration-level batching; reserves prompt + maximum output at admission, no preemption",
                prefix_cache: false,
                ..BASE
            },
            Policy::Vllm => PolicyInfo {
                name: "vllm",
                label: "vLLM",
                color: "#2f6fdf",
                summary: "vLLM v1's scheduler: one token budget, chunked prefill, recompute preemption",
                vllm_scheduler: true,
                ..BASE
            },
            Policy::Sarathi => PolicyInfo {
                name: "sarathi",
                label: "Sarathi-Serve",
                color: "#2a9d5b",
                summary: "stall-free batching: decodes first, then prefill chunks within chunk_size",
                vllm_scheduler: true,
                ..BASE
            },
            Policy::O1pro => PolicyInfo {
                name: "o1pro",
                label: "O1-Pro",
                color: "#8e44ad",
                summary: "per-request block size, priority preemption, per-request token cap, bounded queue",
                o1pro_admission: true,
                ..BASE
            },
            Policy::Trtllm => PolicyInfo {
                name: "trtllm",
                label: "TensorRT-LLM",
                color: "#76b900",
                summary: "TensorRT-LLM's in-flight batching: a capacity scheduler (guaranteed_no_evict reserves each request's whole length; max_utilization pauses the latest started), whole contexts within max_num_tokens",
                prefix_cache: false,
                ..BASE
            },
            Policy::Disagg => PolicyInfo {
                name: "disagg",
                label: "disaggregated",
                color: "#c0392b",
                summary: "prefill and decode on separate replicas; each KV cache crosses the fabric",
                needs_topology: true,
                disaggregated: true,
                vllm_scheduler: true,
                ..BASE
            },
        }
    }

    /// The name `scheduler.policy` takes.
    pub const fn name(self) -> &'static str {
        self.info().name
    }

    /// The policy of that name.
    pub fn from_name(name: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Every policy's name, in display order.
    pub fn names() -> Vec<&'static str> {
        Policy::ALL.iter().map(|p| p.name()).collect()
    }

    /// The co-located policies' names (each replica prefills and decodes; no topology
    /// needed), in display order.
    pub fn colocated_names() -> Vec<&'static str> {
        Policy::ALL.iter().filter(|p| !p.info().needs_topology).map(|p| p.name()).collect()
    }

    /// Prefill and decode on separate replicas ([`PolicyInfo::disaggregated`]).
    pub const fn disaggregated(self) -> bool {
        self.info().disaggregated
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A router policy (`deployment.router`): which replica an arrival goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Router {
    #[default]
    RoundRobin,
    LeastOutstandingTokens,
    /// Arrivals weigh each replica's links (`Engine::pick_by_links`): outstanding tokens
    /// times the pace of a step on its links as they are now (degraded, down, shared), so it
    /// leaves least-outstanding-tokens once links are shared or degraded. With `disagg` the
    /// decode replica is the one with the best route score from the prefill replica.
    /// Without a topology: as [`Router::LeastOutstandingTokens`].
    TopologyAware,
    /// Scores replicas by the prefix their caches hold, read from the replicas' own block
    /// hashes as their KV events reach the router (`deployment.kv_event_delay_ms` late),
    /// weighed with load and KV usage (`deployment.router_scorers`; llm-d's precise prefix
    /// scorer, Dynamo's KV router).
    PrecisePrefix,
    /// Like [`Router::PrecisePrefix`], but from what the router itself sent where: an LRU
    /// of block hashes per replica, as large as the replica's KV pool (llm-d's approximate
    /// prefix scorer, SGLang's cache-aware router).
    ApproxPrefix,
    /// A session's later turns go where its earlier turn went (while that replica has
    /// room); requests outside sessions, and turns whose replica is full, go to the one
    /// with the fewest outstanding tokens.
    SessionAffinity,
    /// A ring of replicas (160 points each) keyed by the session, or else by the hash of the
    /// prompt's first 512 tokens, with bounded loads: a replica past 1.25× the mean
    /// outstanding tokens passes the request on along the ring.
    ConsistentHash,
}

impl Router {
    /// Every router, in display order.
    pub const ALL: [Router; 7] = [
        Router::RoundRobin,
        Router::LeastOutstandingTokens,
        Router::TopologyAware,
        Router::PrecisePrefix,
        Router::ApproxPrefix,
        Router::SessionAffinity,
        Router::ConsistentHash,
    ];

    /// The name `deployment.router` takes.
    pub const fn name(self) -> &'static str {
        match self {
            Router::RoundRobin => "round_robin",
            Router::LeastOutstandingTokens => "least_outstanding_tokens",
            Router::TopologyAware => "topology_aware",
            Router::PrecisePrefix => "precise_prefix",
            Router::ApproxPrefix => "approx_prefix",
            Router::SessionAffinity => "session_affinity",
            Router::ConsistentHash => "consistent_hash",
        }
    }

    /// Scores replicas by the prefixes their caches hold (needs prefix caching).
    pub const fn prefix_aware(self) -> bool {
        matches!(self, Router::PrecisePrefix | Router::ApproxPrefix)
    }

    /// The router of that name.
    pub fn from_name(name: &str) -> Option<Router> {
        Router::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Every router's name, in display order.
    pub fn names() -> Vec<&'static str> {
        Router::ALL.iter().map(|r| r.name()).collect()
    }
}

impl fmt::Display for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Serialize as the name; deserialize from a name, an unknown one being an error that lists
/// the closest names (the parser names the field: `scheduler.policy: unknown policy 'vlm';
/// did you mean vllm? …`).
macro_rules! by_name {
    ($t:ty, $what:literal) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let name = String::deserialize(d)?;
                <$t>::from_name(&name).ok_or_else(|| {
                    let names = <$t>::names();
                    let message = match check::unknown_name("", $what, &name, &names) {
                        crate::error::SimError::Config { message, .. } => message,
                        other => other.to_string(),
                    };
                    serde::de::Error::custom(message)
                })
            }
        }
    };
}

by_name!(Policy, "policy");
by_name!(Router, "router");

#[cfg(test)]
mod tests {
    use super::*;

    /// Each variant's place in [`Policy::ALL`]: this `match` stops compiling when a variant
    /// is added, until the policy is listed (and so parsed and exported).
    fn position(p: Policy) -> usize {
        match p {
            Policy::Orca => 0,
            Policy::Vllm => 1,
            Policy::Sarathi => 2,
            Policy::O1pro => 3,
            Policy::Trtllm => 4,
            Policy::Disagg => 5,
        }
    }

    fn router_position(r: Router) -> usize {
        match r {
            Router::RoundRobin => 0,
            Router::LeastOutstandingTokens => 1,
            Router::TopologyAware => 2,
            Router::PrecisePrefix => 3,
            Router::ApproxPrefix => 4,
            Router::SessionAffinity => 5,
            Router::ConsistentHash => 6,
        }
    }

    #[test]
    fn every_variant_is_listed_once_and_parses_from_its_name() {
        for (i, p) in Policy::ALL.into_iter().enumerate() {
            assert_eq!(position(p), i, "{p}");
            assert_eq!(Policy::from_name(p.name()), Some(p));
            assert_eq!(serde_json::to_string(&p).unwrap(), format!("\"{p}\""));
            assert_eq!(serde_json::from_str::<Policy>(&format!("\"{p}\"")).unwrap(), p);
        }
        for (i, r) in Router::ALL.into_iter().enumerate() {
            assert_eq!(router_position(r), i, "{r}");
            assert_eq!(serde_json::from_str::<Router>(&format!("\"{r}\"")).unwrap(), r);
        }
        assert_eq!(Policy::default(), Policy::Vllm);
        assert_eq!(Router::default(), Router::RoundRobin);
    }

    #[test]
    fn records_are_complete_and_colours_distinct() {
        let mut colors: Vec<&str> = Policy::ALL.iter().map(|p| p.info().color).collect();
        for p in Policy::ALL {
            let i = p.info();
            assert!(!i.label.is_empty() && !i.summary.is_empty(), "{p}");
            let hex = i.color.strip_prefix('#').unwrap_or("");
            assert!(hex.len() == 6 && hex.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()), "{p}: {}", i.color);
            // A policy that needs a topology is listed after every co-located one.
            assert!(!i.needs_topology || Policy::ALL[position(p)..].iter().all(|q| q.info().needs_topology), "{p}");
        }
        colors.sort_unstable();
        colors.dedup();
        assert_eq!(colors.len(), Policy::ALL.len(), "two policies share a colour");
    }

    #[test]
    fn an_unknown_name_is_an_error_with_suggestions() {
        let e = serde_json::from_str::<Policy>("\"vlm\"").unwrap_err().to_string();
        assert!(e.starts_with("unknown policy 'vlm'; did you mean vllm?"), "{e}");
        let e = serde_json::from_str::<Router>("\"rr\"").unwrap_err().to_string();
        assert!(e.starts_with("unknown router 'rr'"), "{e}");
        assert!(serde_json::from_str::<Policy>("3").unwrap_err().to_string().contains("expected a string"));
    }
}
