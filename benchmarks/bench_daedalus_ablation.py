"""Which mechanism costs Daedalus against the optimal schedule, on a half of the trace corpus.

Every variant replays Daedalus over the same traces, with the same injected failures, as
``perdix evaluate`` does, and is compared with the optimal schedule of each trace (the lab's
dynamic program with full knowledge): worker-hours × optimal at the median and the worst trace,
SLO misses, and *avoidable* misses (on traces where the optimal schedule has none — it never has).

Two kinds of variant:

* **directions** — the settings Daedalus ships with, then each of its mechanisms turned back to
  the simplest form (long fixed holds, ARIMA with the linear fallback, the point forecast alone) or to
  another value (the rise quantile), so each is measured on its own against the defaults;
* **truths** — one estimate at a time replaced by the simulator's truth (forecast, capacities,
  recovery times), and all of them at once: the gap each closes is what that estimate costs.
  Benchmark-only: the product never sees the truth.

``--recovery-errors`` also compares, at every stop of every run, the recovery time Daedalus
predicted with the one the job then measured (``benchmarks.recovery_errors``).

Develop on ``--half dev``; confirm on ``--half held-out`` once.
``--failure-seeds 7,101,202`` replays every trace with the failures at other moments (the same job and
workload): a policy's misses on one seed are partly luck (the dev half's 4 misses on the default seed were
9 and 11 on two others), so a change is judged on several; each seed has its own optimal schedule
(``--optimal-cache`` keeps them between runs).

``--rescale-cost in-place`` replays the simulated job whose rescales cost what Flink's in-place rescaling
costs (``lab.settings.RESCALE_COSTS``), the optimal schedules too (cached under their own keys).

Run: .venv/bin/python -m benchmarks.bench_daedalus_ablation [--half dev] [--hours 6] [--jobs 2]
     [--rescale-cost restart|in-place] [--variants NAME,...] [--failure-seeds 7,101,202]
     [--optimal-from evaluate-summary.json] [--optimal-cache out/optimal-cache.json] [--recovery-errors] [--misses]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import importlib
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from types import ModuleType
from typing import Any

from agent.analyze import Analyzer
from agent.loop import Agent
from agent.observation import Observation
from benchmarks.recovery_errors import RecordingAnalyzer, report, stop_errors
from lab.corpus import CorpusTrace, select
from lab.oracle import OracleAnalyzer
from lab.inline import InlineExecutor
from lab.replay import Replay
from lab.settings import RESCALE_COSTS, LabSettings, load_lab_settings, rescale_cost_overrides

LONG_HOLDS = {"scale_down_stabilization_s": 600.0, "recent_rescale_window_s": 600.0, "grace_period_s": 180.0}
"""Long fixed holds: ten minutes of stabilization and of the recent-rescale check, three of grace."""
MEDIUM_HOLDS = {"scale_down_stabilization_s": 300.0, "recent_rescale_window_s": 300.0, "grace_period_s": 120.0}
"""Five minutes of stabilization and of the recent-rescale check, two of grace."""
SHORT_HOLDS = {"scale_down_stabilization_s": 120.0, "recent_rescale_window_s": 0.0, "grace_period_s": 60.0}
"""Two minutes of stabilization, no recent-rescale check, one loop of grace: the holds left to the recovery."""

VARIANTS: dict[str, tuple[frozenset[str], dict[str, Any]]] = {
    "daedalus": (frozenset(), {}),
    "fixed holds": (frozenset(), {"holds": "fixed"}),
    "conditioned rises": (frozenset(), {"rise_conditioned": True}),
    "long holds": (frozenset(), LONG_HOLDS),
    "medium holds": (frozenset(), MEDIUM_HOLDS),
    "short holds": (frozenset(), SHORT_HOLDS),
    "ARIMA + linear fallback": (frozenset(), {"forecast_selection": False}),
    "point forecast only": (frozenset(), {"forecast_quantile": None}),
    "rise quantile 0.6": (frozenset(), {"forecast_quantile": 0.6}),
    "rise quantile 0.7": (frozenset(), {"forecast_quantile": 0.7}),
    "rise quantile 0.8": (frozenset(), {"forecast_quantile": 0.8}),
    "rise quantile 0.9": (frozenset(), {"forecast_quantile": 0.9}),
    "rise quantile 0.95": (frozenset(), {"forecast_quantile": 0.95}),
    "cheap rise quantile 0.6": (frozenset(), {"forecast_quantile_cheap": 0.6}),
    "cheap rise quantile 0.8": (frozenset(), {"forecast_quantile_cheap": 0.8}),
    "true forecast": (frozenset({"forecast"}), {}),
    "true capacity": (frozenset({"capacities"}), {}),
    "true recovery": (frozenset({"recovery_times"}), {}),
    "all true": (frozenset({"forecast", "capacities", "recovery_times"}), {}),
    "stabilization 120 s": (frozenset(), {"scale_down_stabilization_s": 120.0}),
    "stabilization 0 s": (frozenset(), {"scale_down_stabilization_s": 0.0}),
    "no partition offsets": (frozenset(), {}),
    "no partition offsets or backlogs": (frozenset(), {}),
    "loop 30 s": (frozenset(), {"loop_interval_s": 30.0}),
    "loop 60 s": (frozenset(), {"loop_interval_s": 60.0}),
    "loop 20 s": (frozenset(), {"loop_interval_s": 20.0}),
    "loop 15 s": (frozenset(), {"loop_interval_s": 15.0}),
}
"""Variant name -> (estimates replaced by the truth, settings overrides)."""

PATCHED: dict[str, dict[str, Any]] = {
    "cost holds with fixed grace": {"SETTLE_LOOPS": 1e9},
    "cost holds with fixed windows": {"MIN_HOLD_LOOPS": 1e9},
    "no rise gap while falling": {"RISE_GAP_WHILE_FALLING": False},
    "conditioned rises and no gap while falling": {"RISE_GAP_WHILE_FALLING": False},
    "fixed holds as before": {
        "RISE_GAP_WHILE_FALLING": True,
        "RISE_GAP_WHERE": "cheap",
        "CLIMB_CARRIED_WHERE": "cheap",
    },
    "no rise checks": {"RISING_MARGIN": 1e9, "CLIMB_MARGIN": 1e9},
    "holds at the cost alone": {"MIN_HOLD_LOOPS": 0.0},
    "holds at the cost alone and no gap check": {"MIN_HOLD_LOOPS": 0.0, "RISING_MARGIN": 1e9},
    "forecast errors": {"agent.analyze.forecasting.UPPER_BOUND": "forecast_errors"},
    "forecast errors on the forecast alone": {
        "agent.analyze.forecasting.UPPER_BOUND": "forecast_errors",
        "agent.analyze.forecasting.CONFORMAL_FROM_LEVEL": False,
    },
    "forecast errors without rise checks": {
        "agent.analyze.forecasting.UPPER_BOUND": "forecast_errors",
        "RISING_MARGIN": 1e9,
        "CLIMB_MARGIN": 1e9,
    },
    "no forecast gap check": {"RISING_MARGIN": 1e9},
    "forecast gap vetoes": {"RISE_GAP": "veto"},
    "forecast gap lifted by its level": {"RISE_GAP_BY": "level"},
    "forecast gap lifted by its ratio": {"RISE_GAP_BY": "ratio"},
    "no failure readiness through the hold": {"READY_THROUGH_HOLD": "off"},
    "every decision ready through its hold": {"READY_THROUGH_HOLD": "every"},
    "scale-ins ready for a failure where cheap too": {
        "READY_THROUGH_HOLD": "scale-in",
        "READY_WHERE": "always",
        "CLIMB_CARRIED": True,
        "CLIMB_OVER": "hold",
        "HOLD_FROM": "scale-in",
    },
    "holds end when the undo lands": {"HOLD_LANDS": "downtime"},
    "before the climb and the scale-ins' hold": {"CLIMB_CARRIED": False, "HOLD_FROM": "planned"},
    "a cheap scale-out carries the climb": {"CLIMB_CARRIED": True, "CLIMB_OVER": "hold", "HOLD_FROM": "planned"},
    "scale-ins hold from the rescale's own recovery": {"CLIMB_CARRIED": False, "HOLD_FROM": "scale-in"},
    "holds from the rescale's own recovery": {"CLIMB_CARRIED": False, "HOLD_FROM": "rescale"},
    "holds from the rescale's own recovery and rises of 60-s means": {
        "CLIMB_CARRIED": False,
        "HOLD_FROM": "rescale",
        "models.forecast.envelope.CONDITIONED_MEAN_S": 60,
    },
    "conditioned rises of 60-s means": {
        "CLIMB_CARRIED": False,
        "HOLD_FROM": "planned",
        "models.forecast.envelope.CONDITIONED_MEAN_S": 60,
    },
    "conditioned rises of 30-s means": {
        "CLIMB_CARRIED": False,
        "HOLD_FROM": "planned",
        "models.forecast.envelope.CONDITIONED_MEAN_S": 30,
    },
    "scale-outs sized on the horizon": {"SCALE_OUT_SIZED_ON": "horizon"},
    "scale-outs sized on the horizon and the gap vetoes": {"SCALE_OUT_SIZED_ON": "horizon", "RISE_GAP": "veto"},
    "forecast errors without the gap check": {
        "agent.analyze.forecasting.UPPER_BOUND": "forecast_errors",
        "RISING_MARGIN": 1e9,
    },
    "fallback to any scale-out": {"FALLBACK_FROM": "any"},
    "gap lifted and climb carried only where cheap": {"RISE_GAP_WHERE": "cheap", "CLIMB_CARRIED_WHERE": "cheap"},
    "gap lifted only where cheap": {"RISE_GAP_WHERE": "cheap"},
    "climb carried only where cheap": {"CLIMB_CARRIED_WHERE": "cheap"},
    "a cheap climb carried over every hold": {"CLIMB_OVER": "hold"},
    "recent-rescale rounds want nothing": {"RECENT_WANTS": "kept"},
    "dear: recent-rescale rounds want nothing": {"RECENT_WANTS_WHERE": "cheap"},
    "cheap: carried while a failure recovers": {"RECOVERING_OVER": "planned"},
    "dear: arrivals with the drift": {"agent.analyze.forecasting.ARRIVALS_DRIFT_WHERE": "dear"},
    "cheap: scale-ins ready as their own stop ends": {
        "READY_WHERE": "always",
        "agent.analyze.candidates.SCALE_IN_READY_AFTER_RESCALE": "cheap",
    },
    "scale-ins carry a climb": {"CLIMB_ON_SCALE_IN": "carry"},
    "scale-ins carry a climb compounded": {"CLIMB_ON_SCALE_IN": "compound"},
    "cheap: the climb to the next round as before": {
        "RECOVERY_UNDER_CLIMB": "off",
        "CLIMB_OVER": "next round",
        "CURRENT_CARRIES_CLIMB": "off",
    },
    "cheap: recovery judged under the climb": {
        "RECOVERY_UNDER_CLIMB": "cheap",
        "CLIMB_OVER": "next round",
        "CURRENT_CARRIES_CLIMB": "off",
    },
    "cheap: recovery under the climb and the climb a loop ahead": {
        "RECOVERY_UNDER_CLIMB": "cheap",
        "CLIMB_OVER": "loop",
        "CURRENT_CARRIES_CLIMB": "off",
    },
    "dear: a scale-in settled over the horizon": {"SETTLED_CARRIES": "bound"},
    "dear: a scale-in waits for the window": {"SETTLED_OVER_HORIZON": "off"},
    "dear: a scale-in settled above the usual at 0.9": {"agent.analyze.forecasting.USUAL_QUANTILE": 0.9},
    "dear: a scale-in settled above the hour's top": {"agent.analyze.forecasting.USUAL_QUANTILE": 1.0},
    "cheap: a scale-in stabilized at the highest wanted": {"STABILIZED_TO": "highest"},
    "a scale-in confirmed in its direction": {"STABILIZED_TO": "wish", "STABILIZED_TO_WHERE": "always"},
    "dear: a scale-in's bad case from where the workload stands": {
        "agent.analyze.forecasting.BAD_CASE_CONDITIONED_WHERE": "always"
    },
    "dear: a scale-in's bad case one bad moment at a time": {"agent.analyze.candidates.BAD_CASE_JOINS": "either"},
    "dear: no bad case for a scale-in": {"agent.analyze.candidates.BAD_CASE_JOINS": "none"},
    "every rescale priced as a cheap one": {"CHEAP_RESCALE_TARGET": 1.0},
    "dear: recent-rescale window priced": {"HOLDS_PRICED_DEAR": frozenset({"recent"})},
    "dear: holds priced": {"HOLDS_PRICED_DEAR": frozenset({"grace", "recent", "stabilization"})},
    "dear: only the grace priced": {"HOLDS_PRICED_DEAR": frozenset({"grace"})},
    "dear: only the stabilization priced": {"HOLDS_PRICED_DEAR": frozenset({"stabilization"})},
    "a climb against the margin alone": {"CLIMB_NOISE_Z": None},
    "the noise from the changes themselves": {"agent.analyze.forecasting.NOISE_FROM": "changes"},
    "dear: rises of 60-s means": {"models.forecast.envelope.RISE_MEAN_S": 60},
    "a climb over the loop before alone": {"SUSTAINED_CLIMB_LOOPS": None},
    "a climb over three loops where a rescale is cheap too": {"SUSTAINED_CLIMB_WHERE": "always"},
    "a climb over three loops for every decision": {
        "SUSTAINED_CLIMB_LOOPS": 3,
        "SUSTAINED_CLIMB_FOR": "every",
        "SUSTAINED_NOISE_GROWS": False,
    },
    "a climb over three loops for scale-outs beyond one loop's noise": {
        "SUSTAINED_CLIMB_LOOPS": 3,
        "SUSTAINED_CLIMB_FOR": "scale-out",
        "SUSTAINED_NOISE_GROWS": False,
    },
    "dear: rises of 30-s means": {"models.forecast.envelope.RISE_MEAN_S": 30},
    "dear: the kept scale-out carries the climb a loop ahead": {"CURRENT_CARRIES_CLIMB": "always"},
    "the recovery guard over the whole target at the spare alone": {
        "RECOVERY_LEFT_FROM": "now",
        "RECOVERY_DRAIN_MEASURED": "off",
    },
    "the recovery guard counts the target from the stop": {"RECOVERY_DRAIN_MEASURED": "off"},
    "the recovery guard reads the backlog's own drain over what is left of the target": {
        "RECOVERY_DRAIN_MEASURED": "always",
        "RECOVERY_LEFT_FROM": "stop",
    },
    "cheap: the recovery guard reads the backlog's own drain over what is left of the target": {
        "RECOVERY_DRAIN_MEASURED": "cheap",
        "RECOVERY_LEFT_FROM": "stop",
    },
    "dear: the conformal bound over the forecast errors": {
        "agent.analyze.forecasting.UPPER_BOUND": "forecast_errors",
        "agent.analyze.forecasting.UPPER_BOUND_WHERE": "dear",
    },
    "the forecast not held to the rises": {"agent.analyze.forecasting.FORECAST_HELD_WHERE": "never"},
    "cheap: the forecast held to the rises": {"agent.analyze.forecasting.FORECAST_HELD_WHERE": "cheap"},
    "scale-outs read a climb beyond three times the noise": {"CLIMB_NOISE_FOR": "scale-out"},
    "scale-outs read a climb beyond twice the noise of a few loops": {
        "CLIMB_NOISE_Z": 2.0,
        "CLIMB_NOISE_FOR": "scale-out",
        "agent.analyze.forecasting.NOISE_WHOLE_SPAN": False,
    },
    "scale-outs read a climb beyond three times the noise of a few loops": {
        "CLIMB_NOISE_Z": 3.0,
        "CLIMB_NOISE_FOR": "scale-out",
        "agent.analyze.forecasting.NOISE_WHOLE_SPAN": False,
    },
    "every decision reads a climb beyond twice the noise of a few loops": {
        "CLIMB_NOISE_Z": 2.0,
        "CLIMB_NOISE_FOR": "every",
        "agent.analyze.forecasting.NOISE_WHOLE_SPAN": False,
    },
    "every decision reads a climb beyond three times the noise of a few loops": {
        "CLIMB_NOISE_Z": 3.0,
        "CLIMB_NOISE_FOR": "every",
        "agent.analyze.forecasting.NOISE_WHOLE_SPAN": False,
    },
}
"""Variant name -> constants set for its replay alone, ``planner.daedalus``'s by their bare names, another module's
by its dotted path: a part of the rule turned back or off (an effectively endless minimum is the ceiling, an
endless margin never binds), or the analyze stage's upper bound, arrivals, noise and failure-ready
workloads (experiments 15, 16, 17, 20, 38, 39, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60 and 61 of
docs/research/experiments.md)."""
VARIANTS.update({name: (frozenset(), {}) for name in PATCHED})
VARIANTS["conditioned rises and no gap while falling"] = (frozenset(), {"rise_conditioned": True})
VARIANTS["fixed holds as before"] = (frozenset(), {"holds": "fixed", "rise_conditioned": False})
"""Daedalus before its holds were priced: fixed holds, the unconditioned envelope, the forecast gap counted on a
falling workload (the capacity line as now)."""

HIDDEN: dict[str, dict[str, Any]] = {
    "no partition offsets": {"partition_offsets": None},
    "no partition offsets or backlogs": {"partition_offsets": None, "worker_backlog": {}},
}
"""Variant name -> observation fields the agent does not get. Flink reports no per-partition offsets the
Prometheus monitor could read, only each worker's backlog; kafka_exporter's are read only where the operator
configures their queries. These variants are Daedalus on a real job without them, where the skew at other
scale-outs is not known from the partitions."""


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
        self.background = InlineExecutor()
        inner = (RecordingAnalyzer if self.recording else Analyzer)(self.settings, executor=self.background)
        if isinstance(inner, RecordingAnalyzer):
            self.recorder = inner
        analyzer = (
            AblationAnalyzer(inner, OracleAnalyzer(self.job, self.settings), self.truths) if self.truths else inner
        )
        return Agent(
            settings=self.settings,
            clock=self.clock,
            monitor=self.monitor,
            scaler=self.scaler,
            knowledge=self.knowledge,
            analyzer=analyzer,
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
    trace: CorpusTrace,
    variant: str,
    hours: float | None,
    failures: float,
    recovery_errors: bool = False,
    failure_seed: int | None = None,
    rescale_cost: str | None = None,
) -> tuple[str, str, int, dict[str, Any], float]:
    """One Daedalus replay of a variant; returns its summary (with ``recovery_errors`` rows if asked) and wall time."""
    from simulator import load_trace

    truths, overrides = VARIANTS[variant]
    settings = _settings({**rescale_cost_overrides(rescale_cost), **overrides, **_seeded(failure_seed)})
    patched = {_constant(name): value for name, value in PATCHED.get(variant, {}).items()}
    saved = {(module, name): getattr(module, name) for module, name in patched}
    try:  # a worker process runs one replay at a time; the constants are put back after it
        for (module, name), value in patched.items():
            setattr(module, name, value)
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
    finally:
        for (module, name), value in saved.items():
            setattr(module, name, value)
    return trace.name, variant, settings.simulator.failure_schedule_seed, summary, time.perf_counter() - start


def _constant(name: str) -> tuple[ModuleType, str]:
    """The module and name of a patched constant: ``planner.daedalus``'s by its bare name, any other module's by
    its dotted path."""
    module, _, constant = name.rpartition(".")
    return importlib.import_module(module or "planner.daedalus"), constant


def _seeded(failure_seed: int | None) -> dict[str, Any]:
    return {} if failure_seed is None else {"simulator.failure_seed": failure_seed}


def run_optimal(
    trace: CorpusTrace,
    hours: float | None,
    failures: float,
    failure_seed: int | None = None,
    rescale_cost: str | None = None,
) -> tuple[str, str, int, dict[str, Any], float]:
    """The optimal schedule of the trace (the lab's dynamic program), same failures and rescale cost as the replays."""
    from lab.optimal import optimal_run
    from simulator import load_trace

    settings = _settings({**rescale_cost_overrides(rescale_cost), **_seeded(failure_seed)})
    start = time.perf_counter()
    summary, _ = optimal_run(load_trace(trace.path), settings, hours=hours, failures_per_hour=failures)
    return trace.name, "optimal", settings.simulator.failure_schedule_seed, summary, time.perf_counter() - start


def _stored_optimal(path: Path, rescale_cost: str | None = None) -> dict[str, dict[str, Any]]:
    """Optimal summaries by trace from a ``perdix evaluate`` summary.json (same hours and failures!); none when the
    summary's rescale cost (its ``settings.rescale_cost.profile``, a restart where it records none) is not
    ``rescale_cost`` (None: a restart)."""
    document = json.loads(path.read_text())
    recorded = ((document.get("settings") or {}).get("rescale_cost") or {}).get("profile") or "restart"
    if recorded != (rescale_cost or "restart"):
        return {}
    return {
        name: entry["runs"]["optimal"]
        for name, entry in document.get("traces", {}).items()
        if "optimal" in entry.get("runs", {})
    }


Key = tuple[str, int]
"""(trace, failure seed): one replay's identity."""


def _cache_key(name: str, seed: int, hours: float | None, failures: float, rescale_cost: str | None = None) -> str:
    cost = "" if rescale_cost in (None, "restart") else f"|rescale={rescale_cost}"
    return f"{name}|seed={seed}|hours={hours or 'all'}|failures={failures:g}{cost}"


def table(
    results: dict[str, dict[Key, dict[str, Any]]],
    optimal: dict[Key, dict[str, Any]],
    variants: list[str],
    floors: dict[str, float] | None = None,
    ready: dict[Key, float] | None = None,
) -> list[str]:
    """One line per variant: × optimal (median over traces of the mean over failure seeds, worst), misses,
    avoidable misses (where the optimal schedule of that trace and seed has none) and the (trace, seed) runs
    with them, rescales; with ``floors`` (the failure-robust floor's worker-hours by trace), × floor too, and
    with ``ready`` (the failure-ready optimal's worker-hours by trace and seed), × that too."""
    floors = floors or {}
    ready = ready or {}
    lines = [
        f"{'variant':<26} {'x opt median':>12} {'x opt worst':>11} {'misses':>6} {'avoidable':>9} "
        f"{'runs':>6} {'rescales':>8}"
        + (f" {'x floor median':>14} {'x floor worst':>13}" if floors else "")
        + (f" {'x ready median':>14} {'x ready worst':>13}" if ready else "")
    ]
    lines.append("-" * len(lines[0]))
    for variant in variants:
        ratios: dict[str, list[float]] = {}
        misses = avoidable = runs = rescales = 0
        for key, best in optimal.items():
            summary = results.get(variant, {}).get(key)
            if summary is None:
                continue
            ratios.setdefault(key[0], []).append(summary["worker_hours"] / best["worker_hours"])
            misses += summary["slo_misses"]
            rescales += summary["rescales"]
            if best["slo_misses"] == 0 and summary["slo_misses"]:
                avoidable += summary["slo_misses"]
                runs += 1
        if not ratios:
            continue
        per_trace = [statistics.fmean(values) for values in ratios.values()]
        line = (
            f"{variant:<26} {statistics.median(per_trace):>12.3f} {max(per_trace):>11.3f} {misses:>6} {avoidable:>9} "
            f"{runs:>6} {rescales:>8}"
        )
        over_floor = [
            statistics.fmean(s["worker_hours"] for (n, _), s in results[variant].items() if n == name) / floors[name]
            for name in ratios
            if name in floors
        ]
        if over_floor:
            line += f" {statistics.median(over_floor):>14.3f} {max(over_floor):>13.3f}"
        over_ready: dict[str, list[float]] = {}
        for key, summary in results[variant].items():
            if key in ready and key[0] in ratios:
                over_ready.setdefault(key[0], []).append(summary["worker_hours"] / ready[key])
        if over_ready:
            per_ready = [statistics.fmean(values) for values in over_ready.values()]
            line += f" {statistics.median(per_ready):>14.3f} {max(per_ready):>13.3f}"
        lines.append(line)
    return lines


def missed_lines(
    results: dict[str, dict[Key, dict[str, Any]]], optimal: dict[Key, dict[str, Any]], variant: str
) -> list[str]:
    """One line per missed episode of a variant, by trace and seed, each marked avoidable where the optimal
    schedule of that trace and seed has no miss: what started it, when, for how long, the stops inside."""
    lines = []
    for (name, seed), summary in sorted(results.get(variant, {}).items()):
        best = optimal.get((name, seed))
        avoidable = best is not None and best["slo_misses"] == 0
        for episode in summary.get("slo_missed_episodes", []):
            end = "still open" if episode["end_s"] is None else f"to {episode['end_s']} s"
            lines.append(
                f"{name:<22} seed {seed:<4} {'avoidable' if avoidable else '         '} {episode['kind']:<8} "
                f"from {episode['start_s']:>5} s {end:<13} {episode['length_s']:>5} s, {episode['stops']} stop(s), "
                f"{episode['falling_behind_s']} s falling behind"
            )
    return lines


def main() -> None:
    """Run the variants on a corpus half and print the ablation table (and one line per run as it ends)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--half", default="dev", choices=("dev", "held-out", "all"))
    parser.add_argument("--hours", type=float, default=6.0, help="hours of each trace replayed (0: all)")
    parser.add_argument("--failures-per-hour", type=float, default=1.0)
    parser.add_argument(
        "--failure-seeds",
        default="",
        help="comma-separated seeds of the injected failure instants (default: the simulator's own); "
        "each replays every trace with failures at other moments, and its own optimal schedule",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--rescale-cost",
        default="restart",
        choices=tuple(RESCALE_COSTS),
        help="what a rescale of the simulated job costs (lab.settings.RESCALE_COSTS)",
    )
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated; known: " + ", ".join(VARIANTS))
    parser.add_argument("--traces", default=None, help="comma-separated trace names (default: the whole half)")
    parser.add_argument(
        "--optimal-from",
        type=Path,
        default=None,
        help="reuse the optimal runs of a `perdix evaluate` summary.json with the same hours, failures and rescale "
        "cost (the simulator's own failure seed)",
    )
    parser.add_argument(
        "--optimal-cache",
        type=Path,
        default=None,
        help="a JSON file of optimal runs by trace, failure seed, hours and failures: read, and "
        "extended with every optimal schedule this run computes",
    )
    parser.add_argument(
        "--recovery-errors",
        action="store_true",
        help="also print, per variant, predicted against measured recovery at every stop (benchmarks.recovery_errors)",
    )
    parser.add_argument(
        "--misses",
        action="store_true",
        help="also print every missed episode, per variant, trace and seed (avoidable ones marked)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also compare with each trace's failure-robust floor and with its failure-ready optimal at the "
        "rescale cost (benchmarks.bench_robust_floor)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write every summary here")
    args = parser.parse_args()
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    own_seed = _settings({}).simulator.seed
    try:
        seeds = [int(s) for s in args.failure_seeds.split(",") if s.strip()] or [own_seed]
    except ValueError:
        parser.error(f"--failure-seeds: not a comma-separated list of integers: {args.failure_seeds!r}")
    if any(seed < 0 for seed in seeds):
        parser.error("--failure-seeds: seeds must be >= 0")
    traces = select(args.half)
    if args.traces:
        wanted = {t.strip() for t in args.traces.split(",")}
        traces = [t for t in traces if t.name in wanted]
        if missing := wanted - {t.name for t in traces}:
            parser.error(f"--traces: {sorted(missing)} not in the {args.half} half")
    hours = args.hours or None
    optimal: dict[Key, dict[str, Any]] = {}
    cache: dict[str, Any] = {}
    if args.optimal_cache is not None and args.optimal_cache.exists():
        cache = json.loads(args.optimal_cache.read_text())
    for seed in seeds:
        for t in traces:
            stored = cache.get(_cache_key(t.name, seed, hours, args.failures_per_hour, args.rescale_cost))
            if stored is not None:
                optimal[(t.name, seed)] = stored
    if args.optimal_from and own_seed in seeds:
        for name, summary in _stored_optimal(args.optimal_from, args.rescale_cost).items():
            optimal.setdefault((name, own_seed), summary)
    results: dict[str, dict[Key, dict[str, Any]]] = {}
    floors: dict[str, float] = {}
    ready: dict[Key, float] = {}
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        if args.floor:
            from benchmarks.bench_robust_floor import floor_series, ready_optimal, worker_hours

            robust = {
                t.name: series
                for t, (_, series) in zip(
                    traces,
                    pool.map(floor_series, traces, [hours or 1e9] * len(traces), [args.rescale_cost] * len(traces)),
                )
            }
            floors = {name: worker_hours(series) for name, series in robust.items()}
            pairs = [(t, seed) for seed in seeds for t in traces]
            ready = {
                (name, seed): summary["worker_hours"]
                for name, seed, summary in pool.map(
                    ready_optimal,
                    [t for t, _ in pairs],
                    [robust[t.name] for t, _ in pairs],
                    [hours] * len(pairs),
                    [args.failures_per_hour] * len(pairs),
                    [seed for _, seed in pairs],
                    [args.rescale_cost] * len(pairs),
                )
            }
        futures = [
            pool.submit(run_optimal, t, hours, args.failures_per_hour, seed, args.rescale_cost)
            for seed in seeds
            for t in traces
            if (t.name, seed) not in optimal
        ]
        futures += [
            pool.submit(run_variant, t, v, hours, args.failures_per_hour, args.recovery_errors, seed, args.rescale_cost)
            for seed in seeds
            for t in traces
            for v in variants
        ]
        for done, future in enumerate(as_completed(futures), 1):
            name, variant, seed, summary, wall = future.result()
            if variant == "optimal":
                optimal[(name, seed)] = summary
                cache[_cache_key(name, seed, hours, args.failures_per_hour, args.rescale_cost)] = summary
            else:
                results.setdefault(variant, {})[(name, seed)] = summary
            print(
                f"[{done}/{len(futures)}] {name:<22} {f'{variant} seed {seed}':<32} "
                f"{summary['worker_hours']:8.1f} worker-h {summary['slo_misses']:3} misses {wall:6.0f} s",
                flush=True,
            )
    if args.optimal_cache is not None:
        args.optimal_cache.parent.mkdir(parents=True, exist_ok=True)
        args.optimal_cache.write_text(json.dumps(cache, indent=1, default=float))
    optimal = {(t.name, seed): optimal[(t.name, seed)] for seed in seeds for t in traces if (t.name, seed) in optimal}
    print(
        f"\n{args.half} half, {len(traces)} traces, {args.hours:g} h each, {args.failures_per_hour:g} failure/h, "
        f"rescale cost {args.rescale_cost}, "
        f"failure seed(s) {', '.join(map(str, seeds))}, {time.perf_counter() - started:.0f} s"
    )
    print("\n".join(table(results, optimal, variants, floors, ready)))
    if args.recovery_errors:
        for variant in variants:
            rows = {
                name if len(seeds) == 1 else f"{name} (seed {seed})": s.get("recovery_errors", [])
                for (name, seed), s in results.get(variant, {}).items()
            }
            print(f"\nrecovery errors ({variant}): (predicted - measured) / measured at each stop")
            print("\n".join(report(rows)))
    if args.misses:
        for variant in variants:
            print(f"\nmissed episodes ({variant}):")
            print("\n".join(missed_lines(results, optimal, variant)) or "none")
    if args.json:
        document = {
            "optimal": {
                _cache_key(n, s, hours, args.failures_per_hour, args.rescale_cost): v for (n, s), v in optimal.items()
            },
            "variants": {
                variant: {
                    _cache_key(n, s, hours, args.failures_per_hour, args.rescale_cost): v for (n, s), v in runs.items()
                }
                for variant, runs in results.items()
            },
        }
        args.json.write_text(json.dumps(document, indent=1, default=float))


if __name__ == "__main__":
    main()
