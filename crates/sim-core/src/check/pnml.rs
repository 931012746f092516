//! A policy's state machine as a place/transition Petri net (PNML export), with its
//! structural boundedness (P-invariants checked against the incidence matrix) and the
//! reachability facts of the real explored state space projected onto its places.
//!
//! Places: the request states (`pending`, `dispatching`, `waiting`, `running`, `finished`,
//! `rejected`) and the KV units (`free_units`, `held_units`). Transitions: `arrive`,
//! `reject` (too long / can never fit), `dispatch`, `admit` (takes a unit), `grow` (a
//! running request takes a unit), `preempt` (policies that preempt: back to waiting,
//! returns a unit), `release` (a unit goes back while its request leaves), `finish`.
//! Arcs carry weight 1: the net abstracts how many units a request holds; the exact counts
//! are in the explored states, whose projection gives the place bounds below.

use serde::Serialize;

const PLACES: [&str; 8] = ["pending", "dispatching", "waiting", "running", "finished", "rejected", "free_units", "held_units"];

/// `(name, inputs, outputs)` with place indices into [`PLACES`].
type Transition = (&'static str, &'static [usize], &'static [usize]);

const BASE: [Transition; 7] = [
    ("arrive", &[0], &[1]),
    ("reject", &[0], &[5]),
    ("dispatch", &[1], &[2]),
    ("admit", &[2, 6], &[3, 7]),
    ("grow", &[3, 6], &[3, 7]),
    ("release", &[7], &[6]),
    ("finish", &[3], &[4]),
];
const PREEMPT: Transition = ("preempt", &[3], &[2]);

/// A P-invariant: a weighting of places whose weighted token sum no transition changes.
#[derive(Debug, Clone, Serialize)]
pub struct PInvariant {
    pub places: Vec<&'static str>,
    /// The constant weighted sum (from the initial marking).
    pub tokens: u64,
    /// Verified against the incidence matrix.
    pub holds: bool,
}

/// The net and what is known about it.
#[derive(Debug, Clone, Serialize)]
pub struct PetriSummary {
    pub places: Vec<&'static str>,
    pub transitions: Vec<&'static str>,
    pub initial_marking: Vec<u64>,
    pub p_invariants: Vec<PInvariant>,
    /// Every place is covered by a positive P-invariant that holds: bounded from any
    /// initial marking.
    pub structurally_bounded: bool,
    /// Most tokens seen in each place over the explored states (same order as `places`).
    pub bounds: Vec<u64>,
    /// Distinct markings among the explored states.
    pub reachable_markings: usize,
    /// A marking with every request finished or rejected and every unit free was reached.
    pub final_marking_reachable: bool,
}

fn transitions(preempts: bool) -> Vec<Transition> {
    let mut t = BASE.to_vec();
    if preempts {
        t.insert(5, PREEMPT);
    }
    t
}

/// Does the weighting `y` (per place) leave every transition's token sum unchanged?
fn is_invariant(y: &[i64; 8], ts: &[Transition]) -> bool {
    ts.iter().all(|(_, i, o)| {
        let take: i64 = i.iter().map(|&p| y[p]).sum();
        let give: i64 = o.iter().map(|&p| y[p]).sum();
        take == give
    })
}

/// Summarise the net of a policy for `requests` requests and `units` KV units in all,
/// from the explored markings `(request counts by status, free units)`.
pub fn summarise(preempts: bool, requests: u64, units: u64, markings: &[([u8; 6], u32)]) -> PetriSummary {
    let ts = transitions(preempts);
    let initial = vec![requests, 0, 0, 0, 0, 0, units, 0];
    let req_inv = [1, 1, 1, 1, 1, 1, 0, 0];
    let unit_inv = [0, 0, 0, 0, 0, 0, 1, 1];
    let inv = |y: [i64; 8], tokens: u64| PInvariant {
        places: (0..8).filter(|&p| y[p] != 0).map(|p| PLACES[p]).collect(),
        tokens,
        holds: is_invariant(&y, &ts),
    };
    let p_invariants = vec![inv(req_inv, requests), inv(unit_inv, units)];
    let structurally_bounded = p_invariants.iter().all(|p| p.holds);
    let mut bounds = [0u64; 8];
    let mut seen: Vec<[u64; 8]> = markings
        .iter()
        .map(|(c, free)| {
            let mut m = [0u64; 8];
            for s in 0..6 {
                m[s] = c[s] as u64;
            }
            m[6] = *free as u64;
            m[7] = units.saturating_sub(*free as u64);
            m
        })
        .collect();
    for m in &seen {
        for p in 0..8 {
            bounds[p] = bounds[p].max(m[p]);
        }
    }
    let final_marking_reachable = seen.iter().any(|m| m[4] + m[5] == requests && m[6] == units);
    seen.sort_unstable();
    seen.dedup();
    PetriSummary {
        places: PLACES.to_vec(),
        transitions: ts.iter().map(|t| t.0).collect(),
        initial_marking: initial,
        p_invariants,
        structurally_bounded,
        bounds: bounds.to_vec(),
        reachable_markings: seen.len(),
        final_marking_reachable,
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The net as PNML (2009 grammar, place/transition net), with the initial marking.
pub fn to_pnml(name: &str, preempts: bool, requests: u64, units: u64) -> String {
    let ts = transitions(preempts);
    let initial = [requests, 0, 0, 0, 0, 0, units, 0];
    let mut x = String::new();
    x.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str("<pnml xmlns=\"http://www.pnml.org/version-2009/grammar/pnml\">\n");
    x.push_str(&format!(
        "  <net id=\"o1sim\" type=\"http://www.pnml.org/version-2009/grammar/ptnet\">\n    <name><text>{}</text></name>\n    <page id=\"page\">\n",
        esc(name)
    ));
    for (p, place) in PLACES.iter().enumerate() {
        x.push_str(&format!("      <place id=\"{place}\"><name><text>{place}</text></name>"));
        if initial[p] > 0 {
            x.push_str(&format!("<initialMarking><text>{}</text></initialMarking>", initial[p]));
        }
        x.push_str("</place>\n");
    }
    let mut arc = 0;
    for (t, ins, outs) in &ts {
        x.push_str(&format!("      <transition id=\"{t}\"><name><text>{t}</text></name></transition>\n"));
        for (src, dst) in ins.iter().map(|&p| (PLACES[p], *t)).chain(outs.iter().map(|&p| (*t, PLACES[p]))) {
            arc += 1;
            x.push_str(&format!(
                "      <arc id=\"a{arc}\" source=\"{src}\" target=\"{dst}\"><inscription><text>1</text></inscription></arc>\n"
            ));
        }
    }
    x.push_str("    </page>\n  </net>\n</pnml>\n");
    x
}
