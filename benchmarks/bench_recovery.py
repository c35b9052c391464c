"""Recovery-time prediction error over 50 simulated rescales (goal: median ≤ 15 %).

The simulated job (36 skewed partitions, heterogeneous workers, 10 s checkpoints, rescale downtime
10 s + 1.5 s per worker with log-normal jitter) replays the taylor trace. Every 60 s the models are
fed as the agent feeds them (capacity regressions and shares, the ARIMA forecaster, the anomaly
watch); every 10 minutes the job is rescaled to a random scale-out that carries the workload with
25 % headroom. Before each rescale the predictor is asked, with the capacity the model believes at
the target and the current forecast; afterwards the truth is the simulator's lag: seconds from the
stop until the backlog is drained (lag under a tenth of a second of workload), the event the
predictor predicts and the anomaly watch measures. Also printed against an earlier event, lag
under one second of workload: on a skewed job the hottest worker still holds up to 1/share seconds
of its own work then (about 15 s here), so that truth ends sooner than any drain. Measured recoveries (from the anomaly
watch, as in the agent) are fed back, so downtime estimates are learned along the way.

Also printed: the watch run on consumer lag instead of the workload-throughput gap, downtimes fed
back from job uptime instead of the watch, and predictions with the simulator's true capacity and
downtimes learned from uptime (isolates the predictor's arithmetic and its worst-case replay).

Run: .venv/bin/python -m benchmarks.bench_recovery
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from benchmarks.common import TRACES
from lab.inline import InlineExecutor
from models.anomaly import RecoveryWatch
from models.capacity import CapacityModel
from models.forecast import WorkloadForecaster
from models.recovery import RecoveryPredictor
from simulator import SimulatedFlinkJob, load_trace
from simulator.config import SimulatorSettings

RESCALES = 50
EVERY_S = 600
LOOP_S = 60


DRAINED_S = 0.1
"""Caught up: less than this many seconds of workload waiting."""


def _true_recovery(job: SimulatedFlinkJob, start: int, within_s: float = DRAINED_S) -> float:
    window = job.window(start, job.recorded_seconds)
    threshold = np.maximum(within_s * window.workload, 1.0)
    resumed = start + job.restarts[-1].downtime_s - start
    after = np.flatnonzero(window.lag[resumed:] <= threshold[resumed:])
    return float(resumed + after[0]) if after.size else math.inf


def run(feedback: str, seed: int = 11) -> dict[str, list[float]]:
    """Replay RESCALES rescales; ``feedback``: ``watch`` (gap), ``lag`` (watch on consumer lag) or ``uptime``."""
    config = SimulatorSettings(seed=seed, initial_parallelism=10)
    job = SimulatedFlinkJob(load_trace(TRACES / "taylor.csv"), config)
    rng = np.random.default_rng(seed)
    capacity = CapacityModel()
    forecaster = WorkloadForecaster(executor=InlineExecutor())
    predictor = RecoveryPredictor(checkpoint_interval_s=config.checkpoint_interval_s)
    oracle = RecoveryPredictor(checkpoint_interval_s=config.checkpoint_interval_s)
    watch = RecoveryWatch()
    pending: dict[str, Any] | None = None
    out: dict[str, list[float]] = {
        "model": [],
        "true_capacity": [],
        "predicted": [],
        "actual": [],
        "model_1s": [],
        "true_capacity_1s": [],
    }
    forecast = None
    t = 0
    end = (RESCALES + 1) * EVERY_S + 1200
    done = 0
    while t < end and done < RESCALES:
        job.run_until(t + LOOP_S)
        window = job.window(t, t + LOOP_S)
        t += LOOP_S
        live = {w: s for w, s in window.throughput.items() if np.isfinite(s[-1])}
        capacity.observe({w: window.cpu[w] for w in live}, live)
        n = int(window.parallelism[-1])
        if len(live) == n:
            capacity.record_observed(n, capacity.capacity_now())
        forecast = forecaster.step(window.workload)
        total = np.nansum(np.vstack(list(live.values())), axis=0) if live else np.full(LOOP_S, np.nan)
        signal = window.lag if feedback == "lag" else window.workload - total
        for second, gap in zip(window.times, signal):
            if not watch.active:
                watch.learn_one(float(gap))
            elif (ended := watch.update(float(second), float(gap))) is not None and pending is not None:
                if feedback in ("watch", "lag"):
                    predictor.observe_recovery(
                        kind="rescale", parallelism=pending["target"], measured_s=ended - pending["start"]
                    )
        if pending is not None and t - pending["start"] >= EVERY_S - LOOP_S:
            actual = _true_recovery(job, pending["start"])
            restart = job.restarts[-1]
            if feedback == "uptime":
                predictor.observe_downtime(kind="rescale", parallelism=pending["target"], downtime_s=restart.downtime_s)
            oracle.observe_downtime(kind="rescale", parallelism=pending["target"], downtime_s=restart.downtime_s)
            if math.isfinite(actual) and math.isfinite(pending["predicted"]):
                out["model"].append(abs(pending["predicted"] - actual) / actual)
                out["true_capacity"].append(abs(pending["oracle"] - actual) / actual)
                out["predicted"].append(pending["predicted"])
                out["actual"].append(actual)
                earlier = _true_recovery(job, pending["start"], within_s=1.0)
                out["model_1s"].append(abs(pending["predicted"] - earlier) / earlier)
                out["true_capacity_1s"].append(abs(pending["oracle"] - earlier) / earlier)
                done += 1
            pending = None
        if pending is None and t % EVERY_S == 0 and t >= 1200 and forecast.values is not None:
            rate = float(np.mean(window.workload[-config.checkpoint_interval_s :]))
            peak = float(np.max(forecast.values))
            candidates = [
                m for m in range(2, config.partitions + 1) if m != n and job.true_capacity(m) > 1.25 * max(peak, rate)
            ]
            candidates = [m for m in candidates if abs(m - n) <= 4] or candidates
            target = int(rng.choice(candidates))
            oracle_rt = oracle.predict(
                job.true_capacity(target), forecast.values, rate, kind="rescale", parallelism=target
            )
            believed, _ = capacity.capacity_at(target, current=n)
            predicted = predictor.predict(believed, forecast.values, rate, kind="rescale", parallelism=target)
            job.rescale(target)
            watch.start(float(t))
            pending = {"start": t, "target": target, "predicted": predicted, "oracle": oracle_rt}
    return out


def _summary(label: str, errors: list[float]) -> str:
    e = np.array(errors) * 100
    return f"  {label}: n={e.size}, median {np.median(e):.1f} %, p95 {np.percentile(e, 95):.1f} %"


def main() -> None:
    """Print the recovery-time prediction errors."""
    print(
        f"recovery-time prediction error over {RESCALES} simulated rescales (taylor trace); "
        f"truth: backlog drained (lag under {DRAINED_S:g} s of workload)"
    )
    for feedback in ("watch", "lag", "uptime"):
        result = run(feedback)
        first, rest = result["model"][:10], result["model"][10:]
        print(f" downtime learned from: {feedback}")
        print(_summary("all rescales (model capacity, forecast, learned downtime)", result["model"]))
        print(_summary("first 10 (still learning)", first))
        print(_summary("rescales 11-50", rest))
        print(_summary("true capacity, downtimes learned from uptime", result["true_capacity"]))
        print(_summary("against lag under 1 s of workload, all rescales", result["model_1s"]))
        print(_summary("against lag under 1 s of workload, true capacity", result["true_capacity_1s"]))
        print(
            f"  actual recovery: median {np.median(result['actual']):.0f} s; "
            f"predicted: median {np.median(result['predicted']):.0f} s"
        )


if __name__ == "__main__":
    main()
