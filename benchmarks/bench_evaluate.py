"""The policy-lab table on both shipped traces (default 6 h): every policy against the oracle.

Prints, per trace and policy, worker-hours, × oracle, savings captured, rescales, SLO misses and
records lost, then the Daedalus goal checks of issue 11, and writes the full `perdix evaluate`
output (summary.json, report.md, plots) to --out.
Run: .venv/bin/python -m benchmarks.bench_evaluate [--hours 6] [--jobs 2] [--out out/bench_evaluate]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from agent.logging import configure_logging
from benchmarks.common import SHIPPED_TRACES, TRACES
from lab.evaluate import parse_policies, plan_pairs, run_pairs
from lab.report import build_summary, goal_checks, write_outputs
from lab.settings import load_lab_settings


def main() -> None:
    """Run the lab and print the table and the goal checks."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--failures-per-hour", type=float, default=0.0)
    parser.add_argument("--policies", default="daedalus,ds2,hpa,keda-lag,static,oracle")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("out/bench_evaluate"))
    args = parser.parse_args()
    configure_logging("console", "error")
    settings = load_lab_settings(None, {"telemetry.log_level": "error", "telemetry.log_format": "console"})
    policies = parse_policies(args.policies)
    paths = [TRACES / f"{name}.csv" for name in SHIPPED_TRACES]
    pairs = plan_pairs(paths, policies)
    start = time.perf_counter()
    results = run_pairs(pairs, settings, hours=args.hours, failures_per_hour=args.failures_per_hour, jobs=args.jobs)
    wall = time.perf_counter() - start
    summary = build_summary(results, list(SHIPPED_TRACES), policies)
    header = (
        f"{'trace':<11} {'policy':<9} {'worker-h':>9} {'x oracle':>8} {'captured':>8} {'rescales':>8} "
        f"{'slo miss':>8} {'lag>tgt s':>9} {'lost':>5}"
    )
    print(f"{len(pairs)} replays of {args.hours:g} h in {wall:.0f} s wall ({args.jobs} processes)")
    print(header)
    print("-" * len(header))
    for trace, rows in summary["traces"].items():
        for policy, s in rows.items():
            if s.get("status") == "n/a":
                print(f"{trace:<11} {policy:<9} n/a ({s['reason']})")
                continue
            ratio = "-" if s["worker_hours_vs_oracle"] is None else f"{s['worker_hours_vs_oracle']:.3f}"
            captured = "-" if s["savings_captured"] is None else f"{s['savings_captured']:.3f}"
            print(
                f"{trace:<11} {policy:<9} {s['worker_hours']:>9.2f} {ratio:>8} {captured:>8} {s['rescales']:>8} "
                f"{s['slo_misses']:>8} {s['lag_over_target_s']:>9} {s['records_lost']:>5}"
            )
        for goal, met, figure in goal_checks(rows):
            print(f"  daedalus: {goal}: {'n/a' if met is None else ('met' if met else 'MISSED')} ({figure})")
    written = write_outputs(
        results, list(SHIPPED_TRACES), policies, args.out,
        hours=args.hours, failures_per_hour=args.failures_per_hour, seed=settings.simulator.seed,
    )
    print(f"report: {written['report']}")


if __name__ == "__main__":
    main()
