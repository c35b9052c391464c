"""Many jobs' workload history made from the shipped traces, for the retraining benchmark and tests.

The shipped traces are time-compressed (one original point per 60 s); here each is stretched back so
that its own day lasts 24 h (taylor: 48 half-hours per day; bank_calls: 169 five-minute points per
working day). Every job gets its own trace window, phase shift, scale, level shift part-way through
and noise, so no two jobs are alike and none is trivially predictable.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from models.forecast.seasonal import DAY_S
from simulator import Trace, load_trace
from spark.history import write_history

POINTS_PER_DAY = {"taylor": 48, "bank_calls": 169}
"""Points of the original data set per day (its daily season)."""


@dataclass(frozen=True)
class JobShape:
    """How one synthetic job deviates from its trace."""

    trace: str
    start_day: float
    phase_s: float
    scale: float
    shift_at_day: float
    shift_factor: float
    noise: float
    drift_noise: float


def job_shapes(count: int, *, traces: tuple[str, ...], days: float, seed: int) -> list[JobShape]:
    """``count`` reproducible job shapes, alternating over ``traces``."""
    rng = np.random.default_rng(seed)
    shapes = []
    for index in range(count):
        name = traces[index % len(traces)]
        available_days = 4032 / POINTS_PER_DAY[name] - days
        shapes.append(
            JobShape(
                trace=name,
                start_day=float(rng.uniform(0, max(0.0, available_days))),
                phase_s=float(rng.uniform(-3600, 3600)),
                scale=float(rng.uniform(0.2, 2.0)),
                shift_at_day=float(rng.uniform(0.2 * days, 0.9 * days)),
                shift_factor=float(rng.uniform(0.8, 1.25)),
                noise=float(rng.uniform(0.02, 0.08)),
                drift_noise=float(rng.uniform(0.01, 0.04)),
            )
        )
    return shapes


def workload(trace: Trace, shape: JobShape, *, days: float, step_s: int, rng: np.random.Generator) -> np.ndarray:
    """The job's workload rate every ``step_s`` over ``days`` (records/s, non-negative)."""
    count = int(days * DAY_S // step_s)
    seconds = np.arange(count, dtype=float) * step_s
    per_day = POINTS_PER_DAY[shape.trace]
    # Position in the original data set, then in the compressed trace (60 s per original point).
    points = (seconds + shape.phase_s) / DAY_S * per_day + shape.start_day * per_day
    base = np.asarray(trace.rate_at(np.clip(points, 0, None) * 60.0), dtype=float)
    level = np.where(seconds >= shape.shift_at_day * DAY_S, shape.shift_factor, 1.0)
    # Slow AR(1) drift (persistent, what a residual model can follow) plus white noise (what it cannot).
    drift = np.empty(count)
    value = 0.0
    shocks = rng.standard_normal(count) * shape.drift_noise * np.sqrt(1 - 0.98**2)
    for i in range(count):
        value = 0.98 * value + shocks[i]
        drift[i] = value
    noise = shape.noise * rng.standard_normal(count)
    return np.maximum(base * shape.scale * level * (1.0 + drift + noise), 0.0)


def synthetic_history(
    out: str,
    *,
    jobs: int,
    days: float,
    start: str = "2026-11-01",
    step_s: int = 60,
    traces_dir: Path,
    traces: tuple[str, ...] = ("bank_calls", "taylor"),
    seed: int = 42,
) -> list[str]:
    """Write ``jobs`` synthetic jobs of ``days`` of history under ``out``; returns the job names."""
    loaded = {name: load_trace(traces_dir / f"{name}.csv") for name in traces}
    origin = pd.Timestamp(start, tz="UTC")
    names = []
    for index, shape in enumerate(job_shapes(jobs, traces=traces, days=days, seed=seed)):
        rng = np.random.default_rng([seed, index])
        rate = workload(loaded[shape.trace], shape, days=days, step_s=step_s, rng=rng)
        times = origin + pd.to_timedelta(np.arange(rate.size) * step_s, unit="s")
        parallelism = np.ceil(rate / 10_000.0).clip(1, None).astype(int)
        frame = pd.DataFrame(
            {"time": times, "workload_rate": rate, "throughput": rate, "parallelism": parallelism, "lag": 0.0}
        )
        name = f"job-{index:03d}-{shape.trace.replace('_', '-')}"
        write_history(frame, out, job=name)
        names.append(name)
    return names
