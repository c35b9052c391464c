"""The replay plot: workload, forecast and capacity; parallelism; consumer lag; rescales marked."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

if TYPE_CHECKING:
    from agent.replay import ReplayResult


def plot_replay(result: ReplayResult, path: Path) -> None:
    """Write a three-panel PNG of the replay to ``path``."""
    series = result.series
    hours = series["time_s"] / 3600.0
    fig, (ax_rate, ax_par, ax_lag) = plt.subplots(3, 1, figsize=(11, 8), sharex=True, constrained_layout=True)
    summary = result.summary
    fig.suptitle(
        f"{summary['trace']} — {summary['policy']}{' (dry-run)' if summary['dry_run'] else ''}: "
        f"{summary['worker_hours']:.1f} worker-hours, {summary['rescales']} rescales, "
        f"{summary['slo_misses']} SLO misses"
    )
    ax_rate.plot(hours, series["workload"] / 1000, lw=0.6, color="tab:blue", label="workload")
    ax_rate.plot(hours, series["true_capacity"] / 1000, lw=1.0, color="tab:green", label="capacity (true)")
    if series["loop_time_s"].size:
        ax_rate.step(
            series["loop_time_s"] / 3600.0, series["forecast_peak"] / 1000, where="post",
            lw=0.8, color="tab:orange", label="forecast peak (15 min)",
        )
    ax_rate.set_ylabel("k records/s")
    ax_rate.legend(loc="upper left", fontsize=8)
    ax_par.step(hours, series["parallelism"], where="post", color="tab:purple")
    ax_par.set_ylabel("workers")
    for at, target, dry_run in result.rescales:
        ax_par.axvline(at / 3600.0, color="grey" if dry_run else "tab:red", lw=0.6, ls=":" if dry_run else "-")
    ax_lag.plot(hours, np.maximum(series["lag"], 0) / 1000, lw=0.7, color="tab:red")
    ax_lag.set_ylabel("lag (k records)")
    ax_lag.set_xlabel("hours")
    fig.savefig(path, dpi=110)
    plt.close(fig)
