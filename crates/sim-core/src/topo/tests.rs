//! Hand-computed checks of the topology model, routing and collectives.

use super::collective::{pipeline_makespan, ring_allreduce, tree_allreduce, Comm};
use super::route::{candidates_view, PairRoute, RouteTable};
use super::*;

fn table(json: &str) -> Result<Topology> {
    Topology::from_json(json)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1e-12)
}

#[test]
fn presets_have_the_documented_ids() {
    let t = Topology::from_json("\"hgx-h200\"").unwrap();
    assert_eq!(t.gpus().len(), 8);
    assert!(t.index.contains_key("gpu7") && t.index.contains_key("nvswitch0"));
    let t = Topology::from_json("\"2x-hgx-h200-ib\"").unwrap();
    assert_eq!(t.gpus().len(), 16);
    for id in ["n0.gpu0", "n1.gpu7", "n0.nvswitch0", "n1.nic7", "ib0", "ib7"] {
        assert!(t.index.contains_key(id), "{id}");
    }
    assert_eq!(Topology::from_json("\"4x-hgx-h200-ib\"").unwrap().gpus().len(), 32);
    assert_eq!(Topology::from_json("\"pcie-4x-l40s\"").unwrap().gpus().len(), 4);
    assert_eq!(Topology::from_json("\"dgx-a100\"").unwrap().links[0].bandwidth_gbps, 300.0);
    let e = Topology::from_json("\"hgx-h20\"").unwrap_err();
    assert!(e.to_string().contains("did you mean hgx-h200"), "{e}");
}

/// The new boxes and the N-node pattern: ids, the GPU every node names, NVLink per direction,
/// rails; the registry keeps the canonical names; the unknown-name error states the pattern.
#[test]
fn multi_node_pattern_and_the_new_presets() {
    let gpu_of = |t: &Topology, id: &str| t.nodes[t.index[id] as usize].gpu.clone().unwrap();
    let nvlink = |t: &Topology, g: &str, sw: &str| t.links[t.link_between(t.index[g], t.index[sw]).unwrap() as usize].bandwidth_gbps;
    for (name, gpus, gpu, gbps) in [
        ("4x-hgx-h100-ib", 32, "h100", 450.0),
        ("2x-hgx-h800-ib", 16, "h800", 200.0),
        ("3x-hgx-b200-ib", 24, "b200", 900.0),
        ("1x-hgx-h200-ib", 8, "h200", 450.0),
        ("64x-hgx-h100-ib", 512, "h100", 450.0),
    ] {
        let t = Topology::from_json(&format!("\"{name}\"")).unwrap();
        assert_eq!(t.gpus().len(), gpus, "{name}");
        assert!(t.gpus().iter().all(|&g| t.nodes[g as usize].gpu.as_deref() == Some(gpu)), "{name}");
        let last = gpus / 8 - 1;
        assert_eq!(nvlink(&t, &format!("n{last}.gpu7"), &format!("n{last}.nvswitch0")), gbps, "{name}");
        let rail = &t.links[t.link_between(t.index[&format!("n{last}.nic7")], t.index["ib7"]).unwrap() as usize];
        assert_eq!((rail.kind, rail.bandwidth_gbps), (LinkKind::Ib, 50.0), "{name}");
    }
    // The old spelling builds the same table as before.
    assert_eq!(presets::preset("2x-hgx-h200-ib"), Some(presets::multi_node(2, 8, "h200", 450.0)));
    // GB200 NVL72: 72 GPUs on one switch at 900 GB/s per direction, a NIC each on 4 rails.
    let t = Topology::from_json("\"gb200-nvl72\"").unwrap();
    assert_eq!(t.gpus().len(), 72);
    assert_eq!((gpu_of(&t, "gpu71").as_str(), nvlink(&t, "gpu71", "nvswitch0")), ("gb200", 900.0));
    assert!(t.link_between(t.index["nic69"], t.index["ib1"]).is_some() && t.link_between(t.index["nic69"], t.index["ib0"]).is_none());
    for j in 0..4 {
        assert_eq!(t.adj[t.index[&format!("ib{j}")] as usize].len(), 18);
    }
    // Inside the rack the route is NVLink, never the rails.
    let v = candidates_view(&t, t.index["gpu0"], t.index["gpu68"], &[]);
    assert_eq!(v.iter().find(|c| c.chosen).unwrap().path, ["gpu0", "nvswitch0", "gpu68"]);
    // The registry lists canonical names only; each resolves.
    assert!(presets::PRESET_NAMES.contains(&"gb200-nvl72") && !presets::PRESET_NAMES.contains(&"3x-hgx-b200-ib"));
    // Out of range, an unknown box, a near miss: errors that say why and state the pattern.
    let e = |s: &str| Topology::from_json(&format!("\"{s}\"")).unwrap_err().to_string();
    assert!(e("65x-hgx-h100-ib").contains("must be 1 to 64 (got 65)"), "{}", e("65x-hgx-h100-ib"));
    assert!(e("0x-hgx-b200-ib").contains("must be 1 to 64"), "{}", e("0x-hgx-b200-ib"));
    assert!(e("513x-hgx-h200-ib").contains("must be 1 to 512"), "{}", e("513x-hgx-h200-ib"));
    assert!(Topology::from_json("\"256x-hgx-h200-ib\"").is_ok());
    assert!(e("2x-hgx-a100-ib").contains("no HGX box of GPU 'a100' (one of h100, h200, h800, b200)"), "{}", e("2x-hgx-a100-ib"));
    let near = e("gb200-nvl36");
    assert!(near.contains("did you mean gb200-nvl72") && near.contains("{N}x-hgx-{h100|h200|h800|b200}-ib"), "{near}");
    let over = table(r#"{"preset": "9x-hgx-h900-ib"}"#).unwrap_err();
    assert_eq!(over.path(), Some("preset"));
}

const SMALL: &str = r#"{"nodes": [{"id": "a", "kind": "gpu"}, {"id": "b", "kind": "gpu"}, {"id": "s", "kind": "switch"}],
  "links": [{"src": "a", "dst": "s", "kind": "nvlink", "bandwidth_gbps": 100, "latency_us": 1},
            LINK]}"#;

fn small(link: &str) -> String {
    SMALL.replace("LINK", link)
}

#[test]
fn bad_input_names_the_item() {
    let e = table(&small(r#"{"src": "b", "dst": "s", "kind": "nvlink", "bandwidth_gbps": -1, "latency_us": 1}"#)).unwrap_err();
    assert_eq!(e.to_string(), "links[1].bandwidth_gbps: must be > 0 (got -1)");
    let e = table(&small(r#"{"src": "b", "dst": "s", "kind": "nvlink", "bandwidth_gbps": 1, "latency_us": 0}"#)).unwrap_err();
    assert_eq!(e.path(), Some("links[1].latency_us"));
    let e = table(&small(r#"{"src": "b", "dst": "q", "kind": "nvlink", "bandwidth_gbps": 1, "latency_us": 1}"#)).unwrap_err();
    assert_eq!(e.path(), Some("links[1].dst"));
    assert!(e.to_string().contains("unknown node id 'q'"), "{e}");
    let e = table(&small(r#"{"src": "b", "dst": "b", "kind": "nvlink", "bandwidth_gbps": 1, "latency_us": 1}"#)).unwrap_err();
    assert_eq!(e.to_string(), "links[1]: self loop on 'b'");
    let e = table(&small(r#"{"src": "s", "dst": "a", "kind": "nvlink", "bandwidth_gbps": 1, "latency_us": 1}"#)).unwrap_err();
    assert_eq!(e.to_string(), "links[1]: duplicate link s – a (also links[0])");
    let e = table(&small(r#"{"src": "b", "dst": "s", "kind": "wifi", "bandwidth_gbps": 1, "latency_us": 1}"#)).unwrap_err();
    assert_eq!(e.path(), Some("links[1].kind"));
    // a link given over a preset replaces the preset's link
    let t = table(r#"{"preset": "hgx-h200", "links": [{"src": "gpu3", "dst": "nvswitch0", "kind": "nvswitch", "bandwidth_gbps": 45, "latency_us": 1}]}"#).unwrap();
    assert_eq!(t.links.len(), 8);
    assert_eq!(t.links[t.link_between(t.index["gpu3"], t.index["nvswitch0"]).unwrap() as usize].bandwidth_gbps, 45.0);
}

#[test]
fn ring_allreduce_on_4_and_8_gpus_by_hand() {
    // hgx-h200: GPU → NVSwitch → GPU, 450 GB/s per direction, 1 µs a link: α = 2 µs,
    // B = 450 GB/s (each GPU's link carries one ring flow each way). n = 1 GB:
    // 4 GPUs: 2·3·2 µs + 2·3/4 · 1e9 / 450e9 s = 12 µs + 3.333333 ms = 3.345333 ms
    // 8 GPUs: 2·7·2 µs + 2·7/8 · 1e9 / 450e9 s = 28 µs + 3.888889 ms = 3.916889 ms
    let t = Topology::from_json("\"hgx-h200\"").unwrap();
    let mut r = RouteTable::default();
    let g: Vec<u32> = (0..8).map(|i| t.index[&format!("gpu{i}")]).collect();
    let four = ring_allreduce(&t, &mut r, &g[..4]).unwrap();
    assert!(close(four.at(1e9), 12e-6 + 1.5e9 / 450e9), "{four:?}");
    assert!(close(four.at(1e9) * 1e3, 3.345_333_333_333), "{}", four.at(1e9) * 1e3);
    let eight = ring_allreduce(&t, &mut r, &g).unwrap();
    assert!(close(eight.at(1e9) * 1e3, 3.916_888_888_889), "{}", eight.at(1e9) * 1e3);
    // Tree on 8: depth 3, α part 2·3·2 µs = 12 µs; gpu0 receives from gpu1 and gpu2 over its
    // one link, so B = 225 GB/s and β = 2 / 225e9. Cheaper for 1 KB, the ring for 1 GB.
    let tree = tree_allreduce(&t, &mut r, &g).unwrap();
    assert!(close(tree.a, 12e-6) && close(tree.b, 2.0 / 225e9), "{tree:?}");
    assert!(tree.at(1e3) < eight.at(1e3) && eight.at(1e9) < tree.at(1e9));
    // The same numbers as the execution-time model's own ring (2(p−1)/p·n/bw + 2(p−1)·hop).
    let c = Comm::build(&t, &mut r, std::slice::from_ref(&g), 80.0).unwrap();
    assert!(close(c.step_s(1.0, 8192.0), 160.0 * tree.at(16384.0).min(eight.at(16384.0))));
}

#[test]
fn rtmpv2_hysteresis_two_percent_keeps_four_percent_replaces() {
    // Two disjoint 2-link paths a–s1–b and a–s2–b, 100 GB/s and 1 µs each: B_min = 100,
    // D = D_max = 2, both score 0.65 + 0.35 = 1. Raising the other path to 103 GB/s scores
    // 0.65·1.03 + 0.35 = 1.0195 (≈2% better): kept; 106.2 GB/s → 1.0403 (≈4%): replaced.
    let json = r#"{"nodes": [{"id": "a", "kind": "gpu"}, {"id": "b", "kind": "gpu"},
        {"id": "s1", "kind": "switch"}, {"id": "s2", "kind": "switch"}],
      "links": [{"src": "a", "dst": "s1", "kind": "eth", "bandwidth_gbps": 100, "latency_us": 1},
                {"src": "s1", "dst": "b", "kind": "eth", "bandwidth_gbps": 100, "latency_us": 1},
                {"src": "a", "dst": "s2", "kind": "eth", "bandwidth_gbps": 100, "latency_us": 1},
                {"src": "s2", "dst": "b", "kind": "eth", "bandwidth_gbps": 100, "latency_us": 1}]}"#;
    let mut t = table(json).unwrap();
    let mut r = PairRoute::new(&t, 0, 1);
    assert_eq!(r.cands.len(), 2);
    let first = r.chosen.unwrap();
    assert!(close(r.cands[first].score, 1.0));
    let other = 1 - first;
    let other_links = r.cands[other].path.links.clone();
    let set = |t: &mut Topology, bw: f64| {
        for &l in &other_links {
            t.links[l as usize].bandwidth_gbps = bw;
        }
    };
    set(&mut t, 103.0);
    assert!(!r.recompute(&t, false, None));
    assert!(close(r.cands[other].score, 1.0195));
    assert_eq!(r.chosen, Some(first));
    set(&mut t, 106.2);
    assert!(r.recompute(&t, false, None));
    assert!(close(r.cands[other].score, 1.0403));
    assert_eq!(r.chosen, Some(other));
    // A fresh evaluation picks the best outright.
    assert_eq!(PairRoute::new(&t, 0, 1).route().unwrap().path.links, other_links);
}

#[test]
fn pareto_frontier_of_a_small_graph() {
    // Four two-link routes s → t via a, b, c, d with (B GB/s, D µs):
    // a (100, 2), b (200, 4), d (100, 4), c (50, 6). Frontier: a (lowest D) and b (highest B);
    // d is beaten by a and b, c by everyone. Scores with B_min = 50, D_max = 6:
    // a 0.65·2 + 0.35·3 = 2.35, b 0.65·4 + 0.35·1.5 = 3.125 (chosen), d 1.825, c 1.0.
    let mut nodes = vec![r#"{"id": "s", "kind": "gpu"}"#.to_string(), r#"{"id": "t", "kind": "gpu"}"#.to_string()];
    let mut links = Vec::new();
    for (via, bw, lat) in [("a", 100, 1), ("b", 200, 2), ("c", 50, 3), ("d", 100, 2)] {
        nodes.push(format!(r#"{{"id": "{via}", "kind": "switch"}}"#));
        for (x, y) in [("s", via), (via, "t")] {
            links.push(format!(r#"{{"src": "{x}", "dst": "{y}", "kind": "eth", "bandwidth_gbps": {bw}, "latency_us": {lat}}}"#));
        }
    }
    let json = format!(r#"{{"nodes": [{}], "links": [{}]}}"#, nodes.join(","), links.join(","));
    let t = table(&json).unwrap();
    let v = candidates_view(&t, 0, 1, &[]);
    let got: Vec<(String, f64, f64, f64, bool, bool)> =
        v.iter().map(|c| (c.path[1].clone(), c.bandwidth_gbps, c.latency_us, c.score, c.frontier, c.chosen)).collect();
    let want = [("a", 100.0, 2.0, 2.35, true, false), ("b", 200.0, 4.0, 3.125, true, true), ("d", 100.0, 4.0, 1.825, false, false), ("c", 50.0, 6.0, 1.0, false, false)];
    assert_eq!(got.len(), 4, "{got:?}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!((g.0.as_str(), g.1, g.2, g.4, g.5), (w.0, w.1, w.2, w.4, w.5), "{got:?}");
        assert!(close(g.3, w.3), "{got:?}");
    }
}

/// The four-route graph of [`pareto_frontier_of_a_small_graph`] with routing knobs `routing`.
fn four_routes(routing: &str) -> Topology {
    let mut nodes = vec![r#"{"id": "s", "kind": "gpu"}"#.to_string(), r#"{"id": "t", "kind": "gpu"}"#.to_string()];
    let mut links = Vec::new();
    for (via, bw, lat) in [("a", 100, 1), ("b", 200, 2), ("c", 50, 3), ("d", 100, 2)] {
        nodes.push(format!(r#"{{"id": "{via}", "kind": "switch"}}"#));
        for (x, y) in [("s", via), (via, "t")] {
            links.push(format!(r#"{{"src": "{x}", "dst": "{y}", "kind": "eth", "bandwidth_gbps": {bw}, "latency_us": {lat}}}"#));
        }
    }
    table(&format!(r#"{{"nodes": [{}], "links": [{}], "routing": {routing}}}"#, nodes.join(","), links.join(","))).unwrap()
}

#[test]
fn alpha_chooses_on_the_frontier_and_leaves_the_shortest_path_when_bandwidth_weighs() {
    // Frontier: a (100 GB/s, 2 µs: the shortest) and b (200 GB/s, 4 µs). With B_min = 50
    // and D_max = 6, a scores 2α + 3(1−α) and b 4α + 1.5(1−α): b from α = 3/7 ≈ 0.4286 on.
    // The dominated c and d are never chosen.
    let via = |alpha: f64| {
        let t = four_routes(&format!(r#"{{"alpha": {alpha}}}"#));
        let v = candidates_view(&t, 0, 1, &[]);
        assert!(v.iter().filter(|c| c.chosen).all(|c| c.frontier), "alpha {alpha}: {v:?}");
        (v[0].path[1].clone(), v.iter().find(|c| c.chosen).unwrap().path[1].clone())
    };
    for (alpha, want) in [(0.0, "a"), (0.2, "a"), (0.42, "a"), (0.43, "b"), (0.65, "b"), (1.0, "b")] {
        let (shortest, chosen) = via(alpha);
        assert_eq!(shortest, "a");
        assert_eq!(chosen, want, "alpha {alpha}");
    }
    // The pair's frontier is what a multipath KV transfer splits over: 1/3 via a, 2/3 via b.
    let t = four_routes(r#"{"multipath_kv": true}"#);
    let mut routes = RouteTable::default();
    let parts = collective::frontier_flows(&t, &mut routes, 0, 1).unwrap();
    let got: Vec<(f64, f64)> = parts.iter().map(|(f, share)| (f.latency_s * 1e6, *share)).collect();
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(close(got[0].0, 2.0) && close(got[0].1, 1.0 / 3.0), "{got:?}");
    assert!(close(got[1].0, 4.0) && close(got[1].1, 2.0 / 3.0), "{got:?}");
    assert!(t.to_table().routing.multipath_kv);
    assert!(!four_routes("{}").to_table().routing.multipath_kv);
}

#[test]
fn pipeline_makespan_is_bounded_by_the_slowest_stage() {
    // 3 stages (2, 5, 3 ms), transfers 1 ms: first micro-batch 12 ms, then one per 5 ms.
    assert!(close(pipeline_makespan(&[2.0, 5.0, 3.0], &[1.0, 1.0], 1), 12.0));
    assert!(close(pipeline_makespan(&[2.0, 5.0, 3.0], &[1.0, 1.0], 4), 27.0));
}

#[test]
fn multi_node_routes_cross_the_rail() {
    let t = Topology::from_json("\"2x-hgx-h200-ib\"").unwrap();
    let v = candidates_view(&t, t.index["n0.gpu3"], t.index["n1.gpu3"], &[]);
    let c = v.iter().find(|c| c.chosen).unwrap();
    assert_eq!(c.path, ["n0.gpu3", "n0.nic3", "ib3", "n1.nic3", "n1.gpu3"]);
    assert_eq!((c.bandwidth_gbps, c.latency_us), (50.0, 4.0));
}

/// A link taken down on the chosen route moves the view off it, to what the simulator's
/// own table chooses after the same `link_down`; the down link is on no candidate.
#[test]
fn routes_with_a_link_down_avoid_it_as_the_simulator_does() {
    let t = Topology::from_json("\"2x-hgx-h200-ib\"").unwrap();
    let (a, b) = (t.index["n0.gpu3"], t.index["n1.gpu3"]);
    let rail = t.link_between(t.index["n0.nic3"], t.index["ib3"]).unwrap();
    let before = candidates_view(&t, a, b, &[]);
    let chosen = |v: &[route::CandidateView]| v.iter().find(|c| c.chosen).map(|c| c.path.clone());
    assert_eq!(chosen(&before).unwrap(), ["n0.gpu3", "n0.nic3", "ib3", "n1.nic3", "n1.gpu3"]);
    let after = candidates_view(&t, a, b, &[rail]);
    assert!(!after.is_empty());
    let hops = |p: &[String]| p.windows(2).map(|w| t.link_between(t.index[&w[0]], t.index[&w[1]]).unwrap()).collect::<Vec<_>>();
    for c in &after {
        assert!(!hops(&c.path).contains(&rail), "{:?} uses the down link", c.path);
    }
    let now = chosen(&after).unwrap();
    assert_ne!(Some(now.clone()), chosen(&before));
    // The simulator: one TP-2 replica over the pair, the same link down as an event at t = 0.
    let mut f = crate::fabric::Fabric::new(t.clone(), Vec::new(), vec![vec![vec![a, b]]], crate::memory::Parallel::tp_pp(2, 1), 1000, 1, 1000.0, 0).unwrap();
    f.apply_actions(0, &[events::Action::LinkDown(rail)]);
    let sim = f.routes.pairs[&(a.min(b), a.max(b))].route().unwrap();
    let sim_path: Vec<String> = sim.path.nodes.iter().map(|&n| t.nodes[n as usize].id.clone()).collect();
    assert_eq!(now, sim_path);
    // Listed the other way round (dst → src) and twice, it is the same link, down once.
    let back = candidates_view(&t, b, a, &[rail, rail]);
    let rev: Vec<Vec<String>> = back.iter().map(|c| c.path.iter().rev().cloned().collect()).collect();
    assert_eq!(rev, after.iter().map(|c| c.path.clone()).collect::<Vec<_>>());
    // Every link of n0.gpu3 down: no path, an empty list (the simulator has no route).
    let all: Vec<u32> = t.adj[a as usize].iter().map(|&(_, l)| l).collect();
    assert!(candidates_view(&t, a, b, &all).is_empty());
}

/// The A*-with-bounds Yen returns exactly the paths of the plain Dijkstra-under-Yen, ties
/// included, on the presets (with links down and latencies changed) and on random graphs
/// full of equal-cost paths.
#[test]
fn k_shortest_matches_the_plain_dijkstra_yen() {
    use super::paths::{k_shortest, reference::k_shortest_reference};
    let mut rng = crate::rng::SimRng::new(7);
    let mut topos: Vec<Topology> = ["hgx-h200", "pcie-4x-l40s", "2x-hgx-h200-ib", "4x-hgx-h200-ib", "5x-hgx-h200-ib"]
        .iter()
        .map(|p| Topology::from_json(&format!("\"{p}\"")).unwrap())
        .collect();
    for seed in 0..6 {
        // Random graphs: n nodes, a ring plus chords, latencies from {1, 2, 3} µs (many ties),
        // sometimes parallel paths through distinct middle nodes.
        let n = 6 + 4 * seed;
        let mut links = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..n {
            seen.insert((i.min((i + 1) % n), i.max((i + 1) % n)));
        }
        for _ in 0..2 * n {
            let (a, b) = (rng.range_u32(0, n as u32 - 1) as usize, rng.range_u32(0, n as u32 - 1) as usize);
            if a != b {
                seen.insert((a.min(b), a.max(b)));
            }
        }
        for (a, b) in seen {
            let lat = 1 + rng.range_u32(0, 2);
            links.push(format!(r#"{{"src": "g{a}", "dst": "g{b}", "kind": "nvlink", "bandwidth_gbps": 100, "latency_us": {lat}}}"#));
        }
        let nodes: Vec<String> = (0..n).map(|i| format!(r#"{{"id": "g{i}", "kind": "gpu"}}"#)).collect();
        topos.push(table(&format!(r#"{{"nodes": [{}], "links": [{}]}}"#, nodes.join(","), links.join(","))).unwrap());
    }
    let mut checked = 0;
    for mut t in topos {
        for round in 0..3 {
            if round > 0 {
                // Take a few links down and change a few latencies.
                for _ in 0..3 {
                    let l = rng.range_u32(0, t.links.len() as u32 - 1) as usize;
                    if round == 1 {
                        t.links[l].up = false;
                    } else {
                        t.links[l].latency_us = [0.5, 1.0, 2.0, 3.0][rng.range_u32(0, 3) as usize];
                    }
                }
            }
            let nodes = t.nodes.len() as u32;
            for _ in 0..25 {
                let (s, d) = (rng.range_u32(0, nodes - 1), rng.range_u32(0, nodes - 1));
                if s == d {
                    continue;
                }
                for k in [1, 4, 7] {
                    assert_eq!(k_shortest(&t, s, d, k), k_shortest_reference(&t, s, d, k), "{s} → {d}, k = {k}");
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 500, "{checked}");
}

/// A random fabric of twins: `hubs` switches and `copies` copies of a random unit (a ring
/// plus chords of `size` nodes, latencies from {1, 2, 3} µs, every copy on every hub at
/// the same nodes), one odd unit, a few hub–hub links; node ids declared in a shuffled
/// order when `shuffle` (so some copies interleave and fall out of their class).
fn twin_fabric(rng: &mut crate::rng::SimRng, hubs: usize, copies: usize, size: usize, shuffle: bool) -> Topology {
    let lat = |rng: &mut crate::rng::SimRng| 1 + rng.range_u32(0, 2);
    let mut inside: Vec<(usize, usize, u32)> = (0..size).map(|i| (i, (i + 1) % size, 1)).filter(|x| x.0 < x.1 || (x.1 == 0 && size > 2)).collect();
    for _ in 0..size / 2 {
        let (a, b) = (rng.range_u32(0, size as u32 - 1) as usize, rng.range_u32(0, size as u32 - 1) as usize);
        if a != b && !inside.iter().any(|x| (x.0.min(x.1), x.0.max(x.1)) == (a.min(b), a.max(b))) {
            inside.push((a, b, lat(rng)));
        }
    }
    let ports: Vec<(usize, usize, u32)> = (0..hubs).map(|h| (rng.range_u32(0, size as u32 - 1) as usize, h, lat(rng))).collect();
    let mut ids: Vec<String> = (0..copies + 1).flat_map(|c| (0..size).map(move |i| format!("u{c}_{i}"))).collect();
    if shuffle {
        for i in (1..ids.len()).rev() {
            ids.swap(i, rng.range_u32(0, i as u32) as usize);
        }
    }
    ids.extend((0..hubs).map(|h| format!("h{h}")));
    let node = |id: &String| format!(r#"{{"id": "{id}", "kind": "{}"}}"#, if id.starts_with('h') { "switch" } else { "gpu" });
    let link = |a: String, b: String, l: u32| format!(r#"{{"src": "{a}", "dst": "{b}", "kind": "eth", "bandwidth_gbps": 100, "latency_us": {l}}}"#);
    let mut links = Vec::new();
    for c in 0..=copies {
        // The last copy is odd: one more port, on its first node.
        for &(a, b, l) in &inside {
            links.push(link(format!("u{c}_{a}"), format!("u{c}_{b}"), l));
        }
        for &(x, h, l) in &ports {
            links.push(link(format!("u{c}_{x}"), format!("h{h}"), l));
        }
        if c == copies && !ports.iter().any(|p| p.0 == 0 && p.1 == 0) {
            links.push(link(format!("u{c}_0"), "h0".into(), 2));
        }
    }
    for h in 1..hubs {
        links.push(link(format!("h{}", h - 1), format!("h{h}"), lat(rng)));
    }
    let nodes: Vec<String> = ids.iter().map(node).collect();
    table(&format!(r#"{{"nodes": [{}], "links": [{}]}}"#, nodes.join(","), links.join(","))).unwrap()
}

/// The re-routing of the first version: after a change of `link`, a walk over every pair,
/// re-evaluating those whose candidates cross it and, when paths may be added, those with
/// fewer than k candidates or that lost the link when it went down.
fn reroute_every_pair(
    t: &Topology,
    pairs: &mut std::collections::BTreeMap<(u32, u32), PairRoute>,
    disturbed_by: &mut std::collections::BTreeMap<u32, Vec<(u32, u32)>>,
    link: u32,
    structural: bool,
    may_add: bool,
) {
    let k = t.routing.k_paths as usize;
    let mut disturbed = disturbed_by.remove(&link).unwrap_or_default();
    for (key, r) in pairs.iter_mut() {
        let uses = r.cands.iter().any(|c| c.path.links.contains(&link));
        let regain = may_add && (r.cands.len() < k || disturbed.binary_search(key).is_ok());
        if uses || regain {
            if uses && structural && !t.links[link as usize].up {
                disturbed.push(*key);
            }
            r.recompute(t, structural, None);
        }
    }
    if !t.links[link as usize].up && !disturbed.is_empty() {
        disturbed.sort_unstable();
        disturbed.dedup();
        disturbed_by.insert(link, disturbed);
    }
}

/// With twin units pruned (every search sees one unit of each class it does not touch) Yen
/// returns exactly the paths of the plain Dijkstra-under-Yen: on multi-node presets large
/// enough for their rails to be hubs and on random fabrics of twins, as built and after
/// links go down, come up and change latency (the router following each event, its classes
/// splitting and joining), ties included. The route table, which finds the pairs an event
/// concerns through its link index, re-routes exactly the pairs a walk over every pair
/// would, to the same routes.
#[test]
fn twin_pruned_k_shortest_matches_the_plain_dijkstra_yen() {
    use super::paths::{reference::k_shortest_reference, Router};
    use super::twins::{Twins, HUB};
    let mut rng = crate::rng::SimRng::new(11);
    let mut topos: Vec<Topology> = ["17x-hgx-h200-ib", "20x-hgx-h100-ib", "gb200-nvl72"]
        .iter()
        .map(|p| Topology::from_json(&format!("\"{p}\"")).unwrap())
        .collect();
    for seed in 0..8 {
        topos.push(twin_fabric(&mut rng, 1 + seed % 3, 16 + seed, 2 + seed % 4, seed % 2 == 1));
    }
    let (mut checked, mut events_checked) = (0, 0);
    for mut t in topos {
        let mut router = Router::new(&t);
        assert!(Twins::new(&t).unit_of.contains(&HUB), "a fabric with hubs");
        let nodes = t.nodes.len() as u32;
        let mut table = RouteTable::default();
        let mut plain = std::collections::BTreeMap::new();
        let mut disturbed = std::collections::BTreeMap::new();
        for _ in 0..25 {
            let (s, d) = (rng.range_u32(0, nodes - 1), rng.range_u32(0, nodes - 1));
            if s != d {
                table.get(&t, s, d);
                plain.entry((s.min(d), s.max(d))).or_insert_with(|| PairRoute::new(&t, s.min(d), s.max(d)));
            }
        }
        for round in 0..4 {
            if round > 0 {
                for _ in 0..4 {
                    let l = rng.range_u32(0, t.links.len() as u32 - 1);
                    let a = match round {
                        1 => events::Action::LinkDown(l),
                        2 => events::Action::SetLink { link: l, bandwidth_gbps: None, latency_us: Some([0.5, 1.0, 2.0, 3.0][rng.range_u32(0, 3) as usize]) },
                        _ => events::Action::LinkUp(l),
                    };
                    let mut shadow = t.clone();
                    let (touched, structural, may_add) = events::apply(&mut shadow, &a);
                    let (same, _) = table.apply(&mut t, &a);
                    assert_eq!(touched, same);
                    router.relink(&t, &touched);
                    if let [l] = touched[..] {
                        reroute_every_pair(&t, &mut plain, &mut disturbed, l, structural, may_add);
                    }
                    for (key, r) in &plain {
                        let got = &table.pairs[key];
                        let paths = |r: &PairRoute| r.cands.iter().map(|c| c.path.clone()).collect::<Vec<_>>();
                        assert_eq!((paths(got), got.chosen), (paths(r), r.chosen), "{key:?} after {a:?}");
                        events_checked += 1;
                    }
                }
            }
            for _ in 0..20 {
                let (s, d) = (rng.range_u32(0, nodes - 1), rng.range_u32(0, nodes - 1));
                if s == d {
                    continue;
                }
                for k in [1, 4, 7] {
                    let want = k_shortest_reference(&t, s, d, k);
                    assert_eq!(router.k_shortest(&t, s, d, k), want, "{s} → {d}, k = {k}, round {round}");
                    assert_eq!(super::paths::k_shortest(&t, s, d, k), want, "fresh: {s} → {d}, k = {k}, round {round}");
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 1000 && events_checked > 1000, "{checked} {events_checked}");
}

/// Ids of a placement, per replica per stage.
fn placed_ids(t: &Topology, p: &placement::Placement) -> Vec<Vec<Vec<String>>> {
    p.iter().map(|r| r.iter().map(|s| s.iter().map(|&g| t.nodes[g as usize].id.clone()).collect()).collect()).collect()
}

fn par(dp: u32, tp: u32, pp: u32) -> crate::memory::Parallel {
    crate::memory::Parallel { dp, ep: dp * tp, ..crate::memory::Parallel::tp_pp(tp, pp) }
}

/// Data-parallel ranks: a stage holds dp · tp GPUs, filling machines in order (it may span
/// two), each rank's tp GPUs inside one machine; pipeline stages move on to the next machine.
#[test]
fn placement_with_dp_fills_machines_in_order_and_keeps_each_tp_group_in_one() {
    let t = Topology::from_json("\"2x-hgx-h200-ib\"").unwrap();
    let ids = |dp, tp, pp, replicas| placed_ids(&t, &placement::auto(&t, &par(dp, tp, pp), replicas).unwrap());
    let node = |k: usize, r: std::ops::Range<usize>| r.map(|i| format!("n{k}.gpu{i}")).collect::<Vec<_>>();
    let cat = |a: Vec<String>, b: Vec<String>| a.into_iter().chain(b).collect::<Vec<_>>();
    // dp 16 × tp 1: one stage over both boxes.
    assert_eq!(ids(16, 1, 1, 1), vec![vec![cat(node(0, 0..8), node(1, 0..8))]]);
    // dp 2 × tp 8: a rank per box.
    assert_eq!(ids(2, 8, 1, 1), vec![vec![cat(node(0, 0..8), node(1, 0..8))]]);
    // dp 2 × tp 4 × pp 2: stage 0 fills n0, stage 1 n1.
    assert_eq!(ids(2, 4, 2, 1), vec![vec![node(0, 0..8), node(1, 0..8)]]);
    // dp 3 × tp 3: the third rank does not fit what n0 has left, so it goes to n1 whole.
    assert_eq!(ids(3, 3, 1, 1), vec![vec![cat(node(0, 0..6), node(1, 0..3))]]);
    // dp 5 × tp 3: the fifth fits no box (2 left in each) and takes free GPUs in order, as a
    // TP group that fits no machine always has.
    let five = ids(5, 3, 1, 1);
    assert_eq!(five[0][0][9..], cat(node(1, 3..6), vec!["n0.gpu6".into(), "n0.gpu7".into(), "n1.gpu6".into()])[..]);
    // dp 1 is the TP × PP placement as before: TP inside a box, PP across boxes.
    assert_eq!(ids(1, 8, 2, 1), vec![vec![node(0, 0..8), node(1, 0..8)]]);
    assert_eq!(ids(1, 4, 1, 4), vec![vec![node(0, 0..4)], vec![node(0, 4..8)], vec![node(1, 0..4)], vec![node(1, 4..8)]]);
    // Too many GPUs: the shape in the message (without dp when it is 1, as before).
    let e = placement::auto(&t, &par(2, 8, 1), 2).unwrap_err();
    assert_eq!(e.to_string(), "deployment: needs 32 GPUs (dp 2 × tp 8 × pp 1 × 2 replicas) but the topology has 16");
    let e = placement::auto(&t, &par(1, 8, 3), 1).unwrap_err();
    assert_eq!(e.to_string(), "deployment: needs 24 GPUs (tp 8 × pp 3 × 1 replicas) but the topology has 16");
    // Explicit: dp · tp · pp ids per replica, stage-major.
    let list = vec![cat(node(1, 0..4), node(0, 0..4))];
    let p = placement::explicit(&t, &list, &par(2, 2, 2), 1).unwrap();
    assert_eq!(placed_ids(&t, &p), vec![vec![node(1, 0..4), node(0, 0..4)]]);
    let e = placement::explicit(&t, &[node(0, 0..8)], &par(2, 8, 1), 1).unwrap_err();
    assert_eq!(e.to_string(), "deployment.placement[0]: must name dp × tp × pp = 16 GPUs (got 8)");
    let e = placement::explicit(&t, &[node(0, 0..3)], &par(1, 4, 1), 1).unwrap_err();
    assert_eq!(e.to_string(), "deployment.placement[0]: must name tp × pp = 4 GPUs (got 3)");
}

/// Each DP rank all-reduces over its own TP group: a stage of dp 2 × tp 4 on one box prices
/// its AllReduce as one group of 4 (the groups' links are disjoint), and over two boxes as
/// one box's ring (each rank inside its box), not as a ring of 8 or 16 over IB.
#[test]
fn each_dp_rank_keeps_its_own_tp_allreduce() {
    let t = Topology::from_json("\"hgx-h200\"").unwrap();
    let mut r = RouteTable::default();
    let g: Vec<u32> = (0..8).map(|i| t.index[&format!("gpu{i}")]).collect();
    let (c, _) = Comm::build_ranks(&t, &mut r, std::slice::from_ref(&g), Some(4), 1.0).unwrap();
    let four = ring_allreduce(&t, &mut r, &g[..4]).unwrap();
    assert_eq!(c.stages[0].0, four);
    assert_eq!(c.stages[0].1, tree_allreduce(&t, &mut r, &g[..4]).unwrap());
    // None (or tp = the stage) is the one-group build, bit for bit.
    assert_eq!(Comm::build_ranks(&t, &mut r, std::slice::from_ref(&g), None, 1.0), Comm::build_lanes(&t, &mut r, std::slice::from_ref(&g), 1.0));
    assert_eq!(Comm::build_ranks(&t, &mut r, std::slice::from_ref(&g), Some(8), 1.0), Comm::build_lanes(&t, &mut r, std::slice::from_ref(&g), 1.0));
    // dp 2 × tp 8 over two boxes: each rank's ring stays in its box.
    let t = Topology::from_json("\"2x-hgx-h200-ib\"").unwrap();
    let mut r = RouteTable::default();
    let p = placement::auto(&t, &par(2, 8, 1), 1).unwrap();
    let (c, _) = Comm::build_ranks(&t, &mut r, &p[0], Some(8), 1.0).unwrap();
    let one_box = ring_allreduce(&t, &mut r, &p[0][0][..8]).unwrap();
    assert_eq!(c.stages[0].0, one_box);
    let across = ring_allreduce(&t, &mut r, &p[0][0]).unwrap();
    assert!(across.at(1e6) > one_box.at(1e6));
    // The fabric prices the step with it.
    let mut f = crate::fabric::Fabric::new(t.clone(), Vec::new(), p.clone(), par(2, 8, 1), 1000, 1, 1000.0, 0).unwrap();
    let bytes = 1000.0 * 1000.0 * 2.0;
    assert_eq!(f.step_comm_s(0, 1000), 2.0 * one_box.at(bytes).min(tree_allreduce(&t, &mut r, &p[0][0][..8]).unwrap().at(bytes)));
}

/// GPUs by id.
fn ids_to(t: &Topology, ids: &[String]) -> Vec<u32> {
    ids.iter().map(|i| t.index[i]).collect()
}

fn box_gpus(k: usize, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("n{k}.gpu{i}")).collect()
}

/// All-to-all on `2x-hgx-h200-ib`, by hand (w = 1/(p−1) of a rank's n to each peer; links
/// 1 µs each; NVLink 450, PCIe 64, IB 50 GB/s per direction):
/// * 8 GPUs in n0, high-throughput: every flow GPU → NVSwitch → GPU, each GPU's link carries
///   7·w = 1 of its n each way: α = 2 µs + 25 µs floor, β = 1/450 GB/s.
/// * 16 GPUs, high-throughput: a rank sends 8·w = 8/15 of n to the GPU of its index in the
///   other box over its own rail (GPU → NIC → ib → NIC → GPU, 4 µs), which forwards 1/15 to
///   each of 7 box-mates (2 µs more): α = 6 + 25 µs; the rail carries 8/15 n, the forwarder's
///   NVLink 14/15 n: β = (8/15)/50 GB/s.
/// * low-latency, 16 or 8: every peer over RDMA, so each GPU's NIC carries all of n: β =
///   1/50 GB/s, α = 4 + 10 µs.
/// * all-gather over 16: a ring whose two box-crossing hops go over IB (6 µs): α = 15·6 +
///   10 µs, β = 15/50 GB/s.
#[test]
fn all_to_all_on_two_hgx_boxes_by_hand() {
    use super::collective::{all_to_all, A2aMode::*};
    let t = Topology::from_json("\"2x-hgx-h200-ib\"").unwrap();
    let mut r = RouteTable::default();
    let eight = ids_to(&t, &box_gpus(0, 8));
    let sixteen = ids_to(&t, &[box_gpus(0, 8), box_gpus(1, 8)].concat());
    let a2a = |g: &[u32], m, r: &mut RouteTable| all_to_all(&t, r, g, m).unwrap();
    let ht8 = a2a(&eight, HighThroughput, &mut r);
    assert!(close(ht8.a, 27e-6) && close(ht8.b, 1.0 / 450e9), "{ht8:?}");
    let ht16 = a2a(&sixteen, HighThroughput, &mut r);
    assert!(close(ht16.a, 31e-6) && close(ht16.b, 8.0 / 15.0 / 50e9), "{ht16:?}");
    for g in [&eight, &sixteen] {
        let ll = a2a(g, LowLatency, &mut r);
        assert!(close(ll.a, 14e-6) && close(ll.b, 1.0 / 50e9), "{ll:?}");
    }
    let ag16 = a2a(&sixteen, Allgather, &mut r);
    assert!(close(ag16.a, 100e-6) && close(ag16.b, 15.0 / 50e9), "{ag16:?}");
    let ag8 = a2a(&eight, Allgather, &mut r);
    assert!(close(ag8.a, 24e-6) && close(ag8.b, 7.0 / 450e9), "{ag8:?}");
    // The 16-GPU exchange costs more than the 8-GPU one in a box for the same bytes per rank
    // (low-latency: as much, every byte on its own NIC either way).
    for n in [1e3, 1e5, 1e7, 1e9] {
        assert!(ht16.at(n) > ht8.at(n) && ag16.at(n) > ag8.at(n), "{n}");
        assert!(a2a(&sixteen, LowLatency, &mut r).at(n) >= a2a(&eight, LowLatency, &mut r).at(n));
    }
    // Low-latency wins small exchanges and loses large ones, in a box and across two.
    for (g, ht) in [(&eight, ht8), (&sixteen, ht16)] {
        let ll = a2a(g, LowLatency, &mut r);
        assert!(ll.at(1e3) < ht.at(1e3) && ll.at(1e4) < ht.at(1e4), "{ll:?} {ht:?}");
        assert!(ll.at(1e8) > ht.at(1e8) && ll.at(1e9) > ht.at(1e9), "{ll:?} {ht:?}");
    }
    // The all-gather costs more than high-throughput from 1 MB a rank on, in a box and across
    // two (across two at any size).
    for n in [1e6, 1e7, 1e8, 1e9] {
        assert!(ag8.at(n) > ht8.at(n) && ag16.at(n) > ht16.at(n), "{n}");
    }
    assert!(ag16.at(0.0) > ht16.at(0.0));
}

/// One IB link at half its bandwidth slows exactly the exchanges whose flows cross it: the
/// 16-GPU high-throughput one (its rail carries 8/15 of n) and every low-latency one of a
/// GPU behind it; the 8-GPU high-throughput and all-gather ones inside a box are unchanged,
/// bit for bit.
#[test]
fn a_degraded_ib_link_slows_only_the_all_to_alls_that_cross_it() {
    use super::collective::{all_to_all, A2aMode::*};
    let t = Topology::from_json("\"2x-hgx-h200-ib\"").unwrap();
    let eight = ids_to(&t, &box_gpus(0, 8));
    let other = ids_to(&t, &box_gpus(1, 8));
    let sixteen = ids_to(&t, &[box_gpus(0, 8), box_gpus(1, 8)].concat());
    let price = |t: &Topology, g: &[u32], m| all_to_all(t, &mut RouteTable::default(), g, m).unwrap();
    let mut slow = t.clone();
    let rail = slow.link_between(slow.index["n0.nic3"], slow.index["ib3"]).unwrap();
    RouteTable::default().apply(&mut slow, &events::Action::SetLink { link: rail, bandwidth_gbps: Some(25.0), latency_us: None });
    let (before, after) = (price(&t, &sixteen, HighThroughput), price(&slow, &sixteen, HighThroughput));
    assert!(close(after.b, 8.0 / 15.0 / 25e9) && after.a == before.a, "{before:?} {after:?}");
    assert!(after.at(1e6) > before.at(1e6));
    for m in [HighThroughput, Allgather] {
        assert_eq!(price(&t, &eight, m), price(&slow, &eight, m));
        assert_eq!(price(&t, &other, m), price(&slow, &other, m));
    }
    // Low-latency goes over every GPU's NIC: n0.gpu3's rail at half slows it in n0, not in n1.
    assert!(close(price(&slow, &eight, LowLatency).b, 1.0 / 25e9));
    assert_eq!(price(&t, &other, LowLatency), price(&slow, &other, LowLatency));
    assert!(price(&slow, &sixteen, LowLatency).at(1e6) > price(&t, &sixteen, LowLatency).at(1e6));
}

/// The same group on the same fabric prices the same, bit for bit: with fresh or reused
/// route tables, on a clone, and in any order of building.
#[test]
fn all_to_all_is_deterministic() {
    use super::collective::{A2aLanes, A2aMode};
    for (name, n) in [("2x-hgx-h200-ib", 16usize), ("4x-hgx-h100-ib", 32), ("gb200-nvl72", 24), ("tpu-v5e-16", 16), ("pcie-4x-l40s", 4)] {
        let t = Topology::from_json(&format!("\"{name}\"")).unwrap();
        let g: Vec<u32> = t.gpus().into_iter().take(n).collect();
        let mut shared_table = RouteTable::default();
        let _ = ring_allreduce(&t, &mut shared_table, &g);
        let a = A2aLanes::build(&t, &mut shared_table, &g).unwrap();
        let b = A2aLanes::build(&t.clone(), &mut RouteTable::default(), &g).unwrap();
        assert_eq!(a, b, "{name}");
        for m in A2aMode::ALL {
            let (x, y) = (a.affine(m, |_| 1.0), b.affine(m, |_| 1.0));
            assert_eq!((x.a.to_bits(), x.b.to_bits()), (y.a.to_bits(), y.b.to_bits()), "{name} {m:?}");
            assert!(x.a > 0.0 && x.b > 0.0 && x.b.is_finite(), "{name} {m:?} {x:?}");
        }
    }
}

/// Without a topology the GPU record gives the same prices as the matching preset: one HGX
/// box (no NICs) for 8 ranks, two boxes on IB for 16, one NVL72 rack for 72; a single rank
/// costs nothing.
#[test]
fn default_all_to_all_matches_the_hgx_presets() {
    use super::collective::{all_to_all, default_a2a, A2aMode};
    let gpu = |n: &str| crate::catalog::resolve_gpu(&n.into()).unwrap();
    let near = |x: collective::Affine, y: collective::Affine| close(x.a, y.a) && close(x.b, y.b);
    for (topo, gpu_name, ranks, modes) in [
        ("hgx-h200", "h200", 8, &A2aMode::ALL[..]),
        ("2x-hgx-h200-ib", "h200", 16, &A2aMode::ALL[..]),
        ("4x-hgx-h100-ib", "h100", 32, &[A2aMode::HighThroughput, A2aMode::LowLatency][..]),
        ("gb200-nvl72", "gb200", 72, &[A2aMode::HighThroughput][..]),
    ] {
        let t = Topology::from_json(&format!("\"{topo}\"")).unwrap();
        let g: Vec<u32> = t.gpus().into_iter().take(ranks).collect();
        let mut r = RouteTable::default();
        for &m in modes {
            let (on, off) = (all_to_all(&t, &mut r, &g, m).unwrap(), default_a2a(&gpu(gpu_name), ranks as u32, m));
            assert!(near(on, off), "{topo} {m:?}: {on:?} vs {off:?}");
        }
    }
    assert_eq!(default_a2a(&gpu("h200"), 1, A2aMode::LowLatency), collective::Affine::default());
    // H800's 400 GB/s NVLink: a box's exchange at 200 GB/s per direction.
    assert!(close(default_a2a(&gpu("h800"), 8, A2aMode::HighThroughput).b, 1.0 / 200e9));
}

/// 4,096 GPUs are expressible: `512x-hgx-h200-ib` builds, a TP-16 group across its last two
/// boxes and a pair at its two ends route over the rails, and a rail link going down
/// re-routes exactly the pairs that crossed it (those the index names), around it, to the
/// paths of the plain Dijkstra-under-Yen on the reduced fabric.
#[test]
fn four_thousand_gpus_build_and_route() {
    use super::paths::reference::k_shortest_reference;
    let mut t = Topology::from_json("\"512x-hgx-h200-ib\"").unwrap();
    assert_eq!(t.gpus().len(), 4096);
    let id = |t: &Topology, s: &str| t.index[s];
    let mut group: Vec<u32> = (0..8).map(|g| id(&t, &format!("n510.gpu{g}"))).collect();
    group.extend((0..8).map(|g| id(&t, &format!("n511.gpu{g}"))));
    let mut table = RouteTable::default();
    for (i, &a) in group.iter().enumerate() {
        for &b in &group[i + 1..] {
            assert!(table.get(&t, a, b).route().is_some());
        }
    }
    let (far_a, far_b) = (id(&t, "n0.gpu0"), id(&t, "n511.gpu7"));
    let far = table.get(&t, far_a, far_b).route().unwrap().path.nodes.clone();
    assert!(far.contains(&id(&t, "ib0")) || far.contains(&id(&t, "ib7")), "{far:?}");
    // n511.gpu3 to n510.gpu3 goes over rail 3; take n511's link to it down.
    let (a, b) = (id(&t, "n510.gpu3"), id(&t, "n511.gpu3"));
    assert!(table.get(&t, a, b).route().unwrap().path.nodes.contains(&id(&t, "ib3")));
    let rail = t.pair[&(id(&t, "n511.nic3").min(id(&t, "ib3")), id(&t, "n511.nic3").max(id(&t, "ib3")))];
    let crossed: Vec<(u32, u32)> =
        table.pairs.iter().filter(|(_, r)| r.cands.iter().any(|c| c.path.links.contains(&rail))).map(|(k, _)| *k).collect();
    assert!(!crossed.is_empty());
    table.apply(&mut t, &events::Action::LinkDown(rail));
    let k = t.routing.k_paths as usize;
    for key in [(a.min(b), a.max(b)), (far_a.min(far_b), far_a.max(far_b))] {
        let r = &table.pairs[&key];
        assert!(r.cands.iter().all(|c| !c.path.links.contains(&rail)), "{key:?}");
        let got: Vec<_> = r.cands.iter().map(|c| c.path.clone()).collect();
        if crossed.contains(&key) {
            assert_eq!(got, k_shortest_reference(&t, key.0, key.1, k), "{key:?}");
        }
    }
    assert!(table.pairs.values().all(|r| r.route().is_some_and(|c| !c.path.links.contains(&rail))));
}
