"""QEScalor (paper 004, ICCS 2020): a performance model per resource provision and cost-based scaling.

* **OPRPM** (operator performance and resource provision model): a random-forest regression from an
  instance's provision ``r = (cpu, memory)`` to its performance (records/s one instance sustains),
  learned from samples of instances run at different provisions. Inputs are min-max scaled and the
  forest uses the paper's settings (100 trees, bootstrap, min_samples_leaf 1, min_samples_split 2).
* **QCESA** (quantitative and cost-based elastic scaling): over the epochs ``t_C .. t_F`` of the
  workload forecast, choose per epoch how many instances of each provision to run so that their
  total performance covers the epoch's workload, minimizing the total cost ::

      W = sum_t sum_r p_r |Ins_t,r|  +  p_u * (instances started)  +  p_d * (instances stopped)

  Candidates of an epoch are the combinations whose total performance lies in
  ``[Workload_t, Workload_max]`` (read with discrete instances as: covers ``Workload_t`` and has no
  instance that ``Workload_max`` does not need); dynamic programming over the epochs picks the
  cheapest path from the running deployment.

QEScalor gives instances of one operator different CPU/memory provisions, which the single-vertex
job cannot express; it is a DAG-testbed policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Provision:
    """A resource provision an instance can get, with its running cost per epoch."""

    name: str
    cpu: float
    """CPU cores (or task slots)."""
    memory_mb: float
    price: float
    """``p_r``: cost of running one instance with this provision for one epoch."""


@dataclass(frozen=True)
class Sample:
    """One correlation sample: an instance at a provision and the performance it reached."""

    cpu: float
    memory_mb: float
    performance: float


class PerformanceModel:
    """The OPRPM: random-forest regression of instance performance on (cpu, memory)."""

    def __init__(self, *, n_estimators: int = 100, seed: int = 0) -> None:
        self.n_estimators = n_estimators
        self.seed = seed
        self._forest = None
        self._low = np.zeros(2)
        self._span = np.ones(2)

    def fit(self, samples: Sequence[Sample]) -> PerformanceModel:
        """Learn from correlation samples (at least two)."""
        from sklearn.ensemble import RandomForestRegressor

        if len(samples) < 2:
            raise ValueError(f"the performance model needs at least 2 samples, got {len(samples)}")
        x = np.array([[s.cpu, s.memory_mb] for s in samples], dtype=float)
        y = np.array([s.performance for s in samples], dtype=float)
        # Min-max scaling of the inputs, as in the paper's evaluation.
        self._low = x.min(axis=0)
        self._span = np.where(x.max(axis=0) > self._low, x.max(axis=0) - self._low, 1.0)
        forest = RandomForestRegressor(
            n_estimators=self.n_estimators,
            bootstrap=True,
            min_samples_leaf=1,
            min_samples_split=2,
            max_features=1.0,
            random_state=self.seed,
        )
        forest.fit((x - self._low) / self._span, y)
        self._forest = forest
        return self

    def predict(self, cpu: float, memory_mb: float) -> float:
        """Predicted records/s of one instance at ``(cpu, memory_mb)``."""
        if self._forest is None:
            raise RuntimeError("the performance model is not fitted yet")
        x = (np.array([[cpu, memory_mb]], dtype=float) - self._low) / self._span
        return float(self._forest.predict(x)[0])

    def performance_of(self, provisions: Sequence[Provision]) -> dict[str, float]:
        """Predicted performance per provision."""
        return {p.name: self.predict(p.cpu, p.memory_mb) for p in provisions}


def candidates(
    performance: Sequence[float], workload: float, workload_max: float, max_instances: int
) -> list[tuple[int, ...]]:
    """Instance counts per provision that cover ``workload`` with no instance ``workload_max`` does not need."""
    out: list[tuple[int, ...]] = []
    k = len(performance)

    def walk(index: int, counts: list[int], total_perf: float, total_count: int) -> None:
        if index == k:
            if total_perf < workload or total_count == 0:
                return
            smallest = min(performance[i] for i in range(k) if counts[i] > 0)
            if total_perf - smallest < max(workload_max, workload):
                out.append(tuple(counts))
            return
        limit = max_instances - total_count
        for count in range(limit + 1):
            perf = total_perf + count * performance[index]
            counts.append(count)
            walk(index + 1, counts, perf, total_count + count)
            counts.pop()
            # More of this provision only adds instances max workload does not need.
            if perf >= max(workload_max, workload) + max(performance):
                break

    walk(0, [], 0.0, 0)
    return out


def qcesa(
    workloads: Sequence[float],
    provisions: Sequence[Provision],
    performance: Mapping[str, float],
    current: Mapping[str, int],
    *,
    startup_cost: float,
    shutdown_cost: float,
    max_instances: int,
) -> list[dict[str, int]]:
    """Cheapest plan (instances per provision, one dict per epoch) that covers every epoch's workload.

    >>> small, big = Provision("small", 1, 512, 1.0), Provision("big", 2, 1024, 1.8)
    >>> qcesa([900, 1900], [small, big], {"small": 1000, "big": 2000}, {}, startup_cost=5, shutdown_cost=1,
    ...       max_instances=4)
    [{'small': 0, 'big': 1}, {'small': 0, 'big': 1}]
    """
    if not workloads:
        return []
    perf = [performance[p.name] for p in provisions]
    if min(perf) <= 0:
        raise ValueError("every provision needs a positive performance")
    prices = np.array([p.price for p in provisions])
    workload_max = float(max(workloads))
    start = np.array([current.get(p.name, 0) for p in provisions])
    layers = [candidates(perf, float(w), workload_max, max_instances) for w in workloads]
    for t, layer in enumerate(layers):
        if not layer:
            raise ValueError(
                f"epoch {t}: workload {workloads[t]:,.0f}/s cannot be covered by {max_instances} instances"
            )

    arrays = [np.array(layer) for layer in layers]
    path = _cheapest_path(arrays, prices, start, startup_cost=startup_cost, shutdown_cost=shutdown_cost)
    return [{p.name: int(arrays[t][i][j]) for j, p in enumerate(provisions)} for t, i in enumerate(path)]


def _cheapest_path(
    layers: Sequence[np.ndarray], prices: np.ndarray, start: np.ndarray, *, startup_cost: float, shutdown_cost: float
) -> list[int]:
    """Dynamic programming over the epochs: the index of one candidate per epoch whose prices plus start-up
    and shut-down costs of every switch (from ``start`` on) are the lowest."""

    def switch(old: np.ndarray, new: np.ndarray) -> float:
        return float(startup_cost * np.maximum(new - old, 0).sum() + shutdown_cost * np.maximum(old - new, 0).sum())

    cost = np.array([switch(start, c) + float(prices @ c) for c in layers[0]])
    back: list[np.ndarray] = []
    for t in range(1, len(layers)):
        prev, here = layers[t - 1], layers[t]
        # Transition cost from every candidate of t-1 to every candidate of t.
        up = np.maximum(here[None, :, :] - prev[:, None, :], 0).sum(axis=2)
        down = np.maximum(prev[:, None, :] - here[None, :, :], 0).sum(axis=2)
        total = cost[:, None] + startup_cost * up + shutdown_cost * down
        best = np.argmin(total, axis=0)
        back.append(best)
        cost = total[best, np.arange(here.shape[0])] + here @ prices
    choice = int(np.argmin(cost))
    path = [choice]
    for best in reversed(back):
        choice = int(best[choice])
        path.append(choice)
    path.reverse()
    return path
