"""What StreamBed needs from a testbed: deploy a configuration, drive the source rate, read metrics.

The Capacity Estimator only talks to these protocols, so the same search runs against the embedded
operator-DAG simulator (``simulator.dag``) or a real Flink cluster with a rate-limited source.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class OperatorMetrics(Protocol):
    """One operator over a measurement window."""

    @property
    def name(self) -> str: ...
    @property
    def parallelism(self) -> int: ...
    @property
    def input_rate(self) -> float:
        """Records processed per second by all tasks."""
        ...

    @property
    def busyness(self) -> float:
        """Mean busy fraction of the tasks, 0..1."""
        ...

    @property
    def true_rate_per_task(self) -> float:
        """Records one task processes per second of busy time (DS2)."""
        ...


class Measurement(Protocol):
    """The source and the operators over a measurement window."""

    @property
    def seconds(self) -> int: ...
    @property
    def achieved_rate(self) -> float:
        """Records the source injected per second."""
        ...

    @property
    def backpressure(self) -> float:
        """Mean fraction of time the source was throttled by backpressure, 0..1."""
        ...

    @property
    def lag_growth(self) -> float:
        """Records behind schedule gained per second (> 0: the job falls behind)."""
        ...

    @property
    def operators(self) -> Sequence[OperatorMetrics]: ...


class TestbedRun(Protocol):
    """A deployed configuration whose source rate StreamBed controls."""

    def set_rate(self, rate: float | None) -> None:
        """Inject ``rate`` records/s; ``None`` injects as fast as the job accepts (warmup)."""
        ...

    def advance(self, seconds: int) -> None:
        """Let ``seconds`` of (simulated or wall) time pass."""
        ...

    def measure(self, seconds: int) -> Measurement:
        """Metrics over the last ``seconds``."""
        ...

    @property
    def backlog(self) -> float:
        """Records behind schedule or queued inside the job, in source records."""
        ...


class Testbed(Protocol):
    """A small cluster that deploys the query at a per-operator parallelism and memory per slot."""

    @property
    def operator_names(self) -> tuple[str, ...]:
        """Operators after the source, in pipeline order; parallelisms are given in this order."""
        ...

    def deploy(self, parallelism: Sequence[int], memory_mb: float, *, seed: int | None = None) -> TestbedRun:
        """Start the query; every task takes one task slot."""
        ...
