"""A workload history made by replaying a trace through the simulated job (for the Spark retraining's tests and demos).

The CLI hands the frame to ``spark.export.export_frame``; the lab itself never imports Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from simulator import SimulatedFlinkJob, SimulatorSettings, load_trace


class SimulationError(ValueError):
    """A simulated history that cannot be made; the message is the one line the CLI prints."""


def simulate_history(
    trace_path: Path | str,
    *,
    start: pd.Timestamp,
    hours: float | None = None,
    step_s: int = 60,
    simulator: SimulatorSettings | None = None,
    parallelism: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Replay a trace through the simulated job at a static parallelism; samples averaged per ``step_s``.

    Simulated second 0 is ``start`` (a UTC timestamp). Workload and throughput are means over each step, parallelism
    and lag the value at the step's last second (as a scrape at the step's end would read them).
    """
    trace = load_trace(trace_path)  # a TraceError names the file and line
    settings = simulator or SimulatorSettings()
    duration = int(trace.duration_s if hours is None else min(hours * 3600, trace.duration_s))
    duration -= duration % step_s
    if duration < step_s:
        raise SimulationError(f"{trace_path}: less than one {step_s} s step to replay")
    try:
        job = SimulatedFlinkJob(trace, settings, parallelism=parallelism)
    except ValueError as exc:
        raise SimulationError(f"--parallelism: {exc}") from None
    origin = start
    frames = []
    chunk = 3600 - 3600 % step_s or step_s
    for chunk_start in range(0, duration, chunk):
        chunk_end = min(chunk_start + chunk, duration)
        job.run_until(chunk_end)
        window = job.window(chunk_start, chunk_end)
        steps = (chunk_end - chunk_start) // step_s
        shape = (steps, step_s)
        throughput = np.zeros(chunk_end - chunk_start)
        seen = np.zeros(chunk_end - chunk_start, dtype=bool)
        for values in window.throughput.values():
            finite = np.isfinite(values)
            throughput[finite] += values[finite]
            seen |= finite
        throughput[~seen] = np.nan
        with np.errstate(invalid="ignore"):
            tp_mean = np.nanmean(throughput.reshape(shape), axis=1) if seen.any() else np.full(steps, np.nan)
        frames.append(
            pd.DataFrame(
                {
                    "time": origin + pd.to_timedelta(np.arange(chunk_start, chunk_end, step_s), unit="s"),
                    "workload_rate": window.workload.reshape(shape).mean(axis=1),
                    "throughput": tp_mean,
                    "parallelism": window.parallelism.reshape(shape)[:, -1],
                    "lag": window.lag.reshape(shape)[:, -1],
                }
            )
        )
        if progress is not None:
            progress(chunk_end, duration)
    return pd.concat(frames, ignore_index=True)
