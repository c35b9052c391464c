"""Pod churn for the knowledge tests and benchmark: a MetricSource that renames the workers of another.

A TaskManager Deployment gives its pods new random names on every restart (``flink-taskmanager-
<replicaset hash>-<5 chars>``); the agent keys what it learns per worker by that name. This wrapper
replays that on any monitor: every ``rounds_per_generation`` rounds all workers get fresh names of
that shape, the same names for the same (generation, index) in every run, so a pruned and an
unpruned agent see identical data. Lives in tests/ only: the product never talks to a fake.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from typing import Any

from agent.observation import Observation
from agent.ports import MetricSource
from models.capacity import natural_key


def pod_name(generation: int, index: int) -> str:
    """A Deployment-style pod name, stable for (generation, index)."""
    digest = hashlib.sha256(f"{generation}/{index}".encode()).hexdigest()
    return f"flink-taskmanager-{digest[:10]}-{digest[10:15]}"


class ChurningMonitor:
    """Wraps a MetricSource; renames its workers to new pod names every ``rounds_per_generation`` rounds."""

    def __init__(self, inner: MetricSource, *, rounds_per_generation: int = 1) -> None:
        self.inner = inner
        self.rounds_per_generation = rounds_per_generation
        self.rounds = 0
        self.names_seen: set[str] = set()

    def observe(self, *, since: float, now: float) -> Observation:
        """The inner observation with every ``worker_*`` mapping keyed by this generation's pod names."""
        observation = self.inner.observe(since=since, now=now)
        generation = self.rounds // self.rounds_per_generation
        self.rounds += 1
        workers = sorted(observation.worker_throughput, key=natural_key)
        names = {worker: pod_name(generation, index) for index, worker in enumerate(workers)}
        self.names_seen.update(names.values())
        renamed: dict[str, Any] = {}
        for field in dataclasses.fields(observation):
            value = getattr(observation, field.name)
            if field.name.startswith("worker_") and isinstance(value, Mapping):
                renamed[field.name] = {names.get(worker, worker): series for worker, series in value.items()}
        return dataclasses.replace(observation, **renamed)
