"""The embedded simulated Flink job: the ground truth for the demo, the benchmarks and StreamBed."""

from simulator.config import SimulatorSettings
from simulator.job import Accounting, JobState, Restart, SimulatedFlinkJob, Window, round_robin, worker_id
from simulator.trace import Trace, TraceError, load_trace

__all__ = [
    "Accounting",
    "JobState",
    "Restart",
    "SimulatedFlinkJob",
    "SimulatorSettings",
    "Trace",
    "TraceError",
    "Window",
    "load_trace",
    "round_robin",
    "worker_id",
]
