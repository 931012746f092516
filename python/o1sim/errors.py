"""The exception classes of o1sim, one per kind of failure the core reports.

``SimError`` is the base; catch a subclass to handle one kind precisely::

    try:
        o1sim.simulate(scenario)
    except o1sim.ConfigError as e:
        print(e.field, e)
"""

from __future__ import annotations

from ._core import ConfigError, InfeasibleError, InternalError, ResourceError, SimError, StallError

__all__ = ["SimError", "ConfigError", "InfeasibleError", "StallError", "ResourceError", "InternalError"]


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
