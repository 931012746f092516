"""o1sim: a fast what-if simulator for LLM inference serving.

Typical use::

    import o1sim
    result = o1sim.simulate(o1sim.Scenario.default().with_overrides({"scheduler.policy": "vllm"}))
    print(result.summary["ttft_ms"]["p99"])
    result.requests  # pandas DataFrame, one row per request
"""

from ._core import __version__
from .api import (
    CheckProgress,
    CheckResult,
    OpTime,
    Progress,
    Violation,
    bug_names,
    check,
    Result,
    Scenario,
    Simulation,
    StepPrediction,
    calibration_fidelity,
    default_scenario,
    predict_step,
    presets,
    reason_names,
    simulate,
    status_names,
)
from . import workload
from .topology import Topology, routes, topology_presets
from .errors import ConfigError, InfeasibleError, InternalError, SimError, StallError

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
    "SimError",
    "ConfigError",
    "InfeasibleError",
    "StallError",
    "InternalError",
]
