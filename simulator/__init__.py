"""The embedded simulated Flink job: the ground truth for the demo, the benchmarks and StreamBed."""

from simulator.config import SimulatorSettings
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
from simulator.trace import Trace, TraceError, load_trace

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
