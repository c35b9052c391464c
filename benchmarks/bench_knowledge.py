"""Knowledge size under pod churn: bytes of the knowledge document per 1,000 workers seen, before and after pruning.

A TaskManager Deployment gives its pods new names on every restart. The replay (bank_calls, the
Daedalus agent) renames every worker to a fresh Deployment-style pod name every
``--rounds-per-generation`` rounds (tests/fakes/churn.py), twice: once with pruning as shipped
(``worker_retention_s``, at most 4 x max_parallelism workers kept) and once forgetting nothing (the
agent before pruning). It prints the document size each time another 250 names have been seen,
the bytes added per 1,000 workers, and the largest difference between the two agents' capacity
estimates (every scale-out, every round).

    .venv/bin/python -m benchmarks.bench_knowledge                  # 3 h, a new name set every round
    .venv/bin/python -m benchmarks.bench_knowledge --hours 6 --rounds-per-generation 2
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import agent.analyze.capacity
from agent.analyze import Analyzer
from agent.logging import configure_logging
from benchmarks.common import TRACES
from lab.replay import Replay
from lab.settings import load_lab_settings
from simulator import load_trace
from tests.fakes.churn import ChurningMonitor

MARKS = 250
"""Print the size each time this many more names have been seen."""


def churned(hours: float, retention_s: float, rounds_per_generation: int) -> tuple[Replay, list[tuple[int, int, int]]]:
    """Replay with churned names; per round (names seen, document bytes, regressions kept)."""
    settings = load_lab_settings(None, {"worker_retention_s": retention_s})
    run = Replay(load_trace(TRACES / "bank_calls.csv"), settings, hours=hours)
    churn = ChurningMonitor(run.monitor, rounds_per_generation=rounds_per_generation)
    run.monitor = run.agent.monitor = churn
    trail: list[tuple[int, int, int]] = []
    interval = int(settings.loop_interval_s)
    for until in range(interval, run.duration_s + 1, interval):
        run.run(until_s=until)
        knowledge = run.rounds[-1].knowledge
        size = knowledge.size_bytes if knowledge is not None and knowledge.size_bytes is not None else 0
        analyzer = run.agent.analyzer
        regressions = len(analyzer.capacity.model.regressions) if isinstance(analyzer, Analyzer) else 0
        trail.append((len(churn.names_seen), size, regressions))
    return run, trail


def main(argv: list[str] | None = None) -> int:
    """Run both replays and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=3.0)
    parser.add_argument("--retention-s", type=float, default=600.0, help="worker_retention_s of the pruned agent.")
    parser.add_argument("--rounds-per-generation", type=int, default=1, help="Rounds between two renamings.")
    args = parser.parse_args(argv)
    configure_logging("console", "error")

    pruned, pruned_trail = churned(args.hours, args.retention_s, args.rounds_per_generation)
    kept = agent.analyze.capacity.WORKERS_KEPT_PER_SCALE_OUT
    agent.analyze.capacity.WORKERS_KEPT_PER_SCALE_OUT = 10**9  # the agent before pruning forgot nothing
    try:
        unpruned, unpruned_trail = churned(args.hours, 1e12, args.rounds_per_generation)
    finally:
        agent.analyze.capacity.WORKERS_KEPT_PER_SCALE_OUT = kept

    print(
        f"bank_calls, {args.hours:g} h, {len(pruned.rounds)} rounds, new pod names every "
        f"{args.rounds_per_generation} round(s); pruned: worker_retention_s={args.retention_s:g}, "
        f"at most {kept} x max_parallelism = {kept * pruned.settings.max_parallelism} workers"
    )
    print(f"{'names seen':>10} | {'before pruning':>16} | {'after pruning':>16} | regressions before / after")
    next_mark = MARKS
    for (names, before, before_kept), (_, after, after_kept) in zip(unpruned_trail, pruned_trail):
        if names >= next_mark:
            print(
                f"{names:>10} | {before / 1024:>12.1f} KiB | {after / 1024:>12.1f} KiB | {before_kept} / {after_kept}"
            )
            next_mark = (names // MARKS + 1) * MARKS
    seen = np.array([n for n, _, _ in unpruned_trail], dtype=float)
    sizes_before = np.array([b for _, b, _ in unpruned_trail], dtype=float)
    sizes_after = np.array([a for _, a, _ in pruned_trail], dtype=float)
    late = seen >= seen[-1] / 2  # past the forecaster's and history's warm-up: growth is the workers
    slope_before = float(np.polyfit(seen[late], sizes_before[late], 1)[0]) * 1000
    slope_after = float(np.polyfit(seen[late], sizes_after[late], 1)[0]) * 1000
    print(
        f"knowledge added per 1,000 workers seen: before pruning {slope_before / 1024:.1f} KiB, "
        f"after pruning {slope_after / 1024:.1f} KiB (largest document {sizes_after.max() / 1024:.1f} KiB)"
    )
    worst = 0.0
    for mine, reference in zip(pruned.rounds, unpruned.rounds):
        if mine.analysis is None or reference.analysis is None:
            continue
        for n, capacity in reference.analysis.capacities.items():
            ours = mine.analysis.capacities.get(n)
            if capacity is not None and ours is not None:
                worst = max(worst, abs(ours - capacity) / capacity)
    same = [m.decision.target_parallelism if m.decision else None for m in pruned.rounds] == [
        r.decision.target_parallelism if r.decision else None for r in unpruned.rounds
    ]
    print(f"capacity estimates, largest relative difference pruned vs unpruned: {worst:.2%}; same decisions: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
