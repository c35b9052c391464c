"""Capacity estimate error against the simulator's true capacity after 60 s of samples, 2:1 skew.

Four workers on eight partitions whose weights give worker 0 twice the input of each other worker
(2:1 skew), heterogeneous worker speeds (the simulator's default spread), the bank_calls trace
scaled so the job runs between about 25 % and 90 % of its capacity. For each 60 s window a fresh
CapacityModel sees only that window; we report the error of every window that yields an estimate
and how many windows said "unknown" (too little CPU spread). A second figure feeds the model all
windows so far (how the agent uses it). Goal (Daedalus): error ≤ 3 %.

Run: .venv/bin/python -m benchmarks.bench_capacity
"""

from __future__ import annotations

import numpy as np

from benchmarks.common import TRACES
from models.capacity import CapacityModel
from simulator import SimulatedFlinkJob, Trace, load_trace
from simulator.config import SimulatorSettings

SEEDS = (1, 2, 3, 4, 5)
HOURS = 3


def run_seed(seed: int) -> tuple[list[float], int, list[float], list[float]]:
    """(regression errors per window, windows without one, errors with the CPU fallback, cumulative errors)."""
    config = SimulatorSettings(
        partitions=8, partition_weights=(2, 1, 1, 1, 2, 1, 1, 1), initial_parallelism=4, seed=seed
    )
    base = load_trace(TRACES / "bank_calls.csv")
    probe = SimulatedFlinkJob(base, config)
    truth = probe.true_capacity(4)
    rates = base.rates / base.rates.max() * 0.9 * truth
    job = SimulatedFlinkJob(Trace("bank_calls_scaled", base.times, rates), config)
    duration = HOURS * 3600
    job.run_until(duration)
    window_errors: list[float] = []
    any_errors: list[float] = []
    unknown = 0
    cumulative_errors: list[float] = []
    cumulative = CapacityModel()
    for start in range(120, duration - 60, 60):
        window = job.window(start, start + 60)
        fresh = CapacityModel()
        fresh.observe(window.cpu, window.throughput)
        cumulative.observe(window.cpu, window.throughput)
        estimate = fresh.capacity_by_regression()
        if estimate is None:
            unknown += 1
        else:
            window_errors.append(abs(estimate - truth) / truth)
        fallback = fresh.capacity_now()  # regression, else the CPU-proportional rule
        if fallback is not None:
            any_errors.append(abs(fallback - truth) / truth)
        running = cumulative.capacity_now()
        if running is not None:
            cumulative_errors.append(abs(running - truth) / truth)
    return window_errors, unknown, any_errors, cumulative_errors


def main() -> None:
    """Print the capacity estimate errors."""
    errors: list[float] = []
    unknown = 0
    cumulative: list[float] = []
    with_fallback: list[float] = []
    for seed in SEEDS:
        window_errors, seed_unknown, fallback_errors, cumulative_errors = run_seed(seed)
        errors += window_errors
        unknown += seed_unknown
        with_fallback += fallback_errors
        cumulative += cumulative_errors
    total = len(errors) + unknown
    e = np.array(errors) * 100
    c = np.array(cumulative) * 100
    print("capacity estimate vs simulator truth, 2:1 skew, 4 workers, 60 s windows")
    print(
        f"  windows: {total}, with a regression estimate: {len(errors)} ({100 * len(errors) / total:.0f} %), "
        f"too little CPU spread: {unknown}"
    )
    print(
        f"  fresh regression per 60 s window: median {np.median(e):.2f} %, p90 {np.percentile(e, 90):.2f} %, "
        f"within 3 %: {100 * np.mean(e <= 3):.0f} %"
    )
    f = np.array(with_fallback) * 100
    print(
        f"  capacity_now (regression, else CPU-proportional rule) per window: median {np.median(f):.2f} %, "
        f"p90 {np.percentile(f, 90):.2f} %, within 3 %: {100 * np.mean(f <= 3):.0f} %"
    )
    print(
        f"  model fed all windows so far: median {np.median(c):.2f} %, p90 {np.percentile(c, 90):.2f} %, "
        f"within 3 %: {100 * np.mean(c <= 3):.0f} %"
    )


if __name__ == "__main__":
    main()
