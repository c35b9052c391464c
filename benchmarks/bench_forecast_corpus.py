"""15-minute forecast WAPE over the trace corpus, streaming as the agent runs it, against the naive forecast.

Per trace (a half of ``traces/corpus`` or all of it), the workload is replayed at 1 s with the
simulator's 2 % arrival noise; the agent's forecaster (``models.forecast.WorkloadForecaster`` with
the shipped settings: ARIMA re-estimated every loop, candidate selection by rolling WAPE, fits
inline) takes a step every 60 s, and from the first half hour on, every loop's 15-min forecast is
scored against what arrived (origins whose 15 minutes lie inside the trace). Beside it, at the same
origins: the naive forecast (the last 10 s held flat, the baseline) and, with ``--no-selection``, the
ARIMA with the linear fallback alone (no candidate selection). Printed per trace: WAPE median over
origins for each, and the ratio manager / naive; then the median ratio over the traces (the goal: at
most 0.8).

With ``--candidates`` it scores instead a set of simple forecasts at the same origins (each held to its
rule, no selection: the last 10 s or 60 s held, the mean of the last 5/15/30/60 minutes, the line over
the last 10 minutes, the seasonal-naive of the registry) and prints their ratios to the naive forecast
per trace and, per half, the median of the best of them chosen per trace in hindsight: a bound on what
selecting among them can reach.

Run: .venv/bin/python -m benchmarks.bench_forecast_corpus [--half dev|held-out|all] [--hours 6] [--jobs 2]
     [--candidates]
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from lab.corpus import CorpusTrace, select
from lab.inline import InlineExecutor
from models.forecast import ForecasterConfig, WorkloadForecaster, wape

HORIZON_S = 900
LOOP_S = 60
WARM_UP_S = 1800
NAIVE_LEVEL_S = 10


def _noisy_workload(trace: CorpusTrace, hours: float) -> tuple[int, np.ndarray]:
    """The trace's seconds and its per-second workload with the simulator's 2 % arrival noise (seed 0)."""
    from simulator import load_trace

    seconds = int(hours * 3600)
    workload = load_trace(trace.path).per_second(0, seconds)
    return seconds, workload * (1 + 0.02 * np.random.default_rng(0).standard_normal(workload.size))


def score_trace(trace: CorpusTrace, hours: float, select_candidates: bool) -> dict[str, Any]:
    """WAPE at every loop origin after the warm-up: the manager's and the naive forecast's."""
    seconds, y = _noisy_workload(trace, hours)
    manager = WorkloadForecaster(ForecasterConfig(select=select_candidates), executor=InlineExecutor())
    ours: list[float] = []
    naive: list[float] = []
    sources: dict[str, int] = {}
    started = time.perf_counter()
    for t in range(0, seconds - HORIZON_S - LOOP_S + 1, LOOP_S):
        forecast = manager.step(y[t : t + LOOP_S])
        origin = t + LOOP_S
        if origin < WARM_UP_S or forecast.values is None:
            continue
        actual = y[origin : origin + HORIZON_S]
        mine = wape(actual, np.asarray(forecast.values)[: actual.size])
        flat = wape(actual, np.full(actual.size, y[origin - NAIVE_LEVEL_S : origin].mean()))
        if mine is None or flat is None:
            continue
        ours.append(mine)
        naive.append(flat)
        sources[forecast.source] = sources.get(forecast.source, 0) + 1
    return {
        "trace": trace.name,
        "family": trace.family,
        "half": trace.half,
        "manager": float(np.median(ours)),
        "naive": float(np.median(naive)),
        "origins": len(ours),
        "sources": sources,
        "wall_s": time.perf_counter() - started,
    }


def score_candidates(trace: CorpusTrace, hours: float) -> dict[str, Any]:
    """Median WAPE over the origins of each simple forecast (see the module docstring), and the naive one's."""
    from models.forecast.candidates import SeasonalNaive

    seconds, y = _noisy_workload(trace, hours)
    seasonal = SeasonalNaive()
    scores: dict[str, list[float]] = {}
    lead = np.arange(HORIZON_S, dtype=float)
    for t in range(0, seconds - HORIZON_S - LOOP_S + 1, LOOP_S):
        seasonal.update(y[t : t + LOOP_S])
        origin = t + LOOP_S
        if origin % 600 == 0:
            seasonal.find_period()
        if origin < WARM_UP_S:
            continue
        actual = y[origin : origin + HORIZON_S]
        held = {f"last {s} s": y[origin - s : origin].mean() for s in (NAIVE_LEVEL_S, 60)}
        held |= {f"mean {m} min": y[max(0, origin - 60 * m) : origin].mean() for m in (5, 15, 30, 60)}
        forecasts = {name: np.full(HORIZON_S, level) for name, level in held.items()}
        slope, intercept = np.polyfit(np.arange(600.0), y[origin - 600 : origin], 1)
        forecasts["line 10 min"] = np.maximum(intercept + slope * (600.0 + lead), 0.0)
        repeated = seasonal.predict(HORIZON_S)
        forecasts["seasonal"] = repeated if repeated is not None else forecasts["last 60 s"]
        for name, values in forecasts.items():
            score = wape(actual, values[: actual.size])
            if score is not None:
                scores.setdefault(name, []).append(score)
    return {
        "trace": trace.name,
        "family": trace.family,
        "half": trace.half,
        "medians": {name: float(np.median(values)) for name, values in scores.items()},
    }


def main_candidates(traces: list[CorpusTrace], hours: float, jobs: int) -> None:
    """Print every simple forecast's ratio to the naive one per trace, and the hindsight-best median per half."""
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        rows = list(pool.map(score_candidates, traces, [hours] * len(traces)))
    names = list(rows[0]["medians"])
    naive = f"last {NAIVE_LEVEL_S} s"
    print(f"{'trace':22s} {'family':8s} " + " ".join(f"{name:>11s}" for name in names))
    for row in rows:
        m = row["medians"]
        print(f"{row['trace']:22s} {row['family']:8s} " + " ".join(f"{m[name] / m[naive]:11.2f}" for name in names))
    for half in ("dev", "held-out"):
        chosen = [r["medians"] for r in rows if r["half"] == half]
        if chosen:
            best = statistics.median(min(m.values()) / m[naive] for m in chosen)
            each = ", ".join(f"{name} {statistics.median(m[name] / m[naive] for m in chosen):.2f}" for name in names)
            print(
                f"{half}: median ratio to the naive forecast, best of them per trace in hindsight {best:.2f} "
                f"(goal <= 0.80); each alone: {each}"
            )


def main() -> None:
    """Score the corpus half and print the table and the median ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--half", choices=("dev", "held-out", "all"), default="all")
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--no-selection", action="store_true", help="no candidate selection: ARIMA with the linear fallback"
    )
    parser.add_argument(
        "--candidates",
        action="store_true",
        help="score simple fixed forecasts instead, and the best of them per trace in hindsight",
    )
    args = parser.parse_args()
    traces = select(args.half)
    if args.candidates:
        main_candidates(traces, args.hours, args.jobs)
        return
    label = "ARIMA + linear fallback" if args.no_selection else "manager (selection)"
    print(
        f"15-min WAPE streaming every {LOOP_S} s over {len(traces)} traces ({args.half}), "
        f"{args.hours:g} h each: {label}"
    )
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(score_trace, traces, [args.hours] * len(traces), [not args.no_selection] * len(traces)))
    print(f"{'trace':22s} {'family':8s} {'half':8s} {'ours':>6s} {'naive':>6s} {'ratio':>6s}  sources")
    for row in rows:
        ratio = row["manager"] / row["naive"] if row["naive"] > 0 else float("nan")
        used = ", ".join(f"{k} {v}" for k, v in sorted(row["sources"].items(), key=lambda kv: -kv[1]))
        print(
            f"{row['trace']:22s} {row['family']:8s} {row['half']:8s} "
            f"{row['manager']:6.3f} {row['naive']:6.3f} {ratio:6.2f}  {used}"
        )
    for half in ("dev", "held-out"):
        ratios = [r["manager"] / r["naive"] for r in rows if r["half"] == half and r["naive"] > 0]
        if ratios:
            print(
                f"{half}: median ratio ours / naive {statistics.median(ratios):.2f} over {len(ratios)} traces "
                f"(goal <= 0.80); "
                f"median WAPE ours {statistics.median(r['manager'] for r in rows if r['half'] == half):.3f}, "
                f"naive {statistics.median(r['naive'] for r in rows if r['half'] == half):.3f}"
            )


if __name__ == "__main__":
    main()
