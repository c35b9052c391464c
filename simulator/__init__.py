"""The embedded simulated Flink job: the ground truth for the demo, the benchmarks and StreamBed.

The job's engine (``simulator.job``, compiled with numba: the ``lab`` extra) loads on first use of one
of its names, so reading a trace or the settings works in an install without the extra.
"""

from typing import TYPE_CHECKING

from simulator.config import SimulatorSettings
from simulator.trace import Trace, TraceError, load_trace

if TYPE_CHECKING:
    from simulator.job import (
        Accounting,
        JobEnvironment,
        JobState,
        Restart,
        SimulatedFlinkJob,
        StopKind,
        Window,
        failure_schedule,
        round_robin,
        worker_id,
    )

_ENGINE_NAMES = frozenset(
    {
        "Accounting",
        "JobEnvironment",
        "JobState",
        "Restart",
        "SimulatedFlinkJob",
        "StopKind",
        "Window",
        "failure_schedule",
        "round_robin",
        "worker_id",
    }
)


def __getattr__(name: str) -> object:
    """The engine's names, imported from ``simulator.job`` when first asked for."""
    if name in _ENGINE_NAMES:
        from simulator import job

        return getattr(job, name)
    raise AttributeError(f"module 'simulator' has no attribute {name!r}")


__all__ = [
    "Accounting",
    "JobEnvironment",
    "JobState",
    "Restart",
    "SimulatedFlinkJob",
    "SimulatorSettings",
    "StopKind",
    "Trace",
    "TraceError",
    "Window",
    "failure_schedule",
    "load_trace",
    "round_robin",
    "worker_id",
]
