"""15-minute forecast WAPE over the trace corpus, streaming as the agent runs it, against the naive forecast.

Per trace (a half of ``traces/corpus`` or all of it), the workload is replayed at 1 s with the
simulator's 2 % arrival noise; the agent's forecaster (``models.forecast.WorkloadForecaster`` with
the shipped settings: ARIMA re-estimated every loop, candidate selection by rolling WAPE, fits
inline) takes a step every 60 s, and from the first half hour on, every loop's 15-min forecast is
scored against what arrived (origins whose 15 minutes lie inside the trace). Beside it, at the same origins: the naive forecast (the last 10 s
held flat, the baseline of issue 21) and, with ``--no-selection``, the ARIMA with the linear
fallback (turn 1's manager). Printed per trace: WAPE median over origins for each, and the ratio
manager / naive; then the median ratio over the traces (issue 21's goal: at most 0.8).

Run: .venv/bin/python -m benchmarks.bench_forecast_corpus [--half dev|held-out|all] [--hours 6] [--jobs 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from lab.corpus import CorpusTrace, select
from models.forecast import WorkloadForecaster, wape

HORIZON_S = 900
LOOP_S = 60
WARM_UP_S = 1800
NAIVE_LEVEL_S = 10


class _Inline:
    """Fits run in the caller, as if the background executor were instant (the forecasts are what is measured)."""

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        from concurrent.futures import Future

        future: Future = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def score_trace(trace: CorpusTrace, hours: float, select_candidates: bool) -> dict[str, Any]:
    """WAPE at every loop origin after the warm-up: the manager's and the naive forecast's."""
    from simulator import load_trace

    seconds = int(hours * 3600)
    workload = load_trace(trace.path).per_second(0, seconds)
    y = workload * (1 + 0.02 * np.random.default_rng(0).standard_normal(workload.size))
    manager = WorkloadForecaster(executor=_Inline(), select=select_candidates)
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
        "trace": trace.name, "family": trace.family, "half": trace.half,
        "manager": float(np.median(ours)), "naive": float(np.median(naive)),
        "origins": len(ours), "sources": sources, "wall_s": time.perf_counter() - started,
    }


def main() -> None:
    """Score the corpus half and print the table and the median ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--half", choices=("dev", "held-out", "all"), default="all")
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-selection", action="store_true", help="turn 1's manager: ARIMA with the linear fallback")
    args = parser.parse_args()
    traces = select(args.half)
    label = "ARIMA + linear fallback" if args.no_selection else "manager (selection)"
    print(f"15-min WAPE streaming every {LOOP_S} s over {len(traces)} traces ({args.half}), {args.hours:g} h each: {label}")
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(score_trace, traces, [args.hours] * len(traces), [not args.no_selection] * len(traces)))
    print(f"{'trace':22s} {'family':8s} {'half':8s} {'ours':>6s} {'naive':>6s} {'ratio':>6s}  sources")
    for row in rows:
        ratio = row["manager"] / row["naive"] if row["naive"] > 0 else float("nan")
        used = ", ".join(f"{k} {v}" for k, v in sorted(row["sources"].items(), key=lambda kv: -kv[1]))
        print(f"{row['trace']:22s} {row['family']:8s} {row['half']:8s} {row['manager']:6.3f} {row['naive']:6.3f} {ratio:6.2f}  {used}")
    for half in ("dev", "held-out"):
        ratios = [r["manager"] / r["naive"] for r in rows if r["half"] == half and r["naive"] > 0]
        if ratios:
            print(f"{half}: median ratio ours / naive {statistics.median(ratios):.2f} over {len(ratios)} traces "
                  f"(goal <= 0.80); median WAPE ours {statistics.median(r['manager'] for r in rows if r['half'] == half):.3f}, "
                  f"naive {statistics.median(r['naive'] for r in rows if r['half'] == half):.3f}")


if __name__ == "__main__":
    main()
