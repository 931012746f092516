"""Topology from Python: builder, routes, scenarios with a topology file, live injection."""

from __future__ import annotations

import json

import pytest

import o1sim

BASE = {
    "seed": 3,
    "model": "llama-3-70b",
    "gpu": "h200",
    "deployment": {"tp": 4, "replicas": 2},
    "workload": {
        "num_requests": 120,
        "arrival": {"kind": "poisson", "rate": 10.0},
        "prompt": {"kind": "fixed", "value": 1000},
        "output": {"kind": "fixed", "value": 100},
    },
}


def test_builder_round_trips_and_routes_pick_the_best_score() -> None:
    t = o1sim.Topology()
    for g in ("a", "b"):
        t.add_gpu(g, gpu="h200")
    t.add_switch("s1").add_switch("s2")
    t.link("a", "s1", kind="eth", bandwidth_gbps=100, latency_us=1).link("s1", "b", kind="eth", bandwidth_gbps=100, latency_us=1)
    t.link("a", "s2", kind="eth", bandwidth_gbps=200, latency_us=2).link("s2", "b", kind="eth", bandwidth_gbps=200, latency_us=2)
    d = t.to_dict()
    assert [n["id"] for n in d["nodes"]] == ["a", "b", "s1", "s2"]
    rs = o1sim.routes(t, "a", "b")
    assert [r["path"] for r in rs] == [["a", "s1", "b"], ["a", "s2", "b"]]
    # B_min 100, D_max 4: via s1 0.65 + 0.35·2 = 1.35; via s2 0.65·2 + 0.35 = 1.65
    assert [round(r["score"], 9) for r in rs] == [1.35, 1.65]
    assert [r["chosen"] for r in rs] == [False, True]
    assert all(r["frontier"] for r in rs)


def _hops(path: list[str]) -> set[frozenset[str]]:
    return {frozenset(h) for h in zip(path, path[1:])}


def test_routes_with_a_link_down_are_the_route_the_simulation_takes() -> None:
    src, dst = "n0.gpu3", "n1.gpu3"
    before = next(r for r in o1sim.routes("2x-hgx-h200-ib", src, dst) if r["chosen"])["path"]
    assert before == [src, "n0.nic3", "ib3", "n1.nic3", dst]
    # Take down the rail link the chosen route crosses (either order names it).
    rail = ("ib3", "n0.nic3")
    after = o1sim.routes("2x-hgx-h200-ib", src, dst, down=[rail])
    assert after and all(frozenset(rail) not in _hops(r["path"]) for r in after)
    chosen = next(r for r in after if r["chosen"])["path"]
    assert chosen != before
    assert o1sim.routes("2x-hgx-h200-ib", src, dst, down=[]) == o1sim.routes("2x-hgx-h200-ib", src, dst)
    # The simulator: one TP-2 replica over the pair, the link down at t = 0. Its AllReduce
    # flows ride the pair's route, so the links that carried bytes are exactly its hops.
    sc = dict(BASE, model="llama-3-8b", topology="2x-hgx-h200-ib",
              deployment={"tp": 2, "replicas": 1, "placement": [[src, dst]]},
              events=[{"at_s": 0, "kind": "link_down", "src": rail[0], "dst": rail[1]}])
    links = o1sim.simulate(sc).links
    assert links is not None
    used = {frozenset((s, d)) for s, d, b in zip(links["src"], links["dst"], links["bytes"]) if b > 0}
    assert used == _hops(chosen)


def test_routes_down_errors_name_the_item() -> None:
    for down, field in [([("n0.gpu0", "n1.gpu0")], "down[0]"),  # no link between them
                        ([("n0.gpu0", "n0.nvswitch0"), ("n0.gpu0", "n9.gpu0")], "down[1]"),  # unknown id
                        ([("n0.gpu0",)], "down[0]"), (["n0.gpu0:n0.nvswitch0"], "down[0]")]:
        with pytest.raises(o1sim.ConfigError) as e:
            o1sim.routes("2x-hgx-h200-ib", "n0.gpu3", "n1.gpu3", down=down)
        assert e.value.field == field, (down, e.value)
    with pytest.raises(o1sim.ConfigError, match="no link between 'n0.gpu0' and 'n1.gpu0'"):
        o1sim.routes("2x-hgx-h200-ib", "n0.gpu3", "n1.gpu3", down=[("n0.gpu0", "n1.gpu0")])
    # Cut off: every link of the source down leaves no route, as in the simulator.
    full = o1sim.Topology(preset="hgx-h200").resolved()
    cut = [(x["src"], x["dst"]) for x in full["links"] if "gpu0" in (x["src"], x["dst"])]
    assert o1sim.routes("hgx-h200", "gpu0", "gpu5", down=cut) == []


def test_to_networkx() -> None:
    nx = pytest.importorskip("networkx")
    g = o1sim.Topology(preset="hgx-h200").to_networkx()
    assert isinstance(g, nx.Graph)
    assert g.number_of_nodes() == 9 and g.number_of_edges() == 8
    assert g.edges["gpu0", "nvswitch0"]["bandwidth_gbps"] == 450.0


def test_presets_and_bad_input() -> None:
    assert "2x-hgx-h200-ib" in o1sim.topology_presets()
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.routes({"nodes": [{"id": "a", "kind": "gpu"}], "links": [{"src": "a", "dst": "a", "kind": "eth", "bandwidth_gbps": 1, "latency_us": 1}]}, "a", "a")
    assert e.value.field == "links[0]"
    bad = dict(BASE, topology="hgx-h200", events=[{"at_s": -1, "kind": "remove_gpu", "node": "gpu1"}])
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.simulate(bad)
    assert e.value.field == "events[0].at_s"


def test_topology_file_is_inlined_and_links_table_returned(tmp_path) -> None:
    topo = {"preset": "hgx-h200", "links": [{"src": "gpu0", "dst": "nvswitch0", "kind": "nvswitch", "bandwidth_gbps": 45.0, "latency_us": 1.0}]}
    (tmp_path / "fabric.json").write_text(json.dumps(topo))
    sc = dict(BASE, topology="fabric.json")
    (tmp_path / "s.json").write_text(json.dumps(sc))
    r = o1sim.simulate(tmp_path / "s.json")
    links = r.links
    assert links is not None and len(links) == 8
    assert links.loc[0, "bandwidth_gbps"] == 45.0
    assert (links["utilization"] > 0).all()
    assert r.summary["topology"]["moved_requests"] == 0
    assert o1sim.simulate(BASE).links is None


def test_inject_topology_on_a_live_simulation_loses_no_request() -> None:
    sim = o1sim.Simulation(dict(BASE, topology="hgx-h200"))
    sim.run_events(300)
    assert 0 < sim.progress.finished_requests < 120
    sim.inject_topology(events=[{"at_s": 0, "kind": "link_down", "src": "gpu6", "dst": "nvswitch0"}])
    r = sim.finish()
    assert r.summary["finished"] == 120
    assert r.summary["topology"]["stopped_replicas"] == 1
    assert r.summary["topology"]["moved_requests"] > 0
    assert not r.links.loc[6, "up"]


def test_link_up_restarts_the_stopped_replica_on_a_live_simulation() -> None:
    sim = o1sim.Simulation(dict(BASE, topology="hgx-h200"))
    sim.run_events(300)
    t_down = sim.progress.now_ms
    sim.inject_topology(events=[{"at_s": 0, "kind": "link_down", "src": "gpu6", "dst": "nvswitch0"}])
    sim.run_events(60)
    t_up = sim.progress.now_ms
    assert t_up > t_down + 100
    sim.inject_topology(events=[{"at_s": 0, "kind": "link_up", "src": "gpu6", "dst": "nvswitch0"}])
    r = sim.finish()
    t = r.summary["topology"]
    assert r.summary["finished"] == 120
    assert (t["stopped_replicas"], t["restarted_replicas"], t["alive_replicas"]) == (1, 1, 2)
    ts = r.timeseries
    after = ts[(ts["replica"] == 1) & (ts["time_ms"] >= t_up)]
    assert after["busy"].sum() > 0, "replica 1 (gpu4-7) serves requests again"
    reqs = r.requests
    assert (reqs[reqs["arrival_ms"] > t_up]["replica"] == 1).any()


def test_disagg_moves_kv_and_pays_for_it() -> None:
    sc = dict(BASE, topology="2x-hgx-h200-ib", deployment={"tp": 8, "replicas": 2, "prefill_replicas": 1}, scheduler={"policy": "disagg"})
    r = o1sim.simulate(sc)
    t = r.summary["topology"]
    assert t["kv_transfers"] == 120 and t["kv_transfer_ms"]["mean"] > 0
    ib = r.links[r.links["kind"] == "ib"]
    assert (ib["bytes"] > 0).all()
