"""Which mechanism costs Daedalus against the optimal schedule, on a half of the trace corpus.

Every variant replays Daedalus over the same traces, with the same injected failures, as
``perdix evaluate`` does, and is compared with the optimal schedule of each trace (the lab's
dynamic program with full knowledge): worker-hours × optimal at the median and the worst trace,
SLO misses, and *avoidable* misses (on traces where the optimal schedule has none — it never has).

Two kinds of variant:

* **directions** — the settings Daedalus ships with, then each of this round's mechanisms turned
  back to turn 1's (fixed holds, ARIMA with the linear fallback, the point forecast alone) or to
  another value (the rise quantile), so each is measured on its own against the defaults;
* **truths** — one estimate at a time replaced by the simulator's truth (forecast, capacities,
  recovery times), and all of them at once: the gap each closes is what that estimate costs.
  Benchmark-only: the product never sees the truth.

``--recovery-errors`` also compares, at every stop of every run, the recovery time Daedalus
predicted with the one the job then measured (``benchmarks.recovery_errors``).

Develop on ``--half dev``; confirm on ``--half held-out`` once.
Run: .venv/bin/python -m benchmarks.bench_daedalus_ablation [--half dev] [--hours 6] [--jobs 2]
     [--variants NAME,...] [--optimal-from evaluate-summary.json] [--recovery-errors]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from agent.analyze import Analyzer
from agent.loop import Agent
from agent.observation import Observation
from benchmarks.recovery_errors import RecordingAnalyzer, report, stop_errors
from lab.corpus import CorpusTrace, select
from lab.oracle import OracleAnalyzer
from lab.replay import Replay, _InlineExecutor
from lab.settings import LabSettings, load_lab_settings

TURN_1_HOLDS = {"scale_down_stabilization_s": 600.0, "recent_rescale_window_s": 600.0, "grace_period_s": 180.0}
"""Turn 1's fixed holds: ten minutes of stabilization and of the recent-rescale check, three of grace."""
MEDIUM_HOLDS = {"scale_down_stabilization_s": 300.0, "recent_rescale_window_s": 300.0, "grace_period_s": 120.0}
"""Five minutes of stabilization and of the recent-rescale check, two of grace."""
SHORT_HOLDS = {"scale_down_stabilization_s": 120.0, "recent_rescale_window_s": 0.0, "grace_period_s": 60.0}
"""Two minutes of stabilization, no recent-rescale check, one loop of grace: the holds left to the recovery."""

VARIANTS: dict[str, tuple[frozenset[str], dict[str, Any]]] = {
    "daedalus": (frozenset(), {}),
    "turn-1 holds": (frozenset(), TURN_1_HOLDS),
    "medium holds": (frozenset(), MEDIUM_HOLDS),
    "short holds": (frozenset(), SHORT_HOLDS),
    "ARIMA + linear fallback": (frozenset(), {"forecast_selection": False}),
    "point forecast only": (frozenset(), {"forecast_quantile": None}),
    "rise quantile 0.6": (frozenset(), {"forecast_quantile": 0.6}),
    "rise quantile 0.7": (frozenset(), {"forecast_quantile": 0.7}),
    "rise quantile 0.8": (frozenset(), {"forecast_quantile": 0.8}),
    "rise quantile 0.9": (frozenset(), {"forecast_quantile": 0.9}),
    "rise quantile 0.95": (frozenset(), {"forecast_quantile": 0.95}),
    "true forecast": (frozenset({"forecast"}), {}),
    "true capacity": (frozenset({"capacities"}), {}),
    "true recovery": (frozenset({"recovery_times"}), {}),
    "all true": (frozenset({"forecast", "capacities", "recovery_times"}), {}),
    "no partition offsets": (frozenset(), {}),
    "no partition offsets or backlogs": (frozenset(), {}),
}
"""Variant name -> (estimates replaced by the truth, settings overrides)."""

HIDDEN: dict[str, dict[str, Any]] = {
    "no partition offsets": {"partition_offsets": None},
    "no partition offsets or backlogs": {"partition_offsets": None, "worker_backlog": {}},
}
"""Variant name -> observation fields the agent does not get. The Prometheus monitor reads no per-partition
offsets (Flink reports none it could read), only each worker's backlog: these variants are Daedalus as it
runs on a real job, where the skew at other scale-outs is not known from the partitions."""


class HidingMonitor:
    """The simulated monitor without some of the observation's fields."""

    def __init__(self, inner: Any, hidden: dict[str, Any]) -> None:
        self.inner, self.hidden = inner, hidden

    def observe(self, *, since: float, now: float) -> Observation:
        """The inner observation with the hidden fields at their 'not read' value."""
        return dataclasses.replace(self.inner.observe(since=since, now=now), **self.hidden)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class AblationAnalyzer:
    """The real analyzer with some of its answers replaced by the simulator's truth."""

    def __init__(self, inner: Analyzer, oracle: OracleAnalyzer, truths: frozenset[str]) -> None:
        self.inner, self.oracle, self.truths = inner, oracle, truths

    def analyze(self, observation: Observation, *, now: float) -> Any:
        """The real analysis (its models keep learning), with the chosen fields taken from the oracle's."""
        real = self.inner.analyze(observation, now=now)
        truth = self.oracle.analyze(observation, now=now)
        changes: dict[str, Any] = {name: getattr(truth, name) for name in sorted(self.truths)}
        if "forecast" in self.truths:
            changes["forecast_upper"] = truth.forecast
        return dataclasses.replace(real, **changes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class AblationReplay(Replay):
    """A Daedalus replay whose analyzer is partly the truth."""

    truths: frozenset[str] = frozenset()
    recording: bool = False
    recorder: RecordingAnalyzer | None = None
    """The real analyzer when ``recording``: what each round's recovery predictions were made of."""

    hidden: dict[str, Any] = {}
    """Observation fields the agent does not get (:data:`HIDDEN`)."""

    def start_agent(self) -> Agent:
        """The agent with the ablation analyzer (a plain one when nothing is replaced and nothing recorded)."""
        if self.hidden:
            self.monitor = HidingMonitor(self.monitor, self.hidden)
        if not self.truths and not self.recording:
            return super().start_agent()
        self.background = _InlineExecutor()
        inner = (RecordingAnalyzer if self.recording else Analyzer)(self.settings, executor=self.background)  # type: ignore[arg-type]
        if isinstance(inner, RecordingAnalyzer):
            self.recorder = inner
        analyzer = (
            AblationAnalyzer(inner, OracleAnalyzer(self.job, self.settings), self.truths) if self.truths else inner
        )
        return Agent(
            settings=self.settings, clock=self.clock, monitor=self.monitor, scaler=self.scaler,
            knowledge=self.knowledge, analyzer=analyzer,  # type: ignore[arg-type]
        )


def _settings(overrides: dict[str, Any]) -> LabSettings:
    from agent.logging import configure_logging

    configure_logging("console", "error")
    given = {key: value for key, value in overrides.items() if value is not None}
    settings = load_lab_settings(None, {"policy": "daedalus", "telemetry.log_level": "error", **given})
    # Loading skips None as "not given" (a flag left out); a variant's None is a value (e.g. no quantile).
    unset = {key: None for key, value in overrides.items() if value is None}
    return settings.model_copy(update=unset) if unset else settings


def run_variant(
    trace: CorpusTrace, variant: str, hours: float | None, failures: float, recovery_errors: bool = False
) -> tuple[str, str, dict[str, Any], float]:
    """One Daedalus replay of a variant; returns its summary (with ``recovery_errors`` rows if asked) and wall time."""
    from simulator import load_trace

    truths, overrides = VARIANTS[variant]
    settings = _settings(overrides)
    start = time.perf_counter()
    replay = AblationReplay.__new__(AblationReplay)
    replay.truths = truths
    replay.recording = recovery_errors
    replay.hidden = HIDDEN.get(variant, {})
    Replay.__init__(replay, load_trace(trace.path), settings, hours=hours, failures_per_hour=failures)
    replay.run()
    summary = replay.result().summary
    if replay.recorder is not None:
        summary["recovery_errors"] = stop_errors(replay.job, replay.recorder.snapshots)
    return trace.name, variant, summary, time.perf_counter() - start


def run_optimal(trace: CorpusTrace, hours: float | None, failures: float) -> tuple[str, str, dict[str, Any], float]:
    """The optimal schedule of the trace (the lab's dynamic program), same failures as the replays."""
    from lab.optimal import optimal_run
    from simulator import load_trace

    settings = _settings({})
    start = time.perf_counter()
    summary, _ = optimal_run(load_trace(trace.path), settings, hours=hours, failures_per_hour=failures)
    return trace.name, "optimal", summary, time.perf_counter() - start


def _stored_optimal(path: Path) -> dict[str, dict[str, Any]]:
    """Optimal summaries by trace from a ``perdix evaluate`` summary.json (same hours and failures!)."""
    document = json.loads(path.read_text())
    return {
        name: entry["runs"]["optimal"]
        for name, entry in document.get("traces", {}).items()
        if "optimal" in entry.get("runs", {})
    }


def table(results: dict[str, dict[str, dict[str, Any]]], optimal: dict[str, dict[str, Any]], variants: list[str]) -> list[str]:
    """One line per variant: × optimal (median, worst), misses, avoidable misses and traces with them."""
    lines = [
        f"{'variant':<26} {'x opt median':>12} {'x opt worst':>11} {'misses':>6} {'avoidable':>9} "
        f"{'traces':>6} {'rescales':>8}"
    ]
    lines.append("-" * len(lines[0]))
    for variant in variants:
        ratios, misses, avoidable, traces, rescales = [], 0, 0, 0, 0
        for name, best in optimal.items():
            summary = results.get(variant, {}).get(name)
            if summary is None:
                continue
            ratios.append(summary["worker_hours"] / best["worker_hours"])
            misses += summary["slo_misses"]
            rescales += summary["rescales"]
            if best["slo_misses"] == 0 and summary["slo_misses"]:
                avoidable += summary["slo_misses"]
                traces += 1
        if not ratios:
            continue
        lines.append(
            f"{variant:<26} {statistics.median(ratios):>12.3f} {max(ratios):>11.3f} {misses:>6} {avoidable:>9} "
            f"{traces:>6} {rescales:>8}"
        )
    return lines


def main() -> None:
    """Run the variants on a corpus half and print the ablation table (and one line per run as it ends)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--half", default="dev", choices=("dev", "held-out", "all"))
    parser.add_argument("--hours", type=float, default=6.0, help="hours of each trace replayed (0: all)")
    parser.add_argument("--failures-per-hour", type=float, default=1.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated; known: " + ", ".join(VARIANTS))
    parser.add_argument("--traces", default=None, help="comma-separated trace names (default: the whole half)")
    parser.add_argument("--optimal-from", type=Path, default=None,
                        help="reuse the optimal runs of a `perdix evaluate` summary.json with the same hours and failures")
    parser.add_argument("--recovery-errors", action="store_true",
                        help="also print, per variant, predicted against measured recovery at every stop "
                        "(benchmarks.recovery_errors)")
    parser.add_argument("--json", type=Path, default=None, help="also write every summary here")
    args = parser.parse_args()
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    traces = select(args.half)
    if args.traces:
        wanted = {t.strip() for t in args.traces.split(",")}
        traces = [t for t in traces if t.name in wanted]
        if missing := wanted - {t.name for t in traces}:
            parser.error(f"--traces: {sorted(missing)} not in the {args.half} half")
    hours = args.hours or None
    optimal = _stored_optimal(args.optimal_from) if args.optimal_from else {}
    results: dict[str, dict[str, dict[str, Any]]] = {}
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_optimal, t, hours, args.failures_per_hour) for t in traces if t.name not in optimal]
        futures += [pool.submit(run_variant, t, v, hours, args.failures_per_hour, args.recovery_errors) for t in traces for v in variants]
        for done, future in enumerate(as_completed(futures), 1):
            name, variant, summary, wall = future.result()
            if variant == "optimal":
                optimal[name] = summary
            else:
                results.setdefault(variant, {})[name] = summary
            print(f"[{done}/{len(futures)}] {name:<22} {variant:<26} {summary['worker_hours']:8.1f} worker-h "
                  f"{summary['slo_misses']:3} misses {wall:6.0f} s", flush=True)
    optimal = {t.name: optimal[t.name] for t in traces if t.name in optimal}
    print(f"\n{args.half} half, {len(optimal)} traces, {args.hours:g} h each, {args.failures_per_hour:g} failure/h, "
          f"{time.perf_counter() - started:.0f} s")
    print("\n".join(table(results, optimal, variants)))
    if args.recovery_errors:
        for variant in variants:
            rows = {name: s.get("recovery_errors", []) for name, s in results.get(variant, {}).items()}
            print(f"\nrecovery errors ({variant}): (predicted - measured) / measured at each stop")
            print("\n".join(report(rows)))
    if args.json:
        args.json.write_text(json.dumps({"optimal": optimal, "variants": results}, indent=1, default=float))


if __name__ == "__main__":
    main()
