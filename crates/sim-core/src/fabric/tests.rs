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

/// Replicas of dp 2 × tp 1 with expert parallelism (ep 2) over the given GPU pairs.
fn ep_fabric(pairs: &[[&str; 2]]) -> Fabric {
    let t = two_nodes();
    let placement = pairs.iter().map(|p| vec![p.iter().map(|id| t.index[*id]).collect()]).collect();
    let par = crate::memory::Parallel { dp: 2, ep: 2, ..crate::memory::Parallel::tp_pp(1, 1) };
    Fabric::new(t, Vec::new(), placement, par, 1000, 1, 1000.0, 0).unwrap()
}

/// An EP group's all-to-alls are cached like the TP AllReduces and shared like them: two
/// replicas whose exchanges cross s0 – s1 (each rank's whole n over the 10 GB/s link, one
/// flow per direction: β = 1/10 GB/s alone, 2/10 while the other's step is in flight),
/// their own step not counted, a link change re-pricing them, none without `ep`.
#[test]
fn ep_all_to_alls_are_cached_shared_and_repriced() {
    use crate::topo::collective::{all_to_all, A2aMode};
    let mut f = ep_fabric(&[["a0", "b0"], ["a1", "b1"]]);
    let g0 = f.placement[0][0].clone();
    let alone = f.ep_a2a(0).unwrap();
    for m in A2aMode::ALL {
        assert_eq!(alone.get(m), all_to_all(&f.topo.clone(), &mut f.routes, &g0, m).unwrap(), "{m:?}");
    }
    assert!(close(alone.high_throughput.b, 1.0 / 10e9) && close(alone.high_throughput.a, 3e-6 + 25e-6), "{alone:?}");
    assert_eq!(alone.shared, 0.0);
    // Its own step in flight does not share with it.
    assert_eq!(f.step_comm_s(0, 1000), 0.0); // tp 1: no AllReduce
    assert_eq!(f.ep_a2a(0), Some(alone));
    // Replica 1's step in flight crosses s0 – s1 too: half the bandwidth.
    f.step_comm_s(1, 1000);
    let shared = f.ep_a2a(0).unwrap();
    assert!(close(shared.high_throughput.b, 2.0 / 10e9) && shared.high_throughput.a == alone.high_throughput.a, "{shared:?}");
    assert!(close(shared.low_latency.b, 2.0 / 10e9) && close(shared.shared, 0.5), "{shared:?}");
    assert_eq!(f.ep_a2a_stage(0, 0), Some(shared));
    f.end_step(1);
    f.end_step(0);
    assert_eq!(f.ep_a2a(0), Some(alone));
    // A link change re-prices them.
    let l = f.topo.link_between(f.topo.index["s0"], f.topo.index["s1"]).unwrap();
    f.apply_actions(0, &[crate::topo::events::Action::SetLink { link: l, bandwidth_gbps: Some(5.0), latency_us: None }]);
    assert!(close(f.ep_a2a(0).unwrap().high_throughput.b, 1.0 / 5e9));
    // The per-link table counts the bytes on the link: 1 MB each way per exchange.
    let before = f.link_table(1).bytes[l as usize];
    f.count_ep_bytes(0, A2aMode::HighThroughput, 1e6);
    assert!(close(f.link_table(1).bytes[l as usize] - before, 2e6));
    // Without expert parallelism there is none.
    let mut plain = fabric(&[["a0", "b0"]], 0);
    assert_eq!(plain.ep_a2a(0), None);
}

/// Expert parallelism adds the all-to-alls' links to what a step in flight occupies, but
/// with ep = 1 a fabric prices exactly as before: the same TP price, no a2a.
#[test]
fn ep_groups_leave_the_tp_prices_alone() {
    let mut plain = fabric(&[["a0", "b0"], ["a1", "b1"]], 0);
    let t = two_nodes();
    let placement = [["a0", "b0"], ["a1", "b1"]].iter().map(|p| vec![p.iter().map(|id| t.index[*id]).collect()]).collect();
    let par = crate::memory::Parallel { dp: 1, ep: 2, ..crate::memory::Parallel::tp_pp(2, 1) };
    let mut ep = Fabric::new(t, Vec::new(), placement, par, 1000, 1, 1000.0, 0).unwrap();
    for f in [&mut plain, &mut ep] {
        assert!(close(f.step_comm_s(0, 1000), ALONE_S));
        assert!(close(f.step_comm_s(1, 1000), HALF_S));
    }
    assert!(ep.ep_a2a(0).is_some());
}
