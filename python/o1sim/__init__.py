"""o1sim: a fast what-if simulator for LLM inference serving.

Typical use::

    import o1sim
    result = o1sim.simulate(o1sim.Scenario.default().with_overrides({"scheduler.policy": "vllm"}))
    print(result.summary["ttft_ms"]["p99"])
    result.requests  # pandas DataFrame, one row per request
    o1sim.sweep(o1sim.Scenario.default(), {"scheduler.policy": ["vllm", "sarathi"]}, seeds=3)
    o1sim.capacity(o1sim.Scenario.default(), slo={"ttft_p99_ms": 2000, "tpot_p99_ms": 50}).rate

The names below are imported on first use (PEP 562), so ``import o1sim`` — and the
``o1sim`` command, which imports this package — stays fast: numpy and pandas load only when
a result's tables are read.
"""

from __future__ import annotations

import importlib

from ._core import __version__
from .errors import (
    ConfigError,
    InfeasibleError,
    InternalError,
    ResourceError,
    SimError,
    StallError,
    StepsNotRecordedError,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # (typing costs `import o1sim` ~5 ms: not imported at run time)
    from typing import Any

    from . import workload
    from .api import (
        CheckProgress,
        CheckResult,
        OpTime,
        Progress,
        Result,
        Scenario,
        Simulation,
        StepPrediction,
        Violation,
        bug_names,
        calibration_fidelity,
        check,
        default_scenario,
        predict_step,
        presets,
        reason_names,
        simulate,
        status_names,
    )
    from .backends import BackendError
    from .planning import Capacity, Plan, capacity, default_prices, plan
    from .sweeps import aggregate, sweep
    from .topology import Topology, routes, topology_presets

#: Submodules offered as attributes (``o1sim.workload.from_trace(...)``), imported on first use.
_SUBMODULES = ("workload",)

#: Public name → the module that defines it.
_LAZY = {
    **dict.fromkeys(
        ["CheckProgress", "CheckResult", "OpTime", "Progress", "Result", "Scenario", "Simulation", "StepPrediction",
         "Violation", "bug_names", "calibration_fidelity", "check", "default_scenario", "predict_step", "presets",
         "reason_names", "simulate", "status_names"],
        "api",
    ),
    **dict.fromkeys(["Topology", "routes", "topology_presets"], "topology"),
    **dict.fromkeys(["sweep", "aggregate"], "sweeps"),
    **dict.fromkeys(["capacity", "plan", "Capacity", "Plan", "default_prices"], "planning"),
    "BackendError": "backends",
}

__all__ = [
    "__version__",
    "simulate",
    "check",
    "CheckResult",
    "CheckProgress",
    "Violation",
    "bug_names",
    "predict_step",
    "StepPrediction",
    "OpTime",
    "calibration_fidelity",
    "Scenario",
    "Simulation",
    "Topology",
    "workload",
    "routes",
    "topology_presets",
    "Result",
    "Progress",
    "presets",
    "default_scenario",
    "status_names",
    "reason_names",
    "sweep",
    "aggregate",
    "capacity",
    "plan",
    "Capacity",
    "Plan",
    "default_prices",
    "BackendError",
    "SimError",
    "ConfigError",
    "InfeasibleError",
    "ResourceError",
    "StallError",
    "InternalError",
    "StepsNotRecordedError",
]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'o1sim' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
