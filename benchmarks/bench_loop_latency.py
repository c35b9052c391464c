"""Latency of one Daedalus round (monitor, analyze, plan, execute, knowledge) at 12 and 1,000 workers.

The simulated job runs at the given scale-out on a trace scaled so the workers are about 60 % busy;
the replay books forecaster fits as background time (in production they run on a thread), so they
are not in the round's latency. Goals: p95 <= 100 ms at 12 workers, <= 1 s at 1,000.
Run: .venv/bin/python -m benchmarks.bench_loop_latency [--rounds 60] [--warmup 20]
"""

from __future__ import annotations

import argparse

import numpy as np

from agent.logging import configure_logging
from benchmarks.common import TRACES
from lab.replay import Replay
from lab.settings import load_lab_settings
from simulator import Trace, load_trace

GOALS_MS = {12: 100.0, 1000: 1000.0}


def measure(workers: int, rounds: int, warmup: int) -> dict[str, np.ndarray]:
    """Per-step latencies (ms) of ``rounds`` rounds after ``warmup`` rounds at ``workers`` workers."""
    base = load_trace(TRACES / "taylor.csv")
    settings = load_lab_settings(
        None,
        {
            "policy": "daedalus",
            "max_parallelism": workers,
            "simulator.partitions": workers,
            "simulator.initial_parallelism": workers,
            "telemetry.log_level": "error",
        },
    )
    # Scale the trace so the job sits at about 60 % of the capacity of ``workers`` workers.
    scale = 0.6 * workers * settings.simulator.worker_capacity_rps / float(np.max(base.rates))
    trace = Trace(f"taylor-x{scale:.0f}", base.times, base.rates * scale)
    run = Replay(trace, settings, hours=(warmup + rounds + 1) * settings.loop_interval_s / 3600)
    run.run()
    measured = run.rounds[warmup:]
    steps = sorted({name for r in measured for name in r.durations_ms})
    out = {name: np.array([r.durations_ms.get(name, 0.0) for r in measured]) for name in steps}
    out["round"] = np.array([r.latency_ms for r in measured])
    return out


def main() -> None:
    """Print p50/p95/max per step and the goal check for each scale-out."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--workers", default="12,1000")
    args = parser.parse_args()
    configure_logging("console", "error")
    for workers in (int(w) for w in args.workers.split(",")):
        latencies = measure(workers, args.rounds, args.warmup)
        print(f"{workers} workers, {args.rounds} rounds after {args.warmup} warm-up rounds")
        for name, values in latencies.items():
            print(
                f"  {name:<10} p50 {np.percentile(values, 50):8.2f} ms  p95 {np.percentile(values, 95):8.2f} ms  "
                f"max {values.max():8.2f} ms"
            )
        p95 = float(np.percentile(latencies["round"], 95))
        goal = GOALS_MS.get(workers)
        if goal is not None:
            print(f"  goal p95 <= {goal:.0f} ms: {'met' if p95 <= goal else 'MISSED'} ({p95:.1f} ms)")


if __name__ == "__main__":
    main()
