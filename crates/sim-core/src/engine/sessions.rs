//! Closed-loop sessions' index (which request waits for which) and the check of a
//! workload's dependencies. The engine keeps the index; its client side
//! ([`super::client`]) sends each later turn when its parent ends.

use crate::error::{Result, SimError};
use crate::workload::{After, RequestSpec};

/// Which request waits for which, by id.
#[derive(Debug, Clone)]
pub struct Sessions {
    /// Per request id: its dependency.
    pub(super) after: Vec<Option<After>>,
    /// Per request id: the earliest time it may be sent (its spec's `arrival_ns`).
    pub(super) earliest: Vec<u64>,
    /// Children of request `i`: `children[start[i]..start[i + 1]]`, in id order.
    start: Vec<u32>,
    children: Vec<u32>,
}

impl Sessions {
    /// The index of a workload's dependencies; `None` when no request has one.
    pub fn new(specs: &[RequestSpec]) -> Option<Box<Sessions>> {
        if specs.iter().all(|s| s.after.is_none()) {
            return None;
        }
        let n = specs.len();
        let mut after = vec![None; n];
        let mut earliest = vec![0u64; n];
        let mut count = vec![0u32; n + 1];
        for s in specs {
            after[s.id as usize] = s.after;
            earliest[s.id as usize] = s.arrival_ns;
            if let Some(a) = s.after {
                count[a.parent as usize + 1] += 1;
            }
        }
        for i in 0..n {
            count[i + 1] += count[i];
        }
        let start = count.clone();
        let mut children = vec![0u32; start[n] as usize];
        let mut fill = count;
        for (id, a) in after.iter().enumerate() {
            if let Some(a) = a {
                let at = &mut fill[a.parent as usize];
                children[*at as usize] = id as u32;
                *at += 1;
            }
        }
        Some(Box::new(Sessions { after, earliest, start, children }))
    }

    pub(super) fn children_of(&self, id: u32) -> &[u32] {
        let (a, b) = (self.start[id as usize] as usize, self.start[id as usize + 1] as usize);
        &self.children[a..b]
    }
}

/// Check a workload's dependencies: each parent is another request of the workload, and
/// following parents never loops (a session whose first turn waits for its last would
/// never start). Errors name `workload`.
pub fn check_sessions(specs: &[RequestSpec]) -> Result<()> {
    let n = specs.len();
    let mut parent = vec![u32::MAX; n];
    for s in specs {
        let Some(a) = s.after else { continue };
        if a.parent as usize >= n || a.parent == s.id {
            return Err(SimError::config(
                "workload",
                format!("request {} follows request {}, which is not another request of the workload", s.id, a.parent),
            ));
        }
        parent[s.id as usize] = a.parent;
    }
    // Walk each chain of parents once (0: unseen, 1: on the current walk, 2: done).
    let mut state = vec![0u8; n];
    let mut walk = Vec::new();
    for i in 0..n {
        let mut x = i;
        while x != u32::MAX as usize && state[x] == 0 {
            state[x] = 1;
            walk.push(x);
            x = parent[x] as usize;
        }
        if x != u32::MAX as usize && state[x] == 1 {
            return Err(SimError::config(
                "workload",
                format!("request {x} waits for itself through its earlier turns (a session cannot loop)"),
            ));
        }
        walk.drain(..).for_each(|y| state[y] = 2);
    }
    Ok(())
}
