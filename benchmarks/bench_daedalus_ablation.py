"""Which mechanism costs Daedalus against the oracle: forecast, capacity, recovery prediction, holds.

Replays Daedalus on the shipped traces with one estimate at a time replaced by the simulator's truth
(the oracle analyzer's forecast, capacities or recovery times), without the recovery hold, without
scale-down stabilization, and with everything true at once. The gap each substitution closes is
what that mechanism costs. Further variants apply candidate fixes from outside the analyzer (current lag
in the recovery prediction, a WAPE margin, a trend floor, the true future for the recovery prediction
only) so a proposed change can be measured before it is made. Benchmark-only: the product never sees
the truth.
Run: .venv/bin/python -m benchmarks.bench_daedalus_ablation [--hours 6] [--jobs 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from agent.analyze import Analyzer
from agent.loop import Agent
from agent.observation import Observation
from benchmarks.common import SHIPPED_TRACES, TRACES
from lab.oracle import OracleAnalyzer
from lab.replay import Replay, _InlineExecutor
from lab.settings import LabSettings, load_lab_settings
from simulator import load_trace

VARIANTS: dict[str, tuple[frozenset[str], dict[str, Any]]] = {
    "daedalus": (frozenset(), {}),
    "true forecast": (frozenset({"forecast"}), {}),
    "true capacity": (frozenset({"capacities"}), {}),
    "true recovery": (frozenset({"recovery_times"}), {}),
    "no recovery hold": (frozenset({"no_hold"}), {}),
    "no stabilization": (frozenset(), {"scale_down_stabilization_s": 0.0}),
    "lag in recovery": (frozenset({"lag_in_recovery"}), {}),
    "forecast x (1+WAPE)": (frozenset({"forecast_margin"}), {}),
    "both fixes": (frozenset({"lag_in_recovery", "forecast_margin"}), {}),
    "true future in recovery only": (frozenset({"future_in_recovery"}), {}),
    "WAPE margin in recovery only": (frozenset({"margin_in_recovery"}), {}),
    "trend floor in recovery only": (frozenset({"trend_in_recovery"}), {}),
    "level floor in recovery only": (frozenset({"level_in_recovery"}), {}),
    "level floor + lag": (frozenset({"level_in_recovery", "lag_in_recovery"}), {}),
    "last 3 s floor in recovery only": (frozenset({"level3_in_recovery"}), {}),
    "all true + no holds": (
        frozenset({"forecast", "capacities", "recovery_times", "no_hold"}),
        {"scale_down_stabilization_s": 0.0},
    ),
}


PROPOSED_FIXES = frozenset(
    {"lag_in_recovery", "forecast_margin", "future_in_recovery", "margin_in_recovery", "trend_in_recovery",
     "level_in_recovery", "level3_in_recovery"}
)
"""Truths that are not the oracle's answers but candidate fixes applied to the real analysis."""


def _level_floor(future: Any, recent: Any, statistic: Any) -> Any:
    """``future`` floored at ``statistic`` of the finite ``recent`` samples (unchanged without any)."""
    import numpy as np

    finite = recent[np.isfinite(recent)]
    return np.maximum(future, float(statistic(finite))) if finite.size else future


class AblationAnalyzer:
    """The real analyzer with some of its answers replaced by the truth."""

    def __init__(self, inner: Analyzer, oracle: OracleAnalyzer, truths: frozenset[str]) -> None:
        self.inner, self.oracle, self.truths = inner, oracle, truths

    def analyze(self, observation: Observation, *, now: float) -> Any:
        """The real analysis, with the chosen fields taken from the oracle's (or a proposed fix applied)."""
        real = self.inner.analyze(observation, now=now)
        if not self.truths:
            return real
        if self.truths & PROPOSED_FIXES:
            real = self._proposed_fixes(real, observation, now)
        truth = self.oracle.analyze(observation, now=now)
        changes: dict[str, Any] = {}
        for name in ("forecast", "capacities", "recovery_times"):
            if name in self.truths:
                changes[name] = getattr(truth, name)
        if "no_hold" in self.truths:
            changes["recovering"] = False
        return dataclasses.replace(real, **changes)

    def _proposed_fixes(self, real: Any, observation: Observation, now: float) -> Any:
        """The fixes proposed to the lead, applied from outside: lag in the recovery prediction, WAPE margin."""
        import numpy as np

        forecast = real.forecast
        if forecast is None:
            return real
        future = forecast
        if "future_in_recovery" in self.truths:
            # The recovery predictor sees the true future; the planner's peak checks keep the forecast.
            start = int(now)
            future = self.oracle.job.trace.per_second(start, start + len(forecast))
        wape = real.forecast_wape if real.forecast_wape is not None else self.inner.settings.wape_threshold
        if "margin_in_recovery" in self.truths:
            # Proposed fix: a pessimistic forecast for the recovery prediction only.
            future = forecast * (1.0 + wape)
        if "forecast_margin" in self.truths:
            forecast = forecast * (1.0 + wape)
            future = forecast
        if "trend_in_recovery" in self.truths:
            # Proposed fix: never let the recovery prediction assume less than the recent linear trend.
            history = self.inner.recent.last(900)
            history = history[np.isfinite(history)]
            if history.size >= 120:
                slope = float(np.polyfit(np.arange(history.size, dtype=float), history, 1)[0])
                level = float(history[-60:].mean())
                trend = level + slope * np.arange(1, len(forecast) + 1, dtype=float)
                future = np.maximum(future, trend)
        if "level_in_recovery" in self.truths:
            # Proposed fix: never let the recovery prediction assume less than the last 10 s's level.
            future = _level_floor(future, observation.workload[-10:], np.mean)
        if "level3_in_recovery" in self.truths:
            # Proposed fix: a step seconds before the loop shows in the median of the last 3 s.
            future = _level_floor(future, observation.workload[-3:], np.median)
        lag = observation.latest_lag if "lag_in_recovery" in self.truths else 0.0
        settings = self.inner.settings
        recent = self.inner.recent.last(int(settings.checkpoint_interval_s))
        recent = recent[np.isfinite(recent)]
        if not recent.size:
            return dataclasses.replace(real, forecast=forecast)
        recovery_times = {}
        for n, capacity in real.capacities.items():
            if capacity is None:
                continue
            kind = "failure" if n == real.parallelism else "rescale"
            recovery_times[n] = self.inner.recovery.predict(
                capacity=capacity, forecast=future, recent_workload_rate=float(recent.mean()),
                kind=kind, parallelism=n, current_lag=lag or 0.0,
            )
        return dataclasses.replace(real, forecast=forecast, recovery_times=recovery_times)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class AblationReplay(Replay):
    """A Daedalus replay whose analyzer is partly the truth."""

    truths: frozenset[str] = frozenset()

    def start_agent(self) -> Agent:
        """The agent with the ablation analyzer."""
        self.background = _InlineExecutor()
        analyzer = AblationAnalyzer(
            Analyzer(self.settings, executor=self.background),  # type: ignore[arg-type]
            OracleAnalyzer(self.job, self.settings),
            self.truths,
        )
        return Agent(
            settings=self.settings, clock=self.clock, monitor=self.monitor, scaler=self.scaler,
            knowledge=self.knowledge, analyzer=analyzer,  # type: ignore[arg-type]
        )


def run(trace_name: str, variant: str, hours: float) -> tuple[str, str, dict[str, Any], float]:
    """One ablated replay; returns its summary and wall time."""
    from agent.logging import configure_logging

    configure_logging("console", "error")
    truths, overrides = VARIANTS[variant]
    settings: LabSettings = load_lab_settings(None, {"policy": "daedalus", "telemetry.log_level": "error", **overrides})
    trace = load_trace(TRACES / f"{trace_name}.csv")
    start = time.perf_counter()
    replay = AblationReplay.__new__(AblationReplay)
    replay.truths = truths
    Replay.__init__(replay, trace, settings, hours=hours)
    replay.run()
    return trace_name, variant, replay.result().summary, time.perf_counter() - start


def main() -> None:
    """Run every variant on every shipped trace and print worker-hours and SLO misses."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    variants = [v.strip() for v in args.variants.split(",")]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    header = f"{'trace':<11} {'variant':<19} {'worker-h':>9} {'rescales':>8} {'slo miss':>8} {'lag>tgt s':>9} {'wall s':>7}"
    print(header)
    print("-" * len(header), flush=True)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run, t, v, args.hours) for t in SHIPPED_TRACES for v in variants]
        for future in as_completed(futures):
            trace_name, variant, s, wall = future.result()
            print(
                f"{trace_name:<11} {variant:<19} {s['worker_hours']:>9.2f} {s['rescales']:>8} {s['slo_misses']:>8} "
                f"{s['lag_over_target_s']:>9} {wall:>7.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
