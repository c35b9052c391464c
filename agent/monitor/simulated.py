"""Monitor of the embedded simulated job: reads its recorded per-second series into an Observation."""

from __future__ import annotations

import math

import numpy as np

from agent.observation import Observation
from simulator import SimulatedFlinkJob


class SimulatedMonitor:
    """MetricSource over a SimulatedFlinkJob, on the same simulated clock as the loop."""

    def __init__(self, job: SimulatedFlinkJob) -> None:
        self.job = job

    def observe(self, *, since: float, now: float) -> Observation:
        """The seconds ``[since, now)`` the simulator recorded, as the real monitor would see them."""
        window = self.job.window(int(math.floor(since)), int(math.floor(now)))
        gaps: dict[str, str] = {}
        if window.times.size == 0:
            gaps["all"] = "no samples in the window"
        parallelism = int(window.parallelism[-1]) if window.parallelism.size else None
        uptime = float(window.uptime_s[-1]) if window.uptime_s.size else None
        # Workers that exist at the end of the window are the ones whose series the monitor returns.
        throughput = {w: s for w, s in window.throughput.items() if s.size and np.isfinite(s[-1])}
        cpu = {w: window.cpu[w] for w in throughput}
        return Observation(
            now=now,
            times=window.times,
            workload=window.workload,
            worker_throughput=throughput,
            worker_cpu=cpu,
            consumer_lag=window.lag,
            parallelism=parallelism,
            uptime_s=uptime,
            gaps=gaps,
        )
