//! Hand-computed checks of link sharing between replicas' collectives.

use super::*;
use crate::topo::collective::Comm;

/// Two 2-GPU "nodes" joined by one 10 GB/s link `s0 – s1`; GPU links 100 GB/s; 1 µs each.
fn two_nodes() -> Topology {
    Topology::from_json(
        r#"{"nodes": [{"id": "a0", "kind": "gpu"}, {"id": "a1", "kind": "gpu"}, {"id": "b0", "kind": "gpu"},
                      {"id": "b1", "kind": "gpu"}, {"id": "s0", "kind": "switch"}, {"id": "s1", "kind": "switch"}],
            "links": [{"src": "a0", "dst": "s0", "kind": "nvlink", "bandwidth_gbps": 100, "latency_us": 1},
                      {"src": "a1", "dst": "s0", "kind": "nvlink", "bandwidth_gbps": 100, "latency_us": 1},
                      {"src": "b0", "dst": "s1", "kind": "nvlink", "bandwidth_gbps": 100, "latency_us": 1},
                      {"src": "b1", "dst": "s1", "kind": "nvlink", "bandwidth_gbps": 100, "latency_us": 1},
                      {"src": "s0", "dst": "s1", "kind": "ib", "bandwidth_gbps": 10, "latency_us": 1}]}"#,
    )
    .unwrap()
}

/// Replicas of TP 2 over the given GPU pairs; hidden 1000, 1 layer.
fn fabric(pairs: &[[&str; 2]], prefill_replicas: usize) -> Fabric {
    let t = two_nodes();
    let placement = pairs.iter().map(|p| vec![p.iter().map(|id| t.index[*id]).collect()]).collect();
    Fabric::new(t, Vec::new(), placement, crate::memory::Parallel::tp_pp(2, 1), 1000, 1, 1000.0, prefill_replicas).unwrap()
}

/// A step of 1000 tokens: 2 AllReduces (1 layer) of n = 1000 · 1000 · 2 = 2 MB. Ring of 2
/// over a0 → s0 → s1 → b0 and back: α = 3 µs, and the bottleneck is the 10 GB/s link, one
/// flow per direction: AllReduce = 2(p−1)·α + 2(p−1)/p · n/B = 6 µs + n/B.
const ALONE_S: f64 = 2.0 * (6e-6 + 2e6 / 10e9); // 0.412 ms
const HALF_S: f64 = 2.0 * (6e-6 + 2e6 / 5e9); // 0.812 ms: the link shared by two

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12
}

#[test]
fn two_replicas_on_one_link_run_at_half_bandwidth_while_their_steps_overlap() {
    let mut f = fabric(&[["a0", "b0"], ["a1", "b1"]], 0);
    assert!(f.overlap[0] && f.overlap[1]);
    let s = f.step_comm_s(0, 1000); // replica 0 alone
    assert!(close(s, ALONE_S), "{s}");
    let s = f.step_comm_s(1, 1000); // replica 1 while 0's step is in flight
    assert!(close(s, HALF_S), "{s}");
    f.end_step(0);
    let s = f.step_comm_s(0, 1000); // 0 again, 1 still in flight
    assert!(close(s, HALF_S), "{s}");
    f.end_step(1);
    f.end_step(0);
    let s = f.step_comm_s(1, 1000); // alone again
    assert!(close(s, ALONE_S), "{s}");
    // Alone it is the cached price, bit for bit.
    let c = Comm::build(&f.topo, &mut f.routes, &f.placement[1].clone(), 1.0).unwrap();
    assert_eq!(s, c.step_s(1000.0, 1000.0));
    assert_eq!(f.stats.shared_steps, 2);
}

#[test]
fn replicas_on_separate_links_never_share() {
    // a0–a1 and b0–b1 stay inside their switch: no common link.
    let mut f = fabric(&[["a0", "a1"], ["b0", "b1"]], 0);
    assert!(!f.overlap[0] && !f.overlap[1]);
    let alone = f.step_comm_s(0, 1000);
    assert_eq!(f.step_comm_s(1, 1000), alone);
    assert_eq!(f.stats.shared_steps, 0);
}

#[test]
fn a_kv_transfer_on_the_link_takes_its_share() {
    // Replica 0 (a0, b0) prefills, replica 1 (b1, a1) decodes: its KV flows a0 → b1 and
    // b0 → a1 cross s0 – s1, one per direction, as do replica 0's ring flows.
    let mut f = fabric(&[["a0", "b0"], ["b1", "a1"]], 1);
    f.start_transfer(0, 7, 1_000_000, 0, 1);
    assert_eq!(f.kv_busy, 2);
    let s = f.step_comm_s(0, 1000);
    assert!(close(s, HALF_S), "{s}");
    f.end_step(0);
    // Both KV flows land; the link is the replica's alone again.
    let mut landed = Vec::new();
    while landed.is_empty() {
        let t = f.next_time().unwrap();
        landed = f.take_done(t);
    }
    assert_eq!(landed, vec![(7, 1)]);
    assert_eq!(f.kv_busy, 0);
    let s = f.step_comm_s(0, 1000);
    assert!(close(s, ALONE_S), "{s}");
}
