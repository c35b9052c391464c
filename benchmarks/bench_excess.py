"""Where Daedalus's worker-hours above the failure-robust floor go, by what its rounds decided.

The failure-robust floor (``benchmarks.bench_robust_floor``) is the fewest workers that carry each minute
and would work a failure right then off within the target, on the true future, rescaling for free every
10 s. Daedalus replays each trace (six hours, one failure an hour, the lab's defaults), and every second of
the run is put under the state the round in force left it in:

* ``keep: search`` — the candidate search kept the current scale-out (no smaller one passed its checks);
* ``keep: recent rescale`` — Algorithm 1's first check kept a scale-out rescaled within the window;
* ``stabilizing`` — the policy wanted fewer workers and the scale-in waits for the stabilization window;
* ``guard: grace`` / ``guard: recovering`` / ... — a guard held the round before the policy decided;
* ``scale out`` / ``scale in`` / ``no candidate`` — the round rescaled (or took the fallback).

The workers above the floor in each state, summed over the seconds, say which part of the rule holds the
job above what a failure-ready schedule with full knowledge would run: the ``keep: search`` rounds are the
scale-ins the checks refuse (the rise envelope, the bad case), ``stabilizing`` the wait before a wanted
one. The ``keep: search`` hours are split again by the check that refused one worker fewer (:data:`REFUSALS`,
read from the round's reasons: the workload rising, the hold's peak, the predicted recovery, ...).

The floor knows the future and rescales for nothing, so no online policy reaches it; the breakdown
says where the distance is, not that it can all be closed.

Run: .venv/bin/python -m benchmarks.bench_excess [--half dev|held-out|all] [--hours 6] [--jobs 2]
     [--failure-seed N] [--rescale-cost restart|in-place] [--traces NAME,...] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
import yaml

from agent.loop import RoundResult
from benchmarks.bench_daedalus_ablation import _seeded, _settings
from benchmarks.bench_robust_floor import floor_series
from lab.corpus import CorpusTrace, select
from lab.replay import Replay
from lab.settings import RESCALE_COSTS, rescale_cost_overrides
from simulator import load_trace

STATES = (
    "keep: search",
    "stabilizing",
    "keep: recent rescale",
    "guard: grace",
    "guard: recovering",
    "guard: other",
    "scale out",
    "scale in",
    "no candidate",
    "before the first round",
)
"""The states a second of the run is put under, in the order they are printed."""


def state_of(result: RoundResult) -> str:
    """What the round left the job in (see the module docstring)."""
    decision = result.decision
    if decision is None:
        return "guard: other"
    code = decision.code.name
    if not decision.acted:
        return {"GRACE": "guard: grace", "RECOVERING": "guard: recovering"}.get(code, "guard: other")
    if decision.desired_parallelism < decision.target_parallelism:
        return "stabilizing"
    if code == "KEEP":
        recent = any(reason.startswith("rescaled recently") for reason in decision.reasons)
        return "keep: recent rescale" if recent else "keep: search"
    return {"SCALE_OUT": "scale out", "SCALE_IN": "scale in", "NO_CANDIDATE": "no candidate"}.get(code, "guard: other")


REFUSALS = (
    ("rising: above the forecast", "runs above the forecast for the next loop"),
    ("rising: climbed", "over the loop before: no scale-in"),
    ("hold peak", "of its"),
    ("unpaid", "not more than its rescale"),
    ("catching up", "still catching up"),
    ("recovery", "> target"),
    ("while recovering", "while recovering"),
    ("average workload", "<= average workload"),
    ("capacity unknown", "capacity unknown"),
)
"""The check that refused the scale-out one below the current one in a ``keep: search`` round: a label and
a fragment of the reason :mod:`planner.daedalus` gives for it, tried in order."""
CHECKS = tuple(label for label, _ in REFUSALS) + ("at the minimum", "other")
"""Every label :func:`refused_by` returns."""


def refused_by(result: RoundResult) -> str:
    """Which check refused a scale-in by one worker in a ``keep: search`` round ("at the minimum" when there is
    no smaller scale-out to try)."""
    decision = result.decision
    if decision is None:
        return "other"
    below = f"{decision.target_parallelism - 1}: "
    reason = next((r for r in decision.reasons if r.startswith(below)), None)
    if reason is None:
        return "at the minimum"
    return next((label for label, fragment in REFUSALS if fragment in reason), "other")


def excess(
    trace: CorpusTrace,
    hours: float,
    failure_seed: int | None,
    rescale_cost: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> tuple[str, float, float, dict[str, float], dict[str, float]]:
    """``(name, Daedalus worker-hours, floor worker-hours, worker-hours above the floor by state, those of the
    ``keep: search`` rounds by the check that refused one worker fewer)``."""
    settings = _settings({**rescale_cost_overrides(rescale_cost), **(overrides or {}), **_seeded(failure_seed)})
    run = Replay(load_trace(trace.path), settings, hours=hours, failures_per_hour=1.0)
    run.run()
    result = run.result()
    used = result.series["parallelism"]
    _, floor = floor_series(trace, hours)
    seconds = min(len(used), len(floor))
    used, floor = used[:seconds], floor[:seconds]
    states = np.full(seconds, STATES.index("before the first round"))
    refusals = np.full(seconds, -1)
    starts = [int(r.now) for r in result.rounds] + [seconds]
    for round_, start, end in zip(result.rounds, starts, starts[1:]):
        span = slice(max(0, start), max(0, min(end, seconds)))
        state = state_of(round_)
        states[span] = STATES.index(state)
        if state == "keep: search":
            refusals[span] = CHECKS.index(refused_by(round_))
    above = used - floor
    by_state = {state: float(above[states == i].sum()) / 3600 for i, state in enumerate(STATES)}
    by_check = {label: float(above[refusals == i].sum()) / 3600 for i, label in enumerate(CHECKS)}
    return trace.name, float(used.sum()) / 3600, float(floor.sum()) / 3600, by_state, by_check


def main() -> None:
    """Print each trace's worker-hours above the floor by state, then the half's totals."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--half", default="dev", choices=("dev", "held-out", "all"))
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--failure-seed", type=int, default=None, help="moves the injected failures (default: the lab's)"
    )
    parser.add_argument(
        "--rescale-cost",
        default="restart",
        choices=tuple(RESCALE_COSTS),
        help="what a rescale of the simulated job costs (lab.settings.RESCALE_COSTS)",
    )
    parser.add_argument("--traces", default=None, help="comma-separated trace names (default: the whole half)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting for Daedalus (YAML value), e.g. --set holds=fixed; repeatable",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    traces = select(args.half)
    if args.traces:
        wanted = {t.strip() for t in args.traces.split(",")}
        traces = [t for t in traces if t.name in wanted]
    overrides = {key: yaml.safe_load(value) for key, _, value in (item.partition("=") for item in args.set)}
    n = len(traces)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        rows = sorted(
            pool.map(
                excess, traces, [args.hours] * n, [args.failure_seed] * n, [args.rescale_cost] * n, [overrides] * n
            )
        )
    shown = [s for s in STATES if any(abs(r[3][s]) >= 0.05 for r in rows)]
    print(
        f"{'trace':<22} {'daedalus':>8} {'floor':>6} {'x floor':>7}  "
        + "  ".join(f"{s:>{max(8, len(s))}}" for s in shown)
    )
    totals: dict[str, float] = defaultdict(float)
    checks: dict[str, float] = defaultdict(float)
    for name, used, floor, by_state, by_check in rows:
        for label, value in by_check.items():
            checks[label] += value
        for state, value in by_state.items():
            totals[state] += value
        print(
            f"{name:<22} {used:8.1f} {floor:6.1f} {used / floor:7.3f}  "
            + "  ".join(f"{by_state[s]:>{max(8, len(s))}.1f}" for s in shown)
        )
    used_total = sum(r[1] for r in rows)
    floor_total = sum(r[2] for r in rows)
    above_total = used_total - floor_total
    print(
        f"\n{args.half}: Daedalus x failure-robust floor median {statistics.median(r[1] / r[2] for r in rows):.3f}; "
        f"{above_total:.1f} worker-hours above the floor ({used_total:.1f} against {floor_total:.1f}), of which:"
    )
    for state in sorted(totals, key=lambda s: -totals[s]):
        if abs(totals[state]) >= 0.05:
            print(f"  {state:<24} {totals[state]:7.1f} worker-hours  {totals[state] / above_total:6.1%}")
    print("the keep: search rounds, by the check that refused one worker fewer:")
    for label in sorted(checks, key=lambda c: -checks[c]):
        if abs(checks[label]) >= 0.05:
            print(f"  {label:<24} {checks[label]:7.1f} worker-hours  {checks[label] / above_total:6.1%}")
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
