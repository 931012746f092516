# Hand-written stub of the Rust extension `o1sim._core` (crates/sim-py/src/lib.rs).
# Checked against the built module by `python -m mypy.stubtest o1sim._core` (tests/).
from typing import Final, final

import numpy as np
import numpy.typing as npt

__version__: Final[str]

__all__ = [
    "__version__",
    "SimError",
    "ConfigError",
    "InfeasibleError",
    "StallError",
    "InternalError",
    "ResourceError",
    "Simulation",
    "RunResult",
    "Checker",
    "TraceLoader",
    "LoadedTrace",
    "trace_formats",
    "bug_names",
    "status_names",
    "reason_names",
    "validate",
    "presets_json",
    "default_scenario_toml",
    "default_check_toml",
    "predict_step_json",
    "calibration_fidelity_json",
    "routes_json",
    "topology_json",
    "topology_presets",
    "run_summary_json",
    "flat_metrics_json",
    "slo_spec_json",
    "slo_eval_json",
    "capacity_next_json",
    "plan_eval_json",
    "default_prices_json",
    "step_anatomy_json",
    "set_memory_ceiling",
]

class SimError(Exception):
    """Base class of every error the o1sim core reports."""

class ConfigError(SimError):
    """The scenario is malformed or breaks a rule."""

    field: str
    """Dotted path of the offending field ('' for the whole document)."""

class InfeasibleError(SimError):
    """The scenario is well formed but cannot run on the hardware it names."""

class StallError(SimError):
    """The simulation stopped making progress."""

class InternalError(SimError):
    """A bug in o1sim's core (a caught panic or a broken invariant)."""

class ResourceError(SimError):
    """The run would need more memory or time than the scenario's limits allow."""

    field: str
    """Dotted path of the field that drives it ('' for the whole input)."""

@final
class Simulation:
    """A simulation advanced in slices, then finished once."""

    def __new__(
        cls,
        text: str,
        format: str = "json",
        record_steps: bool = False,
        check_invariants: bool = False,
        trace: LoadedTrace | None = None,
    ) -> Simulation: ...
    def run_events(self, max_events: int) -> bool:
        """Process at most `max_events` events; True when the run is complete."""
    def run_until(self, max_events: int, finished: int) -> bool:
        """Like run_events, pausing once `finished` requests are done."""
    def progress(self) -> tuple[int, int, float, int]:
        """(finished_requests, total_requests, now_ms, events)."""
    def finish(self) -> RunResult:
        """Run to the end and return the result; the simulation is consumed."""
    def inject_topology(self, json: str) -> None:
        """Apply a list of topology events (JSON) or swap in a whole topology, now."""
    @property
    def finished(self) -> bool: ...

@final
class RunResult:
    """Everything one run produced."""

    def to_json(self) -> str: ...
    def summary_json(self) -> str: ...
    def steps_json(self) -> str: ...
    def num_steps(self) -> int: ...
    def columns(self) -> dict[str, npt.NDArray[np.generic]]:
        """Per-request columns: request_id, arrival_ms, first_token_ms, finish_ms,
        prompt_tokens, output_tokens, preemptions, replica, status, reason, cached_tokens."""
    def timeseries_columns(self) -> dict[str, npt.NDArray[np.generic]]:
        """Per-replica bucket columns: time_ms, replica, batch_size, tokens, kv_usage, waiting,
        running, busy, prefix_queries, prefix_hits, prefix_hit_rate."""
    def links_json(self) -> str | None: ...
    @property
    def timeseries_interval_ms(self) -> float: ...

@final
class Checker:
    """A model check in progress, advanced in slices, then finished once."""

    def __new__(
        cls,
        text: str,
        format: str = "json",
        max_states: int = 2_000_000,
        max_seconds: float | None = None,
        timeliness_steps: int = 2,
    ) -> Checker: ...
    def run(self, more_states: int) -> bool:
        """Explore about `more_states` more states; True once the search has ended."""
    def progress(self) -> tuple[int, int, int, int, float, int]:
        """(states, transitions, frontier, depth, elapsed_s, violations)."""
    def finish(self) -> str:
        """Run to the end (or a limit); the result as JSON. The checker is consumed."""

@final
class TraceLoader:
    """An incremental trace reader: feed it a file's bytes in chunks, then finish once."""

    def __new__(cls, spec: str) -> TraceLoader: ...
    def feed(self, chunk: bytes) -> bool:
        """Parse the next chunk; False once no more input is wanted."""
    @property
    def format(self) -> str | None: ...
    def finish(self) -> LoadedTrace:
        """Check the whole trace and return it; the loader is consumed."""

@final
class LoadedTrace:
    """A parsed trace, taken by one Simulation or validate call."""

    @property
    def format(self) -> str: ...
    def __len__(self) -> int: ...
    @property
    def span_s(self) -> float | None: ...
    @property
    def used(self) -> bool: ...

def trace_formats() -> list[str]: ...
def set_memory_ceiling(bytes: int) -> None: ...
def bug_names() -> list[str]: ...
def status_names() -> list[str]: ...
def reason_names() -> list[str]: ...
def validate(text: str, format: str = "json", trace: LoadedTrace | None = None) -> str: ...
def presets_json() -> str: ...
def default_scenario_toml() -> str: ...
def default_check_toml() -> str: ...
def predict_step_json(request: str) -> str: ...
def calibration_fidelity_json(gpu: str) -> str | None: ...
def routes_json(topology: str, src: str, dst: str, down: str = "[]") -> str: ...
def topology_json(topology: str) -> str: ...
def topology_presets() -> list[str]: ...
def run_summary_json(text: str, format: str = "json") -> str: ...
def flat_metrics_json(summary: str) -> str: ...
def slo_spec_json(slo: str) -> str: ...
def slo_eval_json(request: str) -> str: ...
def capacity_next_json(request: str) -> str: ...
def plan_eval_json(request: str) -> str: ...
def default_prices_json() -> str: ...
def step_anatomy_json(text: str, format: str, step: str) -> str: ...
