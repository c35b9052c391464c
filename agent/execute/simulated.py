"""Scaler of the embedded simulated job: rescales it in place (reactive mode), or only records in dry-run."""

from __future__ import annotations

from agent.ports import RescaleResult
from simulator import SimulatedFlinkJob


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
