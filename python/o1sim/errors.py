"""The exception classes of o1sim, one per kind of failure the core reports.

``SimError`` is the base; catch a subclass to handle one kind precisely::

    try:
        o1sim.simulate(scenario)
    except o1sim.ConfigError as e:
        print(e.field, e)
"""

from __future__ import annotations

from ._core import ConfigError, InfeasibleError, InternalError, SimError, StallError

__all__ = ["SimError", "ConfigError", "InfeasibleError", "StallError", "InternalError"]


def config_error(field: str, message: str) -> ConfigError:
    """A ``ConfigError`` raised from Python, shaped like the core's (``"field: message"``)."""
    err = ConfigError(f"{field}: {message}" if field else message)
    err.field = field
    return err
