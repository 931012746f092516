"""The model checker from Python: results, counterexamples, replays, CLI, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pytest

import o1sim

from clikit import invoke

SCENARIO = Path(__file__).resolve().parents[1] / "benchmarks" / "check" / "vllm_6req.toml"


def small(policy: str = "vllm", bug: Optional[str] = None, blocks: int = 6) -> dict[str, Any]:
    sched: dict[str, Any] = {"policy": policy, "block_size": 4, "num_gpu_blocks": blocks,
                             "max_num_batched_tokens": 8, "chunk_size": 8, "max_num_seqs": 8,
                             "max_tokens_per_request": 8}
    if bug:
        sched["inject_bug"] = bug
    reqs = [(6, 4, 1), (5, 3, 0), (4, 3, 1)]
    return {"model": "llama-3-8b", "gpu": "h200", "scheduler": sched,
            "workload": {"requests": [{"arrival_ms": 0, "prompt_tokens": p, "output_tokens": o, "priority": pr}
                                      for p, o, pr in reqs]}}


@pytest.mark.parametrize("policy", o1sim.presets()["policies"])
def test_real_policies_pass(policy: str) -> None:
    r = o1sim.check(small(policy))
    assert r.ok and r.complete and not r.violations
    assert r.states > 100
    assert r.properties["block_accounting"] == "pass"


@pytest.mark.parametrize(("bug", "prop"), [("leak_on_preempt", "block_accounting"),
                                           ("drop_on_requeue", "one_state"),
                                           ("double_admit", "single_execution")])
def test_mutants_are_caught_and_replay_in_the_simulator(bug: str, prop: str) -> None:
    r = o1sim.check(small("vllm", bug))
    assert not r.ok
    v = r.violations[0]
    assert v.property == prop and v.length == len(v.trace) and v.reproduced
    assert [s["step"] for s in v.trace] == list(range(1, v.length + 1))
    replay = v.replay_scenario
    assert replay is not None
    # The normal simulator, with invariant checks on, stops on the same property.
    with pytest.raises(o1sim.InternalError, match=prop):
        o1sim.simulate(replay, check_invariants=True)
    # Without the bug the same scenario runs clean.
    fixed = replay.with_overrides({"scheduler.inject_bug": None})
    data = fixed.to_dict()
    del data["scheduler"]["inject_bug"]
    assert o1sim.simulate(data, check_invariants=True).summary["finished"] == 3


def two_replicas(bug: str, blocks: int, reqs: list[tuple[int, int, int]]) -> dict[str, Any]:
    sc = small("vllm", bug, blocks)
    sc["deployment"] = {"replicas": 2}
    sc["scheduler"].update(max_num_batched_tokens=16, chunk_size=16, max_tokens_per_request=16)
    sc["workload"]["requests"] = [{"arrival_ms": 0, "prompt_tokens": p, "output_tokens": o, "priority": pr}
                                  for p, o, pr in reqs]
    return sc


FOUR = [(6, 3, 1), (5, 3, 0), (4, 3, 1), (3, 3, 0)]
FIVE = [(9, 5, 1), (7, 4, 0), (6, 4, 1), (5, 4, 0), (3, 3, 1)]


@pytest.mark.parametrize(("bug", "prop"), [("leak_on_preempt", "block_accounting"),
                                           ("drop_on_requeue", "one_state"),
                                           ("double_admit", "single_execution")])
@pytest.mark.parametrize(("blocks", "reqs"), [(3, FOUR), (5, FIVE)], ids=["4req-3blocks", "5req-5blocks"])
def test_two_replica_mutants_replay_in_the_simulator(bug: str, prop: str, blocks: int,
                                                     reqs: list[tuple[int, int, int]]) -> None:
    r = o1sim.check(two_replicas(bug, blocks, reqs))
    assert not r.ok and r.config["replicas"] == 2
    v = r.violations[0]
    assert v.property == prop and v.length == len(v.trace) and v.reproduced, (v.replay_note, v.data.get("replay_message"))
    assert [s["step"] for s in v.trace] == list(range(1, v.length + 1))
    # The replay follows the counterexample's order, or (when no timing produces that one)
    # another order to the same violation: its events one at a time, in order.
    followed = v.replay_trace if v.replay_trace is not None else v.trace
    assert v.replay_trace is None or (v.replay_note and "no linear cost model" in v.replay_note)
    times = [s["at_ms"] for s in followed]
    assert all(t is not None for t in times) and times == sorted(set(times))
    assert v.data["replay_events"] == len(followed)
    replay = v.replay_scenario
    assert replay is not None
    # The normal simulator, with invariant checks on, stops on the same property.
    with pytest.raises(o1sim.InternalError, match=prop):
        o1sim.simulate(replay, check_invariants=True)
    # Without the bug the same scenario runs clean.
    data = replay.to_dict()
    del data["scheduler"]["inject_bug"]
    assert o1sim.simulate(data, check_invariants=True).summary["finished"] == len(reqs)


def test_two_replica_orders_need_a_solved_cost_model_or_another_order() -> None:
    # 4 requests, 3 blocks: the leak's order is timed by a solved linear cost model.
    v = o1sim.check(two_replicas("leak_on_preempt", 3, FOUR)).violations[0]
    assert v.replay_trace is None and v.reproduced
    assert v.replay_scenario is not None
    cost = v.replay_scenario.to_dict()["cost_model"]
    assert cost["kind"] == "linear" and cost["per_prefill_token_ms"] > 0
    # 5 requests, 5 blocks: the shortest leak cannot be timed; another order is replayed.
    v = o1sim.check(two_replicas("leak_on_preempt", 5, FIVE)).violations[0]
    assert v.replay_trace is not None and v.reproduced
    assert all(s["at_ms"] is None for s in v.trace)


def test_no_preempt_deadlocks_and_replays_as_a_stall() -> None:
    sc = small("vllm", "no_preempt", blocks=3)
    sc["workload"]["requests"] = [{"arrival_ms": 0, "prompt_tokens": 4, "output_tokens": 6}] * 2
    sc["scheduler"]["max_num_batched_tokens"] = 16
    v = o1sim.check(sc).violations[0]
    assert v.property == "no_deadlock" and v.reproduced
    assert v.replay_scenario is not None
    # A replay keeps its injected bug, which only runs with invariant checks on.
    with pytest.raises(o1sim.ConfigError):
        o1sim.simulate(v.replay_scenario)
    with pytest.raises(o1sim.StallError):
        o1sim.simulate(v.replay_scenario, check_invariants=True)


def test_limits_and_progress() -> None:
    seen: list[o1sim.CheckProgress] = []
    r = o1sim.check(SCENARIO, max_states=1000, progress=seen.append)
    assert not r.complete and not r.ok and "max_states" in (r.stopped or "")
    # It stops at the state whose successors could pass the limit: close below it, never over.
    assert seen and 900 <= seen[-1].states <= 1000 and r.states <= 1000
    assert r.properties["can_finish"] == "unknown"


def test_errors_name_the_field() -> None:
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.check(small("vllm", "leak_on_prempt"))
    assert e.value.field == "scheduler.inject_bug" and "leak_on_preempt" in str(e.value)
    no_blocks = small()
    del no_blocks["scheduler"]["num_gpu_blocks"]
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.check(no_blocks)
    assert e.value.field == "scheduler.num_gpu_blocks"
    assert o1sim.bug_names() == ["leak_on_preempt", "double_admit", "no_preempt", "drop_on_requeue", "no_seat_preempt"]


def test_result_json_and_pnml() -> None:
    r = o1sim.check(small("vllm", "leak_on_preempt"))
    data = json.loads(r.to_json())
    assert data["violations"][0]["trace"][0]["action"] == "arrive"
    assert r.pnml.startswith("<?xml") and "<transition id=\"preempt\">" in r.pnml
    assert r.petri["structurally_bounded"]


def test_cli_check(tmp_path: Path) -> None:
    ok = invoke(["check", str(SCENARIO), "--pnml", str(tmp_path / "net.pnml")])
    assert ok.exit_code == 0, ok.output
    assert "323,160" in ok.output and "all properties hold" in ok.output
    assert (tmp_path / "net.pnml").read_text().startswith("<?xml")
    bad = invoke(["check", str(SCENARIO), "--set", "scheduler.inject_bug=\"drop_on_requeue\"",
                  "--replay", str(tmp_path), "--json", str(tmp_path / "r.json")])
    assert bad.exit_code == 1, bad.output
    assert "counterexample: one_state" in bad.output and "reproduced" in bad.output
    replay = json.loads((tmp_path / "one_state.json").read_text())
    with pytest.raises(o1sim.InternalError):
        o1sim.simulate(replay, check_invariants=True)
    err = invoke(["check", str(SCENARIO), "--set", "scheduler.num_gpu_blocks=100"])
    assert err.exit_code == 2 and "scheduler.num_gpu_blocks" in err.output


def test_the_search_never_holds_more_states_than_max_states() -> None:
    """A state's successors are stored together: the search stops before a state whose
    successors could pass ``max_states`` (it stored 2,001 of 2,000 when `make fuzz` found it)."""
    path = Path(__file__).resolve().parents[1] / "crates" / "sim-core" / "scenarios" / "check_default.toml"
    sc = o1sim.Scenario.from_file(path).with_overrides({"scheduler.max_num_batched_tokens": 1})
    for max_states in (300, 2000):
        r = o1sim.check(sc, max_states=max_states)
        assert not r.complete and max_states - 20 <= r.states <= max_states, (max_states, r.states)


def test_async_scheduling_is_refused_not_misreported() -> None:
    """The inbox of async scheduling is timing the checker abstracts away: asked for, it is a
    ConfigError naming the field (it used to report a false ``one_state`` violation)."""
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.check(small("vllm") | {"scheduler": {**small("vllm")["scheduler"], "async_scheduling": True}})
    assert e.value.field == "scheduler.async_scheduling"
