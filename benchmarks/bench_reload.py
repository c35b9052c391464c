"""Cost of the like-with-like reload check: the running model's score, and a registry model's replay on the last hour.

For each of a few synthetic jobs (benchmarks/synthetic_history.py, as the Spark benchmark makes
them), the registry model is fitted the way ``perdix retrain`` fits it (14 days of 1-min history,
``--residual`` as given) and published to a local registry. The agent's own forecaster (the
default ARIMA on 10-s means) then runs loop by loop over the next hour of that job at 1 s (the
1-min rates interpolated, with noise), its forecasts recorded as the analyzer records them; then
:meth:`agent.model_reload.ModelReloader.check` scores both on that hour, ``--repeats`` times: the
candidate's replay (which the agent runs on a thread beside the loop) and what stays in the loop (the
running model's score and the copy of the window) are timed apart, and both WAPEs reported.

    .venv/bin/python -m benchmarks.bench_reload
    .venv/bin/python -m benchmarks.bench_reload --residual arima --jobs 2
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np

from agent.logging import configure_logging
from agent.model_reload import SCORE_EVERY_LOOPS, ModelReloader
from benchmarks.common import SHIPPED_TRACES, TRACES
from benchmarks.synthetic_history import job_shapes, workload
from lab.inline import InlineExecutor
from models.forecast import WorkloadForecaster
from models.forecast.reloaded import ReloadedForecaster
from models.forecast.scoring import RecentWorkload
from models.registry import Artifact, version_at
from simulator import load_trace
from spark.registry import ModelRegistry
from spark.training import RetrainConfig

DAYS = 14
START_S = datetime(2026, 11, 1, tzinfo=UTC).timestamp()


def job_hour(index: int, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """14 days of a synthetic job at 1 min, and the hour after them at 1 s (interpolated, 3 % noise)."""
    shape = job_shapes(index + 1, traces=SHIPPED_TRACES, days=DAYS + 1, seed=seed)[index]
    trace = load_trace(TRACES / f"{shape.trace}.csv")
    rates = workload(trace, shape, days=DAYS + 1, step_s=60, rng=np.random.default_rng([seed, index]))
    history, after = rates[: DAYS * 1440], rates[DAYS * 1440 : DAYS * 1440 + 61]
    seconds = np.interp(np.arange(3600) / 60.0, np.arange(after.size), after)
    noise = 1.0 + 0.03 * np.random.default_rng(index).standard_normal(3600)
    return history, np.maximum(seconds * noise, 0.0)


def replay_maker(artifact: Artifact, job: str) -> Callable[[float], ReloadedForecaster]:
    """Fresh forecasters over ``artifact``'s model for a candidate replay; the argument is the next sample's second."""

    def make(next_s: float) -> ReloadedForecaster:
        return ReloadedForecaster.from_artifact(
            artifact.model,
            job=job,
            version=artifact.version,
            backtest_wape=0.1,
            agent_step_s=1.0,
            next_s=next_s,
        )

    return make


def main(argv: list[str] | None = None) -> int:
    """Time the reload check on a few jobs and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--residual", default=RetrainConfig().residual)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    configure_logging("console", "error")
    config = replace(RetrainConfig(), residual=args.residual)

    timings: list[float] = []
    loop_costs: list[float] = []
    print(
        f"registry model: daily profile + {args.residual} residual, fitted on {DAYS} days of 1-min history; "
        "running model: the agent's ARIMA on 10-s means; window: the last hour, 15 min ahead in 1-min steps"
    )
    with tempfile.TemporaryDirectory() as root:
        registry = ModelRegistry(root)
        for index in range(args.jobs):
            history, hour = job_hour(index, seed=args.seed)
            model = config.make_model().fit(history, start_s=START_S)
            job = f"job-{index}"
            registry.publish(
                job,
                version_at(datetime(2026, 11, 15, tzinfo=UTC)),
                metadata={"backtest": {"wape": 0.1}},
                model=model.to_dict(),
            )
            hour_start = START_S + DAYS * 86_400
            forecaster = WorkloadForecaster(executor=InlineExecutor())
            recent = RecentWorkload()
            for first in range(0, hour.size, 60):
                times = hour_start + first + np.arange(60)
                recent.extend(times, hour[first : first + 60])
                forecaster.step(hour[first : first + 60])
                recent.record(times[-1] + 1, forecaster.model, forecaster.model_forecast)
            line, loop_side = [], []
            for _ in range(args.repeats):
                # Without an executor the replay runs inside check: its own time is last_score_ms.
                reloader = ModelReloader(registry, job, agent_step_s=10.0, min_improvement=1.0)  # never switches
                reloader.check(recent, online=forecaster.model, now=hour_start + 3600)
                assert reloader.last_score_ms is not None
                line.append(reloader.last_score_ms)
                started = time.perf_counter()
                running = recent.score_issued(forecaster.model)
                recent.snapshot()
                loop_side.append((time.perf_counter() - started) * 1000.0)
            timings.extend(line)
            loop_costs.extend(loop_side)
            running = recent.score_issued(forecaster.model)
            artifact = registry.load(job)
            with_replay = None
            if running is not None:
                with_replay = recent.score_replay(replay_maker(artifact, job), running.origins)
            trace = job_shapes(index + 1, traces=SHIPPED_TRACES, days=DAYS + 1, seed=args.seed)[index].trace
            print(
                f"  {job} ({trace}): replay {np.median(line):.0f} ms median (max {max(line):.0f} ms) over "
                f"{args.repeats}; window WAPE running {running.wape if running else float('nan'):.4f}, registry "
                f"{with_replay.wape if with_replay else float('nan'):.4f} on "
                f"{len(running.origins) if running else 0} origins"
            )
    timings_array = np.asarray(timings)
    print(
        f"candidate replay (on the reload thread, beside the loop), all jobs: "
        f"median {np.median(timings_array):.0f} ms, "
        f"p95 {np.percentile(timings_array, 95):.0f} ms, max {timings_array.max():.0f} ms; at most once every "
        f"{SCORE_EVERY_LOOPS} loops while a newer version waits"
    )
    print(
        f"in the loop (the running model's score and the window's copy): median {np.median(loop_costs):.2f} ms, "
        f"max {max(loop_costs):.2f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
