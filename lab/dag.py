"""The per-operator policies on the operator-DAG testbed: DS2 and Justin, step by step at a target rate.

The single-vertex job has one operator and no memory model, so the per-operator policies run here
instead, as in the convergence experiments of the DS2 and Justin papers: deploy a configuration,
drive the source at the target rate, measure a policy interval, let the policy choose the next
configuration, redeploy, and repeat. Every step records whether the configuration sustains the rate
(the testbed's true capacity) and what it costs (task slots and managed memory).

The testbed reports DS2's instrumentation directly (true processing rate per task, busyness). It
has no RocksDB metrics, so the cache hit rate Justin needs is read from the testbed's own memory
model: a window operator's state grows with its input during a window and the part above the
slot's managed memory is on disk. State access latency is not modelled, so Justin decides on the
hit rate alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from planner.ds2 import OperatorRates, ds2_parallelism
from planner.justin import OperatorMemoryState, justin_plan, memory_mb
from simulator.dag import MEBIBYTE, DagMeasurement, DagTestbed

WARM_UP_S = 30
"""Seconds after a deployment before measuring (DS2's warm-up)."""
POLICY_INTERVAL_S = 60
"""Seconds of metrics per decision (DS2's policy interval)."""


@dataclass(frozen=True)
class DagStep:
    """One deployment of a policy run on the testbed."""

    parallelism: tuple[int, ...]
    memory_mb: float
    true_capacity: float
    sustains: bool
    task_slots: int
    managed_memory_mb: float
    """Managed memory of the stateful operators' tasks (stateless tasks need none)."""
    cache_hit_rate: float | None


def cache_hit_rate(
    testbed: DagTestbed, index: int, parallelism: int, input_rate: float, slot_memory_mb: float
) -> float | None:
    """Share of window-state accesses served from memory, from the testbed's memory model; None if stateless."""
    op = testbed.job.operators[index]
    if not op.windowed or op.state_bytes_per_record <= 0:
        return None
    cache = slot_memory_mb * MEBIBYTE * testbed.settings.managed_memory_fraction
    shares = testbed.shares(index, parallelism)
    seconds = np.arange(op.window_s, dtype=float)
    # State of each task at each second of the window; the part above the cache is on disk.
    state = np.outer(shares * input_rate, seconds) * op.state_bytes_per_record
    with np.errstate(divide="ignore", invalid="ignore"):
        spill = np.where(state > cache, 1.0 - cache / state, 0.0)
    # Accesses are proportional to the records each task processes.
    weights = np.broadcast_to(shares[:, None], spill.shape)
    return float(1.0 - np.sum(spill * weights) / np.sum(weights))


def operator_rates(measurement: DagMeasurement) -> list[OperatorRates]:
    """DS2's inputs from a testbed measurement: aggregated true processing and output rates per operator."""
    rates: list[OperatorRates] = []
    previous: str | None = None
    for op in measurement.operators:
        processing = op.true_rate_per_task * op.parallelism
        output = op.output_rate / op.busyness if op.busyness > 0 else 0.0
        rates.append(OperatorRates(op.name, op.parallelism, processing, output, (previous,) if previous else ()))
        previous = op.name
    return rates


def _measure(
    testbed: DagTestbed, parallelism: tuple[int, ...], slot_memory_mb: float, rate: float, seed: int
) -> DagMeasurement:
    run = testbed.deploy(parallelism, slot_memory_mb, seed=seed)
    run.set_rate(rate)
    run.advance(WARM_UP_S + POLICY_INTERVAL_S)
    return run.measure(POLICY_INTERVAL_S)


def _step(
    testbed: DagTestbed, parallelism: tuple[int, ...], level: int | None, rate: float, hit: float | None
) -> DagStep:
    slot_memory = memory_mb(level) if level is not None else memory_mb(0)
    capacity = testbed.true_capacity(parallelism, slot_memory)
    stateful = sum(p for op, p in zip(testbed.job.operators, parallelism) if op.windowed)
    return DagStep(
        parallelism=parallelism,
        memory_mb=slot_memory,
        true_capacity=capacity,
        sustains=capacity >= rate,
        task_slots=sum(parallelism),
        managed_memory_mb=stateful * slot_memory,
        cache_hit_rate=hit,
    )


def run_dag_policy(
    testbed: DagTestbed,
    policy: str,
    *,
    rate: float,
    initial: Sequence[int],
    initial_level: int = 0,
    steps: int = 6,
    seed: int = 7,
) -> list[DagStep]:
    """Run ``policy`` (``ds2`` or ``justin``) for ``steps`` policy intervals at ``rate``; one DagStep per deployment."""
    if policy not in ("ds2", "justin"):
        raise ValueError(f"policy {policy!r} does not run on the DAG testbed here; ds2 and justin do")
    parallelism = tuple(int(p) for p in initial)
    level: int | None = initial_level
    names = testbed.operator_names
    windowed = [op.windowed for op in testbed.job.operators]
    scaled_up_last = {name: False for name in names}
    previous_hit: dict[str, float | None] = {name: None for name in names}
    history: list[DagStep] = []
    for index in range(steps):
        slot_memory = memory_mb(level if level is not None else 0)
        measurement = _measure(testbed, parallelism, slot_memory, rate, seed + index)
        hits = {
            name: cache_hit_rate(testbed, i, parallelism[i], measurement.operators[i].input_rate, slot_memory)
            for i, name in enumerate(names)
        }
        stateful_hits = [h for h in hits.values() if h is not None]
        history.append(_step(testbed, parallelism, level, rate, min(stateful_hits) if stateful_hits else None))
        proposal = ds2_parallelism(operator_rates(measurement), rate, max_parallelism=testbed.job.max_parallelism)
        if policy == "ds2":
            parallelism = tuple(proposal[name] for name in names)
            continue
        states = _memory_states(
            names, windowed, parallelism, level, scaled_up_last=scaled_up_last, hits=hits, previous_hit=previous_hit
        )
        plan = justin_plan(proposal, states)
        parallelism = tuple(plan.parallelism[name] for name in names)
        # The testbed gives every slot the same memory: the stateful operators' level sets it.
        stateful_levels = [plan.memory_level[name] for i, name in enumerate(names) if windowed[i]]
        level = max((lv for lv in stateful_levels if lv is not None), default=0)
        scaled_up_last, previous_hit = dict(plan.scaled_up), hits
    return history


def _memory_states(
    names: Sequence[str],
    windowed: Sequence[bool],
    parallelism: Sequence[int],
    level: int | None,
    *,
    scaled_up_last: Mapping[str, bool],
    hits: Mapping[str, float | None],
    previous_hit: Mapping[str, float | None],
) -> list[OperatorMemoryState]:
    """Justin's view of every operator: its parallelism, memory level (the stateful ones'), cache hit rates now and
    before, and whether its last change was a scale-up."""
    return [
        OperatorMemoryState(
            name=name,
            stateful=windowed[i],
            parallelism=parallelism[i],
            memory_level=level if windowed[i] else None,
            scaled_up_last=scaled_up_last[name],
            cache_hit_rate=hits[name],
            previous_cache_hit_rate=previous_hit[name],
        )
        for i, name in enumerate(names)
    ]
