"""Workloads from traces and generators as a user meets them: ``o1sim.workload.from_trace``,
a scenario's ``workload.trace`` (path relative to the scenario file, or inline text), the
CLI's ``--trace``, shared prefixes, sessions and load stages. Real traces in
../shared/data are used when present (skipped otherwise)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

import o1sim
import o1sim.workload as wl

from clikit import invoke

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
if not DATA.is_dir():  # a worktree one level deeper than the main checkout
    DATA = Path(__file__).resolve().parents[3] / "shared" / "data"

BASE: dict[str, Any] = {"seed": 1, "model": "llama-3-8b", "gpu": "h100"}

AZURE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:17:03.9799600,4808,10\n"
    "2023-11-16 18:17:04.0319600,3180,8\n"
    "2023-11-16 18:17:05.5000000,100,1\n"
)


def _scenario(workload: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**BASE, "workload": workload, **extra}


def test_from_trace_returns_a_section_that_replays_the_file(tmp_path: Path) -> None:
    path = tmp_path / "azure.csv"
    path.write_text(AZURE)
    section = o1sim.workload.from_trace(path)
    assert section == {"trace": {"path": str(path.resolve()), "format": "azure"}}
    df = o1sim.simulate(_scenario(section)).requests
    assert list(df["prompt_tokens"]) == [4808, 3180, 100]
    assert list(df["output_tokens"]) == [10, 8, 1]
    assert list(df["arrival_ms"]) == [0.0, 52.0, 1520.04]
    # Options are kept in the section and applied.
    fast = o1sim.workload.from_trace(path, rate_scale=4, max_requests=2)
    assert fast["trace"]["rate_scale"] == 4 and fast["trace"]["max_requests"] == 2
    df = o1sim.simulate(_scenario(fast)).requests
    assert list(df["arrival_ms"]) == [0.0, 13.0]


def test_inline_text_and_file_give_the_same_bytes(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    text = "".join(
        json.dumps({"timestamp": 400 * i, "input_length": 300 + 97 * i, "output_length": 5 + i,
                    "hash_ids": [0] + list(range(10 * i + 1, 10 * i + 1 + (300 + 97 * i - 1) // 512))}) + "\n"
        for i in range(12)
    )
    path.write_text(text)
    by_path = o1sim.simulate(_scenario({"trace": {"path": str(path), "format": "mooncake"}}))
    inline = o1sim.simulate(_scenario({"trace": {"text": text, "format": "mooncake"}}))
    assert by_path.to_json() == inline.to_json()


def test_the_file_streams_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i * 0.1:.1f},{10 + i},{1 + i % 5}\n" for i in range(300)))
    whole = o1sim.simulate(_scenario(o1sim.workload.from_trace(path))).to_json()
    monkeypatch.setattr(wl, "CHUNK_BYTES", 7)
    reads: list[int] = []
    real_open = wl.open_input

    class Counting:
        def __init__(self, f: Any) -> None:
            self.f = f

        def read(self, n: int) -> bytes:
            reads.append(n)
            data: bytes = self.f.read(n)
            return data

        def fileno(self) -> int:
            return int(self.f.fileno())

        def __enter__(self) -> Counting:
            return self

        def __exit__(self, *a: Any) -> None:
            self.f.close()

    monkeypatch.setattr(wl, "open_input", lambda p, field="": Counting(real_open(p, field)))
    assert o1sim.simulate(_scenario(o1sim.workload.from_trace(path))).to_json() == whole
    assert len(reads) > 100 and set(reads) == {7}
    # Once max_requests rows are read, the rest of the file is not.
    reads.clear()
    assert len(o1sim.simulate(_scenario(o1sim.workload.from_trace(path, max_requests=3))).requests) == 3
    assert len(reads) < 40  # two loads (from_trace, then the run) of a few chunks each


def test_a_trace_path_is_relative_to_the_scenario_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "a.csv").write_text(AZURE)
    (tmp_path / "sc.toml").write_text(
        'model = "llama-3-8b"\ngpu = "h100"\n[workload.trace]\npath = "traces/a.csv"\nformat = "azure"\n'
    )
    monkeypatch.chdir("/")
    assert len(o1sim.simulate(tmp_path / "sc.toml").requests) == 3
    resolved = o1sim.Scenario.from_file(tmp_path / "sc.toml").validate()
    assert resolved["scenario"]["workload"]["trace"]["path"] == str(tmp_path / "traces" / "a.csv")


def test_a_loaded_trace_is_used_once() -> None:
    loader = o1sim._core.TraceLoader(json.dumps({"format": "azure"}))
    assert loader.feed(AZURE.encode())
    assert loader.format == "azure"
    loaded = loader.finish()
    assert (loaded.format, len(loaded), loaded.used) == ("azure", 3, False)
    text = json.dumps(_scenario({"trace": {"path": "a.csv", "format": "azure"}}))
    o1sim._core.Simulation(text, "json", trace=loaded).finish()
    assert loaded.used
    with pytest.raises(o1sim.SimError, match="already used"):
        o1sim._core.Simulation(text, "json", trace=loaded)
    with pytest.raises(o1sim.SimError, match="already finished"):
        loader.feed(b"x")
    # Without the loaded trace the core says who must read the path.
    with pytest.raises(o1sim.ConfigError) as info:
        o1sim._core.Simulation(text, "json")
    assert info.value.field == "workload.trace.path"


def test_cli_replays_a_trace(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(AZURE)
    out = invoke(["run", "--trace", str(path), "--set", "workload.trace.max_requests=2"])
    assert out.exit_code == 0, out.output
    assert "requests" in out.output.lower()
    result = invoke(["run", "--trace", str(path), "--json", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["num_requests"] == 3
    bad = invoke(["run", "--trace", str(path), "--trace-format", "mooncake"])
    assert bad.exit_code == 2 and "workload.trace: line 1" in bad.output
    no_trace = invoke(["run", "--trace-format", "azure"])
    assert no_trace.exit_code != 0 and "needs --trace" in no_trace.output


def test_sessions_from_a_trace_chain_their_turns(tmp_path: Path) -> None:
    path = tmp_path / "chat.csv"
    path.write_text("arrival_ms,prompt_tokens,output_tokens,session_id,turn\n"
                    "0,100,20,alice,0\n10,40,5,bob,0\n500,150,10,alice,1\n900,200,3,alice,2\n")
    df = o1sim.simulate(_scenario(o1sim.workload.from_trace(path))).requests.set_index("request_id")
    assert list(df["prompt_tokens"]) == [100, 40, 150, 200]
    # A later turn is sent no earlier than its recorded time.
    assert df.loc[2, "arrival_ms"] >= 500 and df.loc[3, "arrival_ms"] >= 900


def test_generated_session_prompts_repeat_the_conversation() -> None:
    sc = _scenario({"arrival": {"kind": "poisson", "rate": 1.0},
                    "sessions": {"count": 20, "turns": {"kind": "uniform", "min": 1, "max": 5},
                                 "question": {"kind": "uniform", "min": 20, "max": 200}, "output": {"kind": "uniform", "min": 5, "max": 80}}})
    df = o1sim.simulate(sc).requests.sort_values("request_id")
    assert len(df) >= 20
    # Turn k's prompt = Σ earlier turns' (question + output) + its question, so a prompt
    # grows by at least the previous turn's prompt + output.
    prompts, outputs = list(df["prompt_tokens"]), list(df["output_tokens"])
    grew = [prompts[i] > prompts[i - 1] + outputs[i - 1] for i in range(1, len(prompts))]
    assert any(grew)
    assert sum(grew) == len(df) - 20  # exactly the later turns (the others start a session)


def test_the_real_runs_workload_can_be_written_down() -> None:
    """../shared/data/real-vllm-h100: inference-perf's shared_prefix data, 10 × 10 prompts
    (results/config.yaml: the version run read num_groups/num_prompts_per_group), 100-token
    system prompts, constant load in stages."""
    sc = _scenario({
        "arrival": {"kind": "poisson_count", "stages": [{"rate": 5, "duration_s": 600}, {"rate": 10, "duration_s": 600}]},
        "shared_prefix": {"groups": 10, "users_per_group": 10, "prefix_tokens": 100, "question": 466, "output": 247},
    }, scheduler={"max_model_len": 4096})
    resolved = o1sim.Scenario(sc).validate()
    assert resolved["scenario"]["workload"]["shared_prefix"]["groups"] == 10
    multi = json.loads(json.dumps(sc))
    multi["workload"]["shared_prefix"].update(groups=11, users_per_group=4, multi_turn=True)
    o1sim.Scenario(multi).validate()


def _mooncake_rows(n: int, seed: int) -> list[dict[str, Any]]:
    """Prompts as paths in a tree of 512-token blocks (Mooncake's prefix-chained hash_ids),
    with partial last blocks, 20 s apart so that every request has finished before the next."""
    rng = random.Random(seed)
    children: dict[tuple[int, ...], list[int]] = {}
    next_id = 0
    rows = []
    for i in range(n):
        path: tuple[int, ...] = ()
        blocks = rng.randint(1, 12)
        for _ in range(blocks):
            kids = children.setdefault(path, [])
            if kids and rng.random() < 0.7:
                bid = rng.choice(kids)
            else:
                bid = next_id
                next_id += 1
                kids.append(bid)
            path = path + (bid,)
        length = 512 * (blocks - 1) + rng.choice([512, 512, rng.randint(1, 511)])
        rows.append({"timestamp": 20_000 * i, "input_length": length, "output_length": rng.randint(1, 50),
                     "hash_ids": list(path)})
    return rows


def direct_hit_tokens(rows: list[dict[str, Any]], block: int = 16, hash_block: int = 512) -> tuple[int, int]:
    """(hit tokens, prompt tokens) an unbounded vLLM prefix cache gives, computed from the
    hash_ids alone: a request reuses its longest run of full ``block``-token blocks whose
    content an earlier prompt already held (equal ids = equal content, prefix-chained), at
    most its prompt minus one token rounded down to whole blocks."""
    cover: dict[int, int] = {}  # hash id → tokens of it an earlier prompt cached (full blocks)
    hits = queries = 0
    for r in rows:
        n = r["input_length"]
        got = 0
        for k, hid in enumerate(r["hash_ids"]):
            own = min(n - hash_block * k, hash_block)
            c = min(cover.get(hid, 0), own // block * block)
            got += c
            if c < hash_block:
                break
        hits += min(got, (n - 1) // block * block)
        queries += n
        for k, hid in enumerate(r["hash_ids"]):
            own = min(n - hash_block * k, hash_block)
            cover[hid] = max(cover.get(hid, 0), own // block * block)
    return hits, queries


def test_mooncake_replay_with_an_unbounded_cache_hits_as_its_hash_ids_say(tmp_path: Path) -> None:
    rows = _mooncake_rows(150, seed=3)
    hits, queries = direct_hit_tokens(rows)
    assert 0.2 < hits / queries < 0.8  # the generated file does share prefixes
    path = tmp_path / "mooncake.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    sc = _scenario(o1sim.workload.from_trace(path), scheduler={"policy": "vllm", "block_size": 16, "num_gpu_blocks": 1_000_000})
    summary = o1sim.simulate(sc).summary
    if "prefix_cache_hit_rate" not in summary:
        pytest.skip("needs prefix caching in the core (issue 13's APC, not merged here yet)")
    assert summary["prefix_cache_queries"] == queries
    assert summary["prefix_cache_hits"] == hits
    assert summary["prefix_cache_hit_rate"] == pytest.approx(hits / queries, abs=1e-12)


@pytest.mark.skipif(not (DATA / "mooncake-fast25" / "conversation_trace.jsonl").is_file(), reason="real traces absent")
def test_real_traces_load_with_their_published_totals() -> None:
    moon = o1sim.workload.from_trace(DATA / "mooncake-fast25" / "conversation_trace.jsonl")
    assert moon["trace"]["format"] == "mooncake"
    loaded = wl.load_trace(moon["trace"])
    assert len(loaded) == 12_031  # STATS.md
    azure = wl.load_trace(o1sim.workload.from_trace(DATA / "azure-llm-2023" / "AzureLLMInferenceTrace_conv.csv")["trace"])
    assert (azure.format, len(azure)) == ("azure", 19_366)
    # The totals STATS.md gives, through a run of the code trace's first 2,000 rows.
    code = o1sim.workload.from_trace(DATA / "azure-llm-2023" / "AzureLLMInferenceTrace_code.csv", max_requests=2000)
    df = o1sim.simulate(_scenario(code, deployment={"replicas": 2})).requests
    assert len(df) == 2000 and df["arrival_ms"].iloc[0] == 0.0


@pytest.mark.skipif(not (DATA / "mooncake-fast25" / "conversation_trace.jsonl").is_file(), reason="real traces absent")
@pytest.mark.parametrize("name", ["conversation_trace", "synthetic_trace"])
def test_the_real_mooncake_traces_hit_as_their_hash_ids_say(name: str) -> None:
    """One replica with an effectively unbounded cache and a step budget that admits every
    prompt whole, so that a request reuses exactly what earlier prompts computed (a request
    admitted later in the same step included, as vLLM v1 caches blocks when it allocates
    them): the hit rate equals the one computed from the hash_ids alone (conversation
    37.36%, synthetic 65.12% of prompt tokens)."""
    path = DATA / "mooncake-fast25" / f"{name}.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    hits, queries = direct_hit_tokens(rows)
    sc = {"seed": 1, "model": {"preset": "llama-3-8b", "max_context": 200_000}, "gpu": "b200",
          "scheduler": {"policy": "vllm", "block_size": 16, "num_gpu_blocks": 16_000_000,
                        "max_num_batched_tokens": 524_288, "max_num_seqs": 16_384},
          "workload": o1sim.workload.from_trace(path)}
    summary = o1sim.simulate(sc).summary
    if "prefix_cache_hit_rate" not in summary:
        pytest.skip("needs prefix caching in the core (issue 13's APC, not merged here yet)")
    assert summary["prefix_cache_queries"] == queries
    assert summary["prefix_cache_hits"] == hits
