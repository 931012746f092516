"""The exception classes of o1sim, one per kind of failure the core reports.

``SimError`` is the base; catch a subclass to handle one kind precisely::

    try:
        o1sim.simulate(scenario)
    except o1sim.ConfigError as e:
        print(e.field, e)
"""

from __future__ import annotations

from ._core import ConfigError, InfeasibleError, InternalError, ResourceError, SimError, StallError

__all__ = ["SimError", "ConfigError", "InfeasibleError", "StallError", "ResourceError", "InternalError",
           "StepsNotRecordedError"]


class StepsNotRecordedError(ValueError):
    """A result's scheduler steps were asked for (``Result.steps``, ``step_records``,
    ``step_anatomy()`` and the exports built from them), but its run did not record them.

    A result never runs its scenario again by itself: that would cost as much as the first
    run, silently (minutes for a million requests, and a step log that may not fit). The
    message says how to get them: ``simulate(..., record_steps=True)``, or
    ``result.with_steps()``, which runs the scenario again, on purpose. ``field`` is
    ``"record_steps"``, the argument that records them."""

    field = "record_steps"


def config_error(field: str, message: str) -> ConfigError:
    """A ``ConfigError`` raised from Python, shaped like the core's (``"field: message"``)."""
    err = ConfigError(f"{field}: {message}" if field else message)
    err.field = field
    return err


def resource_error(field: str, message: str) -> ResourceError:
    """A ``ResourceError`` raised from Python, shaped like the core's (``"field: message"``)."""
    err = ResourceError(f"{field}: {message}" if field else message)
    err.field = field
    return err
