"""The policy lab on the corpus (and the shipped traces): every policy against the optimal schedule.

Runs ``perdix evaluate`` the way the README's tables were made: the corpus half (or all of it) and
both shipped traces, every policy at its default, 1 injected failure per hour unless told otherwise,
and prints the wall time (the goal: the whole corpus under all policies in under 10 minutes on 2
cores), each policy's × optimal (median, worst) and misses per half, and Daedalus's goal checks.
Writes summary.json, report.md and the plots to --out. ``--rescale-cost in-place`` (or ``in-place-aligned``)
replays every policy, and the optimal schedule, on the simulated job whose rescales cost what Flink's in-place
rescaling costs (``lab.settings.RESCALE_COSTS``), so each peer's front is swept in that regime too.

Run: .venv/bin/python -m benchmarks.bench_evaluate [--corpus all|dev|held-out|none] [--shipped]
     [--hours H] [--failures-per-hour 1] [--sweep [--sweep-policies flink-autoscaler,hpa,...]] [--jobs 2]
     [--rescale-cost restart|in-place|in-place-aligned] [--out out/bench_evaluate]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from agent.logging import configure_logging
from benchmarks.common import SHIPPED_TRACES, TRACES
from lab.evaluate import DEFAULT_POLICIES, SWEEPS, corpus_refs, parse_policies, plan_runs, run_all, trace_refs
from lab.report import goal_checks, write_outputs
from lab.settings import RESCALE_COST_DEFAULT, RESCALE_COSTS, load_lab_settings, rescale_cost_of, rescale_cost_overrides


def main() -> None:
    """Run the lab and print the wall time, the per-policy table and the goal checks."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="all", choices=["all", "dev", "held-out", "none"])
    parser.add_argument("--shipped", action="store_true", help="Also the shipped traces (6 h each).")
    parser.add_argument("--hours", type=float, default=None, help="Replay only the first H hours of each trace.")
    parser.add_argument("--failures-per-hour", type=float, default=1.0)
    parser.add_argument("--policies", default=",".join(DEFAULT_POLICIES))
    parser.add_argument("--sweep", action="store_true", help="Also each policy over its main knob.")
    parser.add_argument(
        "--sweep-policies",
        default=None,
        help="With --sweep: sweep only these (comma-separated); e.g. the peers alone, for the front verdicts.",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--rescale-cost",
        default=RESCALE_COST_DEFAULT,
        choices=list(RESCALE_COSTS),
        help="What a rescale of the simulated job costs, for every policy and the optimal schedule "
        f"(default {RESCALE_COST_DEFAULT}).",
    )
    parser.add_argument("--out", type=Path, default=Path("out/bench_evaluate"))
    args = parser.parse_args()
    configure_logging("console", "error")
    settings = load_lab_settings(
        None,
        {
            "telemetry.log_level": "error",
            "telemetry.log_format": "console",
            **rescale_cost_overrides(args.rescale_cost),
        },
    )
    policies = parse_policies(args.policies)
    refs = corpus_refs(args.corpus) if args.corpus != "none" else []
    if args.shipped:
        refs += trace_refs([TRACES / f"{name}.csv" for name in SHIPPED_TRACES])
    swept = parse_policies(args.sweep_policies) if args.sweep_policies is not None else None
    if swept is not None:
        unswept = [p for p in swept if p not in SWEEPS or p not in policies]
        if unswept:
            parser.error(
                f"--sweep-policies: {', '.join(unswept)} not among --policies with a knob ({', '.join(SWEEPS)})"
            )
    runs = plan_runs(refs, policies, sweep=args.sweep, swept=swept)
    hours = args.hours if args.hours is not None else (6.0 if args.shipped else None)
    start = time.perf_counter()
    finished: set[tuple[str, str]] = set()

    def progress(key: tuple[str, str], done_s: int, total_s: int) -> None:
        """One line on stderr per run as it ends: a sweep runs for tens of minutes."""
        if done_s >= total_s and key not in finished:
            finished.add(key)
            print(
                f"[{len(finished)}/{len(runs)}] {' '.join(key)} ({time.perf_counter() - start:.0f} s)",
                file=sys.stderr,
                flush=True,
            )

    results = run_all(
        runs, settings, hours=hours, failures_per_hour=args.failures_per_hour, jobs=args.jobs, on_progress=progress
    )
    wall = time.perf_counter() - start
    print(
        f"{len(runs)} runs on {len(refs)} traces in {wall:.0f} s wall ({args.jobs} processes; "
        f"rescale cost {args.rescale_cost})"
    )
    cpu: dict[str, float] = {}
    for result in results:
        cpu[result.run.policy] = cpu.get(result.run.policy, 0.0) + float(result.summary.get("cpu_s", 0.0))
    print(
        "CPU seconds by policy: "
        + ", ".join(f"{policy} {seconds:.0f}" for policy, seconds in cpu.items())
        + f"; total {sum(cpu.values()):.0f}"
    )
    written = write_outputs(
        results,
        policies,
        args.out,
        hours=hours,
        failures_per_hour=args.failures_per_hour,
        seed=settings.simulator.seed,
        target_recovery_time_s=settings.target_recovery_time_s,
        rescale_cost=rescale_cost_of(settings),
    )
    import json

    summary = json.loads(written["summary"].read_text())
    print(f"{'policy':<17} {'x opt median':>12} {'x opt worst':>11} {'misses':>7} {'avoidable':>9}")
    for policy, row in summary["policies"].items():
        print(
            f"{policy:<17} {row['x_optimal_median'] or 0:>12.3f} {row['x_optimal_worst'] or 0:>11.3f} "
            f"{row['slo_misses']:>7} {row['traces_with_misses_optimal_avoids']:>6}/{row['traces']}"
        )
    for goal, met, figure in goal_checks(summary):
        print(f"daedalus: {goal}: {'n/a' if met is None else ('met' if met else 'MISSED')} ({figure})")
    print(f"report: {written['report']}")


if __name__ == "__main__":
    main()
