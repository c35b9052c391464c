"""Fit and back-test one job's forecaster on its history: the work each Spark task does, in plain pandas.

Kept free of Spark so the same function runs inside ``groupBy(job).applyInPandas`` and serially in
one process (the benchmark compares the two), and so a test can check it against a pandas reference.

The back-test is rolling-origin: the model is fitted on the history before the back-test span, then
walks forward through it; at every origin it is updated with what arrived since the previous origin
(no refit, as the agent does between retrains) and forecasts ``horizon_s`` ahead. WAPE pools all
origins: ``sum |actual - forecast| / sum |actual|``. The published model is refitted on the whole
history.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import time
import traceback
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import numpy as np
import pandas as pd

from models.capacity import MAX_RECORDS_PER_S
from models.forecast.seasonal import DAY_S, SeasonalForecaster
from spark.history import HistoryError
from spark.registry import ModelRegistry

LIBRARIES = ("perdix", "numpy", "pandas", "pyarrow", "pyspark", "pmdarima", "statsforecast")

RESULT_COLUMNS = (
    ("job", "string"),
    ("status", "string"),
    ("version", "string"),
    ("backtest_wape", "double"),
    ("origins", "int"),
    ("points", "int"),
    ("data_start", "string"),
    ("data_end", "string"),
    ("fit_seconds", "double"),
    ("cpu_seconds", "double"),
    ("message", "string"),
)
"""One summary row per job (the Spark result schema is built from this)."""


@dataclass(frozen=True)
class RetrainConfig:
    """How each job's forecaster is fitted and scored."""

    step_s: int = 60
    """Resampling step of the history and of the fitted model, seconds."""
    horizon_s: int = 900
    """Forecast horizon scored by the back-test (15 min, the agent's horizon), seconds."""
    backtest_s: int = 2 * DAY_S
    """Span at the end of the history that the rolling origins walk through, seconds."""
    origin_every_s: int = 3600
    """Seconds between two back-test origins."""
    min_train_s: int = DAY_S
    """History needed before the back-test span (at least one full day for the profile), seconds."""
    residual: str = "statsforecast-arima"
    """Residual forecaster (see models.forecast.seasonal.residual_models): statsforecast's AutoARIMA by default,
    because pmdarima's order search and Kalman updates cost about four times as much per job for a
    similar back-test WAPE (measured in benchmarks/bench_spark.py), and 200 jobs must fit in minutes."""
    residual_window_s: int = 6 * 3600
    """Most recent residuals the residual forecaster fits on, seconds."""
    profile_bin_s: int = 900
    """Width of one slot of the daily profile, seconds."""
    max_gap_s: int = 3600
    """Longer gaps in the history are a problem worth a failure, not something to interpolate, seconds."""

    def __post_init__(self) -> None:
        if self.horizon_s % self.step_s or self.origin_every_s % self.step_s or self.backtest_s % self.step_s:
            raise ValueError("horizon_s, origin_every_s and backtest_s must be multiples of step_s")
        if self.backtest_s < self.horizon_s:
            raise ValueError("backtest_s must be at least horizon_s")

    def make_model(self) -> SeasonalForecaster:
        """A fresh, unfitted forecaster of this configuration."""
        return SeasonalForecaster(
            residual=self.residual,
            step_s=self.step_s,
            profile_bin_s=self.profile_bin_s,
            residual_window_s=self.residual_window_s,
        )


@dataclass(frozen=True, eq=False)
class Series:
    """One job's workload on a regular grid."""

    start_s: float
    """Epoch second of the first sample."""
    values: np.ndarray


@dataclass(frozen=True)
class Backtest:
    """Rolling-origin back-test result."""

    wape: float
    origins: int
    abs_error: float
    abs_actual: float
    per_origin_wape: list[float] = field(default_factory=list)


MAX_SPAN = pd.Timedelta(days=366)
"""The longest history a retraining reads, as long as an export (``spark.export.MAX_RANGE``): two samples a thousand
years apart asked for a grid of gigabytes."""


def resample(frame: pd.DataFrame, *, step_s: int, max_gap_s: int) -> Series:
    """Mean workload rate per ``step_s`` on a regular grid; gaps up to ``max_gap_s`` interpolated linearly."""
    if frame.empty:
        raise HistoryError("no history")
    times = frame["time"]
    times = (
        pd.to_datetime(times.to_numpy(float), unit="s", utc=True)
        if pd.api.types.is_numeric_dtype(times)
        else pd.to_datetime(times, utc=True)
    )
    rates = pd.Series(pd.to_numeric(frame["workload_rate"], errors="coerce").to_numpy(float), index=times)
    if rates.isna().all():
        raise HistoryError("history has no workload_rate values (the column is absent or every value is null)")
    # A rate no job has (negative, or past MAX_RECORDS_PER_S) is a gap, as the agent reads it: 1e308 had overflowed
    # every sum of the fit.
    values = rates.to_numpy()
    rates = rates[np.isfinite(values) & (values >= 0) & (values <= MAX_RECORDS_PER_S)]
    if rates.empty:
        raise HistoryError(f"history has no workload rate between 0 and {MAX_RECORDS_PER_S:.0e} records/s")
    rates = rates.sort_index()
    span = rates.index[-1] - rates.index[0]
    if span > MAX_SPAN:
        raise HistoryError(
            f"history spans {span.days:,} days, more than the {MAX_SPAN.days} a retraining reads; "
            "export a shorter range"
        )
    # The grid below has a value per step across the whole span: a gap far too long is refused before it is built
    # (the grid's own count of missing steps, below, judges the gaps near the limit).
    steps = np.diff(rates.index.asi8) / 1e9 if len(rates) > 1 else np.empty(0)
    if steps.size and float(steps.max()) > max_gap_s + 2 * step_s:
        gap = float(steps.max()) - step_s
        raise HistoryError(f"history has a gap of {gap:.0f} s (more than max_gap_s={max_gap_s})")
    origin = pd.Timestamp(0, unit="s", tz="UTC")
    grid = rates.resample(f"{step_s}s", origin=origin).mean()
    missing = grid.isna().to_numpy()
    if missing.any():
        run = longest_run(missing) * step_s
        if run > max_gap_s:
            raise HistoryError(f"history has a gap of {run} s (more than max_gap_s={max_gap_s})")
        grid = grid.interpolate(method="linear", limit_direction="both")
    start = grid.index[0]
    return Series(start_s=(start - origin).total_seconds(), values=grid.to_numpy(float))


def longest_run(flags: np.ndarray) -> int:
    """Length of the longest run of True values."""
    best = current = 0
    for flag in flags:
        current = current + 1 if flag else 0
        best = max(best, current)
    return best


def wape(actual: np.ndarray, forecast: np.ndarray) -> float:
    """Weighted absolute percentage error ``sum|a - f| / sum|a|`` (inf when the actuals are all zero)."""
    actual = np.asarray(actual, dtype=float)
    denominator = float(np.abs(actual).sum())
    numerator = float(np.abs(actual - np.asarray(forecast, dtype=float)).sum())
    return numerator / denominator if denominator > 0 else (0.0 if numerator == 0 else float("inf"))


def origins(points: int, config: RetrainConfig) -> list[int]:
    """Indices of the back-test origins: every ``origin_every_s`` through the last ``backtest_s``."""
    step = config.step_s
    horizon = config.horizon_s // step
    first = points - config.backtest_s // step
    if first * step < config.min_train_s:
        raise HistoryError(
            f"history of {points * step / 3600:.1f} h is too short: the back-test needs "
            f"{(config.min_train_s + config.backtest_s) / 3600:.1f} h"
        )
    return list(range(first, points - horizon + 1, config.origin_every_s // step))


def backtest(series: Series, config: RetrainConfig) -> Backtest:
    """Rolling-origin back-test of ``horizon_s``-ahead forecasts (fit once, update between origins)."""
    y = series.values
    horizon = config.horizon_s // config.step_s
    points = origins(y.size, config)
    model = config.make_model().fit(y[: points[0]], start_s=series.start_s)
    seen = points[0]
    abs_error = abs_actual = 0.0
    per_origin = []
    for origin in points:
        model.update(y[seen:origin])
        seen = origin
        forecast = model.predict(horizon)
        actual = y[origin : origin + horizon]
        abs_error += float(np.abs(actual - forecast).sum())
        abs_actual += float(np.abs(actual).sum())
        per_origin.append(wape(actual, forecast))
    pooled = abs_error / abs_actual if abs_actual > 0 else float("inf")
    return Backtest(
        wape=pooled, origins=len(points), abs_error=abs_error, abs_actual=abs_actual, per_origin_wape=per_origin
    )


@functools.cache
def library_versions() -> dict[str, str]:
    """Versions of the libraries a model artifact depends on (``python`` included)."""
    found = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "absent"
    return found


def fingerprint(series: Series, config: RetrainConfig) -> str:
    """Hash of the resampled history and the configuration: equal inputs give an equal model."""
    digest = hashlib.sha256()
    digest.update(json.dumps(asdict(config), sort_keys=True).encode())
    digest.update(repr(series.start_s).encode())
    digest.update(np.ascontiguousarray(series.values, dtype="<f8").tobytes())
    return digest.hexdigest()


def _iso(epoch_s: float) -> str:
    return pd.Timestamp(epoch_s, unit="s", tz="UTC").isoformat()


def train_job(
    frame: pd.DataFrame,
    *,
    job: str,
    config: RetrainConfig,
    registry: ModelRegistry | None,
    version: str,
    created_at: str,
) -> dict[str, Any]:
    """Back-test, refit and publish one job; returns its summary row (never raises: failures are rows)."""
    started, cpu_started = time.perf_counter(), time.process_time()
    row: dict[str, Any] = {name: None for name, _ in RESULT_COLUMNS}
    row.update(job=job, status="failed", version=None)
    try:
        series = resample(frame, step_s=config.step_s, max_gap_s=config.max_gap_s)
        end_s = series.start_s + config.step_s * series.values.size
        row.update(points=int(series.values.size), data_start=_iso(series.start_s), data_end=_iso(end_s))
        digest = fingerprint(series, config)
        if registry is not None:
            newest = registry.latest(job)
            if newest is not None:
                try:
                    previous = registry.metadata(job, newest)
                except OSError:
                    previous = {}
                if previous.get("fingerprint") == digest:
                    # Same history, same configuration: the newest model is this model already.
                    row.update(
                        status="unchanged",
                        version=newest,
                        backtest_wape=previous.get("backtest", {}).get("wape"),
                        origins=previous.get("backtest", {}).get("origins"),
                        message="newest version was fitted on identical history",
                    )
                    return row
        result = backtest(series, config)
        model = config.make_model().fit(series.values, start_s=series.start_s)
        row.update(backtest_wape=result.wape, origins=result.origins)
        metadata = {
            "created_at": created_at,
            "model": model.name,
            "residual": config.residual,
            "config": asdict(config),
            "data": {
                "start": row["data_start"],
                "end": row["data_end"],
                "points": row["points"],
                "step_s": config.step_s,
            },
            "backtest": {
                "wape": result.wape if np.isfinite(result.wape) else None,
                "origins": result.origins,
                "horizon_s": config.horizon_s,
                "median_origin_wape": float(np.median(result.per_origin_wape)),
            },
            "fingerprint": digest,
            "libraries": dict(library_versions()),
        }
        if registry is not None:
            registry.publish(job, version, metadata=metadata, model=model.to_dict())
        row.update(status="published", version=version)
    except (HistoryError, ValueError, ArithmeticError, OSError) as exc:
        row["message"] = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001 - one bad job must not fail the whole run; the row says why
        row["message"] = f"{type(exc).__name__}: {exc} ({traceback.format_exc(limit=3).splitlines()[-2].strip()})"
    finally:
        row["fit_seconds"] = time.perf_counter() - started
        row["cpu_seconds"] = time.process_time() - cpu_started
    return row
