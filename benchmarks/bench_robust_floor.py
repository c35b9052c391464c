"""What staying failure-safe costs, with the future workload known: the floor under the cost goal.

The optimal schedule (``lab/optimal.py``) knows when every failure comes. It runs lean everywhere else
and short on purpose within the SLO's allowances (records waiting for up to the target), and pre-scales
only around the injected failures. A policy that does not know when a TaskManager fails has to be
ready for it at every moment: at the scale-out it runs, a failure must be worked off within the
target recovery time.

For every 10 s of a trace this benchmark takes the fewest workers that

* carry the workload: the highest 60-s mean of the next ``step`` seconds is within their capacity, and
* recover in time from a failure right then: the simulator's per-worker capacities and shares, its mean
  failure downtime, half a checkpoint interval replayed, and the *true* workload that follows
  (``models.recovery.recovery_time``, the predictor's own model, here fed only the truth),

and sums them into worker-hours: the **failure-robust floor**. It knows the future exactly and pays
nothing for rescaling (it may change the scale-out every 10 s at no downtime), so a policy that learns
the workload as it comes, rescales with downtime and must be ready for a failure at any moment spends
more than it. It is no strict bound on every policy (one could scale out after a failure and catch up
faster), but it is what the optimal schedule's lead costs an online autoscaler that keeps its recovery
target whenever a failure comes.

The floor is the same in both rescale-cost regimes (``--rescale-cost``, ``lab.settings.RESCALE_COSTS``): it
pays for failures, never for rescales. The optimal schedule it is set against is not: with cheap rescales it
follows the workload more closely, and the floor's lead over it grows.

The floor at the regime's rescale cost is the **failure-ready optimal**: the optimal schedule's dynamic program
(``lab.optimal``, full knowledge, the regime's true downtimes) held at every loop to no fewer workers than the
failure-robust floor asks within it (:func:`ready_optimal`). It pays for every rescale it makes, decides only at
the loop's boundaries, and is ready for a failure at every moment, as an online policy must be; what it does not
share with one is the knowledge of the workload.

Run: .venv/bin/python -m benchmarks.bench_robust_floor [--half dev|held-out|all] [--hours 6]
     [--rescale-cost restart|in-place] [--optimal-from evaluate-summary.json] [--optimal-cache FILE] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from lab.corpus import CorpusTrace, select
from lab.settings import RESCALE_COSTS, load_lab_settings, rescale_cost_overrides
from models.recovery import recovery_time
from simulator import SimulatedFlinkJob, load_trace

STEP_S = 10
"""Seconds between the moments the floor is taken at."""
CARRY_WINDOW_S = 60
"""The workload a scale-out must carry is the mean of this many seconds (the SLO's falling-behind allowance)."""


def floor_series(trace: CorpusTrace, hours: float, rescale_cost: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(carry, robust)``: the two floors' scale-outs for every second of the first ``hours`` of the trace."""
    settings = load_lab_settings(None, {"policy": "daedalus", **rescale_cost_overrides(rescale_cost)})
    sim = settings.simulator
    job = SimulatedFlinkJob(load_trace(trace.path), sim)
    env = job.environment
    duration = int(min(hours * 3600, job.trace.duration_s))
    horizon = int(settings.target_recovery_time_s) * 3
    workload = env.workload(0, duration + horizon)
    top = min(settings.max_parallelism, sim.partitions)
    sizes = range(settings.min_parallelism, top + 1)
    capacity = {n: env.true_capacity(n) for n in sizes}
    profile = {n: (env.shares(n), env.worker_capacities(n)) for n in sizes}
    means = np.convolve(workload, np.ones(CARRY_WINDOW_S) / CARRY_WINDOW_S, mode="valid")
    replay_s = sim.checkpoint_interval_s / 2
    carry_floor = np.zeros(duration, dtype=int)
    robust_floor = np.zeros(duration, dtype=int)
    for t in range(0, duration, STEP_S):
        peak = float(means[t : t + STEP_S].max())
        carry = next((n for n in sizes if capacity[n] >= peak), top)
        robust = top
        recent = float(workload[max(0, t - sim.checkpoint_interval_s) : t + 1].mean())
        for n in range(carry, top + 1):
            downtime = sim.failure_downtime_base_s + sim.failure_downtime_per_worker_s * n
            seconds = recovery_time(
                capacity=capacity[n],
                forecast=workload[t : t + horizon],
                replay_records=replay_s * recent,
                downtime_s=downtime,
                profile=profile[n],
            )
            if seconds <= settings.target_recovery_time_s:
                robust = n
                break
        carry_floor[t : t + STEP_S] = carry
        robust_floor[t : t + STEP_S] = robust
    return carry_floor, robust_floor


def worker_hours(series: np.ndarray) -> float:
    """The worker-hours of a scale-out per second."""
    return float(series.sum()) / 3600


def ready_optimal(
    trace: CorpusTrace,
    robust: np.ndarray,
    hours: float | None,
    failures_per_hour: float,
    failure_seed: int | None,
    rescale_cost: str | None,
) -> tuple[str, int, dict[str, Any]]:
    """``(name, failure seed, summary)``: the failure-ready optimal of the first ``hours`` of the trace (the module
    docstring) held to ``robust``, its failure-robust floor (:func:`floor_series`, the same whatever the failure
    seed), with the replays' failures and rescale cost; the summary holds its worker-hours, misses and rescales,
    scored by replaying the schedule through the simulated job."""
    from benchmarks.bench_daedalus_ablation import _seeded, _settings
    from lab.optimal import OptimalSettings, optimal_schedule, replay_schedule

    settings = _settings({**rescale_cost_overrides(rescale_cost), **_seeded(failure_seed)})
    options = OptimalSettings(
        loop_interval_s=int(settings.loop_interval_s),
        min_parallelism=settings.min_parallelism,
        max_parallelism=min(settings.max_parallelism, settings.simulator.partitions),
        target_recovery_time_s=settings.target_recovery_time_s,
    )
    workload = load_trace(trace.path)
    found = optimal_schedule(
        workload, settings.simulator, settings=options, hours=hours, failures_per_hour=failures_per_hour, minimum=robust
    )
    replayed = replay_schedule(
        workload, settings.simulator, found.schedule, hours=hours, failures_per_hour=failures_per_hour
    )
    scored = replayed.objective(options.target_recovery_time_s)
    summary = {"worker_hours": replayed.worker_hours, "slo_misses": scored.misses, "rescales": len(found.rescales)}
    return trace.name, settings.simulator.failure_schedule_seed, summary


def _optimal(
    path: Path | None, traces: list[CorpusTrace], hours: float, jobs: int, rescale_cost: str, cache_path: Path | None
) -> dict[str, float]:
    """The optimal schedule's worker-hours per trace (the simulator's own failure seed, one failure an hour): from
    an evaluate summary of the same rescale cost, else from the ablation's optimal cache, else computed (and added
    to the cache)."""
    from benchmarks.bench_daedalus_ablation import _cache_key, _settings, _stored_optimal, run_optimal

    stored = _stored_optimal(path, rescale_cost) if path is not None else {}
    if stored:
        return {name: float(summary["worker_hours"]) for name, summary in stored.items()}
    if path is not None:
        print(f"{path}: no optimal runs at the rescale cost {rescale_cost}; computing them", flush=True)
    seed = _settings({}).simulator.failure_schedule_seed
    cache: dict[str, Any] = json.loads(cache_path.read_text()) if cache_path is not None and cache_path.exists() else {}
    found = {t.name: cache[key] for t in traces if (key := _cache_key(t.name, seed, hours, 1.0, rescale_cost)) in cache}
    missing = [t for t in traces if t.name not in found]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        done = pool.map(
            run_optimal,
            missing,
            [hours] * len(missing),
            [1.0] * len(missing),
            [None] * len(missing),
            [rescale_cost] * len(missing),
        )
        for name, _, _, summary, _ in done:
            found[name] = summary
            cache[_cache_key(name, seed, hours, 1.0, rescale_cost)] = summary
    if cache_path is not None and missing:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        cache_path.write_text(json.dumps(cache, indent=1, default=float))
    return {name: float(summary["worker_hours"]) for name, summary in found.items()}


def main() -> None:
    """Print each trace's floors against its optimal schedule, and the medians per half."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--half", default="all", choices=("dev", "held-out", "all"))
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--rescale-cost",
        default="restart",
        choices=tuple(RESCALE_COSTS),
        help="what a rescale of the simulated job costs (the optimal schedule's regime)",
    )
    parser.add_argument(
        "--optimal-cache",
        type=Path,
        default=None,
        help="the optimal-schedule cache of benchmarks.bench_daedalus_ablation: read, and extended",
    )
    parser.add_argument(
        "--optimal-from",
        type=Path,
        default=None,
        help="a `perdix evaluate --policies optimal` summary.json with the same hours and rescale cost (one "
        "failure/h); one of another rescale cost is passed over",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    traces = select(args.half)
    optimal = _optimal(args.optimal_from, traces, args.hours, args.jobs, args.rescale_cost, args.optimal_cache)
    count = len(traces)
    hours, costs = [args.hours] * count, [args.rescale_cost] * count
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        series = list(pool.map(floor_series, traces, hours, costs))
        robusts = [robust for _, robust in series]
        ready = {
            name: summary["worker_hours"]
            for name, _, summary in pool.map(
                ready_optimal, traces, robusts, hours, [1.0] * count, [None] * count, costs
            )
        }
    rows = [(t.name, worker_hours(carry), worker_hours(robust)) for t, (carry, robust) in zip(traces, series)]
    half_of = {t.name: t.half for t in traces}
    print(
        f"{'half':<9} {'trace':<22} {'optimal':>8} {'carry floor':>12} {'x opt':>6} {'robust floor':>13} {'x opt':>6}"
        f" {'ready optimal':>14} {'x floor':>8}"
    )
    summary: dict[str, list[tuple[float, float, float]]] = {}
    for name, carry, robust in sorted(rows, key=lambda r: (half_of[r[0]], r[0])):
        best = optimal.get(name)
        if best is None:
            continue
        summary.setdefault(half_of[name], []).append((carry / best, robust / best, ready[name] / robust))
        print(
            f"{half_of[name]:<9} {name:<22} {best:8.1f} "
            f"{carry:12.1f} {carry / best:6.3f} {robust:13.1f} {robust / best:6.3f}"
            f" {ready[name]:14.1f} {ready[name] / robust:8.3f}"
        )
    print(f"\nrescale cost {args.rescale_cost}")
    for half, ratios in summary.items():
        carry_ratios, robust_ratios, ready_ratios = zip(*ratios)
        print(
            f"{half}: carry floor x optimal median {statistics.median(carry_ratios):.3f}, failure-robust floor median "
            f"{statistics.median(robust_ratios):.3f} (worst {max(robust_ratios):.3f}); the failure-ready optimal x "
            f"the floor median {statistics.median(ready_ratios):.3f} (worst {max(ready_ratios):.3f}) "
            f"over {len(ratios)} traces"
        )
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
