"""Predicted against measured recovery times at every stop of a replay, and which estimate explains the gap.

At each stop Daedalus went through (a rescale it asked for, or an injected failure) the prediction it
held for that stop is compared with the recovery the simulated job then measured: from the stop until
the lag is no more than one second of input again (the SLO's criterion, ``lab.slo``). A stop that another
stop interrupts before the job caught up is left out (its recovery is not its own).

The prediction for a stop is the analyzer's expected case for it — a rescale to the scale-out, or a
failure at the one the job runs — which the recovery watch compares each measured recovery with. What the
planner checks a candidate against is a bound over scenarios, not that prediction: the slower of the
rescale and a later failure there, and for a scale-in the bad case too (a whole checkpoint interval
replayed, arrivals along the rise envelope). Its errors are printed beside (``planned``).

To say *why* a prediction is off, the same prediction is recomputed (``models.recovery``'s
``recovery_time``) with one of its inputs replaced by the simulator's truth at a time — the capacity
of the new scale-out and its spread over the workers, the workload that really arrived, the backlog
at the stop (lag plus the records since the last checkpoint), the downtime — and with all of them:
the input whose truth closes most of the gap is the one to fix, and with all of them true what is
left is the model's own error. Benchmark-only: the product never sees the truth.

Run: .venv/bin/python -m benchmarks.bench_daedalus_ablation --half dev --variants daedalus --recovery-errors
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

from agent.analyze import Analysis, Analyzer
from agent.observation import Observation
from models.recovery import recovery_time
from simulator import SimulatedFlinkJob

TRUTHS = ("capacity", "workload", "backlog", "downtime", "all")
"""The inputs of a prediction that can be replaced by the truth, one at a time, then all together."""


@dataclass(frozen=True, eq=False)
class Snapshot:
    """What the analyzer based its recovery predictions on in one round."""

    now: float
    parallelism: int | None
    analysis: Analysis
    recent_rate: float | None
    downtimes: dict[int, float]
    replay_records: dict[int, tuple[float, float]]
    """Records the predictor assumed it would replay (besides what arrives while down), per scale-out."""
    arrivals: dict[int, np.ndarray]
    """The workload per second the predictor assumed would arrive, per scale-out."""
    profiles: dict[int, Any]
    """The workers' shares and capacities the predictor assumed, per scale-out (None: one worker)."""
    stop_predictions: dict[int, float]
    """The expected recovery of the stop that would start at each scale-out next (what the watch compares)."""


class RecordingAnalyzer(Analyzer):
    """The real analyzer, keeping what each round's recovery predictions were made of."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.snapshots: list[Snapshot] = []

    def analyze(self, observation: Observation, *, now: float) -> Analysis:
        """The real analysis, remembered with the predictor's downtimes and replay per candidate."""
        analysis = super().analyze(observation, now=now)
        current = observation.parallelism
        interval = max(1, math.ceil(self.settings.checkpoint_interval_s))
        recent = self.forecasting.recent.last(interval)
        finite = recent[np.isfinite(recent)]
        rate = float(finite.mean()) if finite.size else None
        downtimes, replays, arrivals, profiles = {}, {}, {}, {}
        for n in analysis.recovery_times:
            kind = "failure" if n == current else "rescale"
            # What the last prediction for this candidate was made of.
            context = self.recovery.last_context(kind, n)
            assert context is not None, f"no prediction for {kind} at {n}"
            downtimes[n] = self.recovery.downtime(kind, n, current)
            # (replayed by the stop, already waiting before it): the predictor spreads the first, gives the
            # second to the bottleneck worker.
            replays[n] = (self.recovery.replay_records(rate or 0.0), context.lag)
            arrivals[n], profiles[n] = context.forecast, context.profile
        stops = dict(self.tracker.stop_predictions)  # the stop predictions the watch compares with
        self.snapshots.append(Snapshot(now, current, analysis, rate, downtimes, replays, arrivals, profiles, stops))
        return analysis


def measured_recovery(job: SimulatedFlinkJob, start_s: int, resume_s: int, next_stop_s: int | None) -> float | None:
    """Seconds from the stop until the lag is back within one second of input; None if cut short or interrupted."""
    end = job.recorded_seconds if next_stop_s is None else min(next_stop_s, job.recorded_seconds)
    window = job.window(resume_s, end)
    caught_up = np.flatnonzero(window.lag <= np.maximum(window.workload, 1.0))
    if not caught_up.size:
        return None
    return float(resume_s + int(caught_up[0]) - start_s)


def stop_errors(job: SimulatedFlinkJob, snapshots: list[Snapshot]) -> list[dict[str, Any]]:
    """One row per judged stop: kind, scale-out, predicted, measured and the predictions with truths."""
    rows: list[dict[str, Any]] = []
    restarts = job.restarts
    times = [s.now for s in snapshots]
    whole = job.window(0, job.recorded_seconds)
    for i, restart in enumerate(restarts):
        next_stop = restarts[i + 1].start_s if i + 1 < len(restarts) else None
        if job.restart_in_progress is not None and next_stop is None:
            next_stop = job.restart_in_progress.start_s
        measured = measured_recovery(job, restart.start_s, restart.start_s + restart.downtime_s, next_stop)
        k = int(np.searchsorted(times, restart.start_s, side="right")) - 1
        if measured is None or measured <= 0 or k < 0:
            continue
        snap = snapshots[k]
        n = restart.to_parallelism
        predicted = snap.stop_predictions.get(n)
        planned = snap.analysis.recovery_times.get(n)
        capacity = snap.analysis.capacities.get(n)
        upper = snap.arrivals.get(n)
        if predicted is None or planned is None or capacity is None or upper is None or snap.recent_rate is None:
            continue
        lag_before = float(whole.lag[restart.start_s - 1]) if restart.start_s > 0 else 0.0
        future = whole.workload[restart.start_s : restart.start_s + 3600]
        believed: dict[str, Any] = {
            "capacity": (float(capacity), snap.profiles[n]),
            "workload": np.asarray(upper, dtype=float),
            "backlog": snap.replay_records[n],
            "downtime": snap.downtimes[n],
        }
        truth: dict[str, Any] = {
            "capacity": (job.true_capacity(n), (job.shares(n), job.worker_capacity[:n])),
            "workload": future,
            "backlog": (float(restart.replayed_records), lag_before),
            "downtime": float(restart.downtime_s),
        }

        def predict(inputs: dict[str, Any]) -> float:
            capacity, profile = inputs["capacity"]
            return recovery_time(
                capacity=capacity,
                forecast=inputs["workload"],
                replay_records=inputs["backlog"][0],
                downtime_s=inputs["downtime"],
                profile=profile,
                held_records=inputs["backlog"][1],
            )

        row: dict[str, Any] = {
            "kind": restart.kind,
            "start_s": restart.start_s,
            "parallelism": n,
            "predicted": predicted,
            "planned": planned,
            "measured": measured,
            "recomputed": predict(believed),
        }
        for name in TRUTHS:
            inputs = dict(truth) if name == "all" else {**believed, name: truth[name]}
            row[f"true {name}"] = predict(inputs)
        if snap.analysis.forecast is not None:
            row["point forecast"] = predict({**believed, "workload": np.asarray(snap.analysis.forecast, dtype=float)})
        row["believed"] = {
            **{k: v for k, v in believed.items() if k != "workload"},
            "capacity": believed["capacity"][0],
        }
        row["truth"] = {**{k: v for k, v in truth.items() if k != "workload"}, "capacity": truth["capacity"][0]}
        rows.append(row)
    return rows


def _relative(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured if math.isfinite(predicted) else math.inf


def error_stats(rows: list[dict[str, Any]], column: str = "predicted") -> dict[str, float]:
    """Median and p95 of |relative error|, and the median signed error (its bias), of ``column``."""
    errors = [_relative(r[column], r["measured"]) for r in rows]
    if not errors:
        return {}
    magnitudes = sorted(abs(e) for e in errors)
    p95 = magnitudes[min(len(magnitudes) - 1, math.ceil(0.95 * len(magnitudes)) - 1)]
    return {"n": len(errors), "median": statistics.median(magnitudes), "p95": p95, "bias": statistics.median(errors)}


def report(rows_by_trace: dict[str, list[dict[str, Any]]]) -> list[str]:
    """One line per trace (the prediction's errors), then every column's errors over all traces."""
    lines = [f"{'trace':<22} {'stops':>5} {'|err| med':>9} {'|err| p95':>9} {'bias':>7}"]
    for name, rows in sorted(rows_by_trace.items()):
        stats = error_stats(rows)
        if stats:
            lines.append(
                f"{name:<22} {stats['n']:>5} {stats['median']:>9.2f} {stats['p95']:>9.2f} {stats['bias']:>+7.2f}"
            )
    everything = [r for rows in rows_by_trace.values() for r in rows]
    lines.append("")
    lines.append(f"{'all traces, by kind':<22} {'stops':>5} {'|err| med':>9} {'|err| p95':>9} {'bias':>7}")
    for kind in ("rescale", "failure"):
        stats = error_stats([r for r in everything if r["kind"] == kind])
        if stats:
            lines.append(
                f"{kind:<22} {stats['n']:>5} {stats['median']:>9.2f} {stats['p95']:>9.2f} {stats['bias']:>+7.2f}"
            )
    lines.append("")
    lines.append(f"{'prediction with':<22} {'stops':>5} {'|err| med':>9} {'|err| p95':>9} {'bias':>7}")
    for column in ("predicted", "planned", "recomputed", "point forecast", *(f"true {name}" for name in TRUTHS)):
        stats = error_stats([r for r in everything if column in r], column)
        if stats:
            lines.append(
                f"{column:<22} {stats['n']:>5} {stats['median']:>9.2f} {stats['p95']:>9.2f} {stats['bias']:>+7.2f}"
            )
    return lines
