"""15-minute-ahead WAPE on the shipped traces: pmdarima vs statsforecast AutoARIMA, and refit time.

Each trace is replayed at 1 s with the simulator's 2 % arrival noise. At forecast origins every
20 minutes (after the first half hour, six hours per trace) each forecaster is fitted on the last
900 s, averaged to the manager's resolution (10 s by default; pmdarima at 1 s is shown too), and
forecasts 900 s; WAPE is taken against what arrived. The naive forecast (last 10 s mean held flat)
and the linear fallback (least squares over the last 600 s) are the baselines. Refit time is the
wall time of one auto-ARIMA search and fit on a 900-point window (1 s data), and on the 90-point
window the manager actually fits. Timings run with BLAS limited to one thread, as the models do.

Run: .venv/bin/python -m benchmarks.bench_forecast
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks.common import SHIPPED_TRACES, TRACES
from lab.inline import InlineExecutor
from models.forecast import (
    ArimaForecaster,
    ForecasterConfig,
    LinearForecaster,
    StatsForecastArima,
    WorkloadForecaster,
    wape,
)
from simulator import load_trace

HORIZON_S = 900
WINDOW_S = 900
HOURS = 6
ORIGIN_EVERY_S = 1200


def _series(name: str) -> np.ndarray:
    trace = load_trace(TRACES / f"{name}.csv")
    rng = np.random.default_rng(0)
    seconds = HOURS * 3600 + HORIZON_S
    return trace.per_second(0, seconds) * (1 + 0.02 * rng.standard_normal(seconds))


def _forecast(model: object, history: np.ndarray, resolution: int) -> tuple[np.ndarray, float]:
    buckets = history.reshape(-1, resolution).mean(axis=1)
    start = time.perf_counter()
    model.fit(buckets)  # type: ignore[attr-defined]
    fit_s = time.perf_counter() - start
    values = model.predict(HORIZON_S // resolution)  # type: ignore[attr-defined]
    return np.repeat(values, resolution), fit_s


def loop_cost(name: str = "bank_calls", resolution: int = 10, loops: int = 360) -> None:
    """Per-loop wall time of WorkloadForecaster.step (update + predict) over a six-hour replay, fits apart."""
    y = _series(name)
    manager = WorkloadForecaster(ForecasterConfig(resolution_s=resolution), executor=InlineExecutor())
    step_times: list[float] = []
    fit_times: list[float] = []
    for k in range(loops):
        fits = manager.fits_started
        start = time.perf_counter()
        manager.step(y[k * 60 : (k + 1) * 60])
        elapsed = time.perf_counter() - start
        (fit_times if manager.fits_started > fits else step_times).append(elapsed)
    t = np.array(step_times) * 1000
    print(
        f"  {name} @{resolution}s: step p50 {np.median(t):.1f} ms, p95 {np.percentile(t, 95):.1f} ms, "
        f"max {t.max():.1f} ms; {len(fit_times)} loops with an inline fit, total {sum(fit_times):.1f} s"
    )


def streaming(name: str, update_maxiter: int, loop_s: int = 60) -> tuple[float, float]:
    """15-min-ahead WAPE (median, p90) of the manager as the agent runs it: a step every loop, fits inline."""
    y = _series(name)
    manager = WorkloadForecaster(ForecasterConfig(update_maxiter=update_maxiter), executor=InlineExecutor())
    scores = []
    for t in range(0, HOURS * 3600, loop_s):
        forecast = manager.step(y[t : t + loop_s])
        if t >= 1800 and forecast.values is not None:
            actual = y[t + loop_s : t + loop_s + HORIZON_S]
            scores.append(wape(actual, np.asarray(forecast.values)[: actual.size]) or np.nan)
    v = np.array(scores)
    return float(np.nanmedian(v)), float(np.nanpercentile(v, 90))


def main() -> None:
    """Print WAPE (median, p90 over origins) per trace and forecaster, and refit times."""
    print(f"15-min-ahead WAPE over forecast origins every {ORIGIN_EVERY_S // 60} min, {HOURS} h per trace")
    fit_times: dict[str, list[float]] = {}
    for name in SHIPPED_TRACES:
        y = _series(name)
        scores: dict[str, list[float]] = {}
        for origin in range(1800, HOURS * 3600 - HORIZON_S + 1, ORIGIN_EVERY_S):
            history = y[origin - WINDOW_S : origin]
            actual = y[origin : origin + HORIZON_S]
            candidates = {
                "pmdarima @10s": (ArimaForecaster(WINDOW_S // 10), 10),
                "statsforecast @10s": (StatsForecastArima(WINDOW_S // 10), 10),
                "pmdarima @1s": (ArimaForecaster(WINDOW_S), 1),
            }
            for label, (model, resolution) in candidates.items():
                values, fit_s = _forecast(model, history, resolution)
                scores.setdefault(label, []).append(wape(actual, values) or np.nan)
                fit_times.setdefault(label, []).append(fit_s)
            scores.setdefault("naive (last 10 s)", []).append(
                wape(actual, np.full(HORIZON_S, history[-10:].mean())) or np.nan
            )
            linear = LinearForecaster(window=600).fit(history).predict(HORIZON_S)
            scores.setdefault("linear fallback", []).append(wape(actual, linear) or np.nan)
        print(f" {name} ({len(scores['naive (last 10 s)'])} origins)")
        for label, scored in scores.items():
            v = np.array(scored)
            print(f"  {label:20s} WAPE median {np.nanmedian(v):.3f}  p90 {np.nanpercentile(v, 90):.3f}")
    print(" refit time (auto-ARIMA search + fit), median / max over origins")
    for label, times in fit_times.items():
        t = np.array(times)
        points = WINDOW_S if "1s" in label else WINDOW_S // 10
        print(f"  {label:20s} on {points} points: {np.median(t):.2f} s / {t.max():.2f} s")
    print(" the manager streaming (a step every 60 s, 15-min WAPE at every loop after the first 30 min)")
    for name in SHIPPED_TRACES:
        for maxiter in (0, 10):
            median, p90 = streaming(name, maxiter)
            how = "filter-only updates" if maxiter == 0 else f"updates re-estimate ({maxiter} iterations)"
            print(f"  {name:12s} {how:38s} WAPE median {median:.3f}  p90 {p90:.3f}")
    print(" per-loop cost of the manager (360 loops of 60 s, inline executor)")
    for resolution in (10, 1):
        loop_cost(resolution=resolution)


if __name__ == "__main__":
    main()
