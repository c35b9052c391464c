"""The lab's plots: a replay (workload, forecast, capacity; parallelism; lag) and an evaluation's per trace and bars."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from lab.evaluate import RunResult  # noqa: E402
from lab.replay import ReplayResult  # noqa: E402


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
            series["loop_time_s"] / 3600.0,
            series["forecast_peak"] / 1000,
            where="post",
            lw=0.8,
            color="tab:orange",
            label="forecast peak (15 min)",
        )
    ax_rate.set_ylabel("k records/s")
    ax_rate.legend(loc="upper left", fontsize=8)
    ax_par.step(hours, series["parallelism"], where="post", color="tab:purple")
    ax_par.set_ylabel("workers")
    for at, _target, dry_run in result.rescales:
        ax_par.axvline(at / 3600.0, color="grey" if dry_run else "tab:red", lw=0.6, ls=":" if dry_run else "-")
    ax_lag.plot(hours, np.maximum(series["lag"], 0) / 1000, lw=0.7, color="tab:red")
    ax_lag.set_ylabel("lag (k records)")
    ax_lag.set_xlabel("hours")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_trace(trace: str, results: Sequence[RunResult], path: Path) -> None:
    """Workload, parallelism per policy and lag per policy of one trace."""
    fig, (ax_rate, ax_par, ax_lag) = plt.subplots(3, 1, figsize=(11, 8), sharex=True, constrained_layout=True)
    fig.suptitle(f"{trace}: parallelism and lag per policy")
    first = results[0].series
    ax_rate.plot(first["time_s"] / 3600, first["workload"] / 1000, lw=0.6, color="tab:blue")
    ax_rate.set_ylabel("workload (k records/s)")
    for result in results:
        hours = result.series["time_s"] / 3600
        label = f"{result.policy} ({result.summary['worker_hours']:.1f} h)"
        ax_par.step(hours, result.series["parallelism"], where="post", lw=0.9, label=label)
        ax_lag.plot(hours, np.maximum(result.series["lag"], 0) / 1000, lw=0.7, label=result.policy)
    ax_par.set_ylabel("workers")
    ax_par.legend(loc="upper left", fontsize=8, ncol=3)
    ax_lag.set_ylabel("lag (k records)")
    ax_lag.set_yscale("symlog", linthresh=1.0)
    ax_lag.set_xlabel("hours")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_fronts(
    trace: str,
    fronts: dict[str, list[dict[str, Any]]],
    optimal: dict[str, Any] | None,
    daedalus: dict[str, Any] | None,
    path: Path,
) -> None:
    """Worker-hours against SLO misses of every swept setting, one front per policy, the optimal point marked."""
    fig, ax = plt.subplots(figsize=(8, 5.5), constrained_layout=True)
    for policy, points in fronts.items():
        hours = [p["worker_hours"] for p in points]
        misses = [p["slo_misses"] for p in points]
        (line,) = ax.plot(hours, misses, "o-", lw=0.8, ms=4, label=policy)
        for p in points:
            if p["knob"] is not None:
                ax.annotate(
                    f"{p['knob']:g}",
                    (p["worker_hours"], p["slo_misses"]),
                    fontsize=6,
                    color=line.get_color(),
                    xytext=(3, 3),
                    textcoords="offset points",
                )
    if daedalus is not None:
        ax.plot(
            [daedalus["worker_hours"]], [daedalus["slo_misses"]], "*", ms=14, color="black", label="daedalus (default)"
        )
    if optimal is not None:
        ax.plot(
            [optimal["worker_hours"]],
            [optimal["slo_misses"]],
            "D",
            ms=9,
            color="gold",
            markeredgecolor="black",
            label="optimal",
        )
    ax.set_xlabel("worker-hours")
    ax.set_ylabel("SLO misses")
    ax.set_title(f"{trace}: cost against SLO misses per setting")
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)
