"""The embedded simulated job behind the agent's ports: a monitor that reads its recorded series and a scaler.

The lab drives the real agent loop with these two in place of Prometheus and a Kubernetes or Flink
REST executor, on the same simulated clock as the job.
"""

from __future__ import annotations

import math

import numpy as np

from agent.observation import Observation
from agent.ports import RescaleResult
from simulator import SimulatedFlinkJob


class SimulatedMonitor:
    """MetricSource over a SimulatedFlinkJob, on the same simulated clock as the loop."""

    def __init__(self, job: SimulatedFlinkJob) -> None:
        self.job = job
        self._ends: tuple[int, tuple[int, ...]] = (int(job.now_s), tuple(job.end_offsets.tolist()))
        """The second the monitor last read the partitions' log-end offsets (first: its start) and what they were:
        for a window starting then, what a range read of the offsets returns for its start."""

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
        busy = {w: window.busy[w] for w in throughput if w in window.busy}
        # The throughput a worker reports is a moving average that, for its first metric window after a
        # restart, still counts the stop's idle seconds (the real monitor marks such samples unsettled): the
        # input a worker received (read plus backlog growth) is read from the settled seconds only.
        settled = window.uptime_s >= self.job.config.metric_window_s
        backlog = {w: np.where(settled, window.backlog[w], np.nan) for w in throughput if w in window.backlog}
        ends = self.job.end_offsets.tolist()
        offsets = tuple(zip(ends, self.job.committed_offsets.tolist()))
        read_at, read = self._ends
        ends_since = read if read_at == int(math.floor(since)) else None
        self._ends = (int(self.job.now_s), tuple(ends))
        return Observation(
            now=now,
            times=window.times,
            workload=window.workload,
            worker_throughput=throughput,
            worker_cpu=cpu,
            consumer_lag=window.lag,
            parallelism=parallelism,
            uptime_s=uptime,
            uptime=window.uptime_s.astype(float),
            gaps=gaps,
            worker_busy=busy,
            worker_backlog=backlog,
            partition_offsets=offsets,
            partition_ends_since=ends_since,
        )


class SimulatedScaler:
    """Scaler over a SimulatedFlinkJob; keeps a log of every request for the summary and the tests."""

    def __init__(self, job: SimulatedFlinkJob) -> None:
        self.job = job
        self.requests: list[tuple[int, int, bool]] = []
        """(simulated second, target, dry_run) of every rescale request."""

    def current_parallelism(self) -> int:
        """The scale-out the job is set to (the pending one while it restarts)."""
        return self.job.target_parallelism

    def rescale(self, target: int, *, reasons: tuple[str, ...], dry_run: bool) -> RescaleResult:
        """Rescale the simulated job unless dry-run; confirm by reading the target back."""
        self.requests.append((self.job.now_s, target, dry_run))
        if not dry_run:
            self.job.rescale(target)
        return RescaleResult(requested=target, confirmed=self.job.target_parallelism, dry_run=dry_run)
