"""The linear fallback: least squares over the recent workload, extrapolated (Daedalus section 3.3).

A least-squares line through a window that holds a step is a ramp: 600 s at 1,200/s then a minute at
4,500/s fit a line that reaches 12k/s 15 minutes on. With ``level_shifts`` the line is also fitted with
one level shift in it (:func:`fit_level_shift`: a break anywhere in the window, sudden or spread over
up to a minute, as a 60-s rate window spreads it) and the shifted line is used when the shift explains
nearly all of what the straight line leaves unexplained and a change of slope (a ramp starting) does not
explain it as well: the level after the step, carried along the slope the two segments share. Smooth
ramps and curves keep the straight line. Given the window its rates were taken over (``smear_s``), a ramp
younger than that window, which may still be a step being spread, is carried only to where the step would
be complete (:func:`fit_young_ramp`). A window that holds two steps (up, then back down) is explained by neither;
the level after the latest is held (:func:`latest_level_shift`). A straight line whose slope is no trend
(:func:`slope_is_significant`) holds the level the window ends at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from models.forecast.scoring import step_means

SHIFT_BUCKET_S = 10
"""The shift is looked for in means of this many samples (seconds), so noise does not look like a step."""
SHIFT_WIDTHS = (1, 2, 3, 4, 5, 6, 7)
"""Buckets a shift may take to complete: sudden, up to 70 s (a 60-s rate window smears a step over 60 s,
which need not start at a bucket's edge: fitted as a ramp of whole buckets a minute long, the misfit
tilts the shared slope by up to a tenth of the step over a 900-s horizon)."""
SHIFT_MIN_BEFORE = 3
"""Buckets before the shift: a break at the window's start is the window's edge, not a step."""
SHIFT_MIN_AFTER = 2
"""Buckets after the shift has completed: the new level must have been seen (two means fit any line: a
level is told from a ramp still rising by the hinge's fit, not by waiting longer)."""
SHIFT_MIN_BUCKETS = SHIFT_MIN_BEFORE + SHIFT_MIN_AFTER + 1
"""Buckets a window needs for any break to be fitted in it: those before, the break's, those after."""
SHIFT_EXPLAINS = 0.9
"""A shift is used only if the shifted line leaves at most 10 % of the straight line's squared error.

On the trace corpus (``traces/corpus``, 10-min windows every minute) a looser test fires on a third to
all of the windows of smooth, curved series, where the shifted line forecasts no better than the
straight one; a clean step (1,200 to 4,500/s, 2 % noise, sudden or smeared over a minute) leaves 0-5 %.
"""


@dataclass(frozen=True)
class LevelShift:
    """The best line with one level shift through a window: ``y = intercept + slope x + shift ramp(x)``."""

    slope: float
    """Per sample, shared by both sides of the shift."""
    last: float
    """The fitted value at the window's last sample (after the shift)."""
    shift: float
    """The change of level."""
    start: int
    """Samples before the window's end where the shift began."""
    explained: float
    """The shifted line's squared error over the straight line's (lower is a clearer step)."""


def fit_level_shift(y: np.ndarray, bucket: int = SHIFT_BUCKET_S) -> LevelShift | None:
    """The shifted line that fits ``y`` best, if the shift explains the window (see the module docstring).

    ``y`` is oldest first, NaN allowed; fitted on means of ``bucket`` samples aligned to the last
    one. None when the window is too short, when the straight line or the best line with one change of
    slope (a hinge) has a BIC as low (the shift has three parameters more than the line, one more than
    the hinge), or when the shift leaves more than ``1 - SHIFT_EXPLAINS`` of the line's squared error.
    """
    window = _bucketed(y, bucket)
    if window is None:
        return None
    index, x, means, n_all, span, sse_line = window
    n = index.size
    shift = _best_fit(index, x, means, _shift_columns(index, n_all))
    if shift is None:
        return None
    # A change of slope that explains the window as well is the start of a ramp, not a step.
    hinge = _best_fit(index, x, means, _hinge_columns(index, x, n_all))
    sse_shift = max(shift[0], 1e-12 * sse_line)
    bic_line, bic_hinge = _bic(sse_line, sse_line, n, 2), _bic(hinge[0] if hinge else sse_line, sse_line, n, 4)
    bic_shift = _bic(sse_shift, sse_line, n, 5)  # the break and its width are parameters too
    if bic_shift >= min(bic_line, bic_hinge) or sse_shift > (1 - SHIFT_EXPLAINS) * sse_line:
        return None
    _, k, coefs = shift
    intercept, slope, step = (float(v) for v in coefs)
    return LevelShift(
        slope=slope / span,
        last=intercept + step,
        shift=step,
        start=(n_all - k) * bucket,
        explained=sse_shift / sse_line,
    )


def latest_level_shift(y: np.ndarray, bucket: int = SHIFT_BUCKET_S) -> LevelShift | None:
    """The level shift that explains the last two thirds of ``y`` (:func:`fit_level_shift`), else the last two
    thirds of those, and so on down to the fewest buckets a shift needs: the latest step in the window, where no
    shift explains the whole of it. :class:`LinearForecaster` holds the level after it.

    A window with a step up and a step back down is explained by neither one shift nor one line, and the
    straight line through both rises (3.8k/s forecast at a flat 500/s half a minute after 3,000 -> 500/s on the
    real job, once the step down was older than a young ramp): a later part holds the step down alone, and
    what came since it is what goes on. A smooth curve holds no shift at any scale and keeps its straight line."""
    y = np.asarray(y, dtype=float).ravel()
    while (y := y[y.size // 3 :]).size // bucket >= SHIFT_MIN_BUCKETS:
        if (step := fit_level_shift(y, bucket)) is not None:
            return step
    return None


SLOPE_CONFIDENCE = 0.95
"""A slope is extrapolated only if it is this unlikely to be noise (:func:`slope_is_significant`)."""


def slope_is_significant(y: np.ndarray, bucket: int = SHIFT_BUCKET_S) -> bool:
    """Whether the straight line through ``y``'s ``bucket``-sample means has a slope a t-test at
    :data:`SLOPE_CONFIDENCE` tells from none (True with fewer than four means, where there is nothing to test, and
    for an exact line).

    A window with a step up and a step back down, a burst or a hump, is no trend: its straight line has a slope of
    nearly nothing and ends at the window's mean, half-way between the levels (2.9k/s at a flat 500/s 37 s after
    3,000 -> 500/s on the real job, where no shift explained the window's later part). Tested on the means, as the
    shift is, so the noise of single seconds does not make a slope look sure; a ramp's means lie close to its line
    and keep their trend, a hump's or a burst's do not."""
    _, index, means = _bucket_means(y, bucket)
    x = index.astype(float)
    if means.size < 4:
        return True
    dx = x - x.mean()
    sxx = float(dx @ dx)
    slope = float(dx @ (means - means.mean())) / sxx
    residual = means - means.mean() - slope * dx
    variance = float(residual @ residual) / (means.size - 2)
    if variance <= 0:
        return True
    t = abs(slope) / math.sqrt(variance / sxx)
    return bool(t >= stats.t.ppf(0.5 + SLOPE_CONFIDENCE / 2, means.size - 2))


YOUNG_RAMP_CONTEXT = 4
"""A young ramp is looked for in the last this many rate windows: the ramp (up to a window and two buckets) with
as long again before it, and not the whole window, where an earlier step (a step up, then the step down being
spread) leaves neither one change of slope nor one shift to explain it, and the straight line through both
forecast a rise (6.3k/s a minute after 3,000 -> 700/s on the real job)."""


@dataclass(frozen=True)
class YoungRamp:
    """A change of slope too recent to tell from a step a rate window is still spreading (:func:`fit_young_ramp`)."""

    slope: float
    """Per sample, after the change."""
    last: float
    """The fitted value at the window's last sample."""
    age: int
    """Samples since the change began."""


def fit_young_ramp(y: np.ndarray, smear_s: int, bucket: int = SHIFT_BUCKET_S) -> YoungRamp | None:
    """The window's change of slope, if it explains the window better than a straight line (BIC, and at most
    ``1 - SHIFT_EXPLAINS`` of the line's squared error left) and began at most ``smear_s`` samples, plus the
    ``SHIFT_MIN_AFTER`` buckets :func:`fit_level_shift` needs to see a new level, before its end; else None.

    A rate taken over a window of ``smear_s`` seconds turns a step into a ramp lasting that long, so a ramp
    younger than the window cannot yet be told from a step. :class:`LinearForecaster` then carries it only to
    where the step would be complete and holds it there; a ramp that outlasts the window is extrapolated as
    any other line. A whole-window line through such a ramp is what forecast a step as a climb to several
    times its level on the real job, in the first round after the step.
    """
    window = _bucketed(y, bucket) if smear_s > 0 else None
    if window is None:
        return None
    index, x, means, n_all, span, sse_line = window
    hinge = _best_fit(index, x, means, _hinge_columns(index, x, n_all))
    if hinge is None:
        return None
    sse_hinge, k, (intercept, slope, change) = hinge[0], hinge[1], (float(v) for v in hinge[2])
    n = index.size
    bic_line, bic_hinge = _bic(sse_line, sse_line, n, 2), _bic(sse_hinge, sse_line, n, 4)
    age = (n_all - k) * bucket
    # Until the level after a step has been seen for SHIFT_MIN_AFTER buckets, fit_level_shift cannot take it
    # for one: a ramp that began up to that much more than the smear ago may still be a step.
    # And like a shift, it must explain nearly all the straight line leaves: noise on a steady ramp finds a
    # better-by-BIC change of slope near the end in about one window of thirteen, explaining a quarter to half.
    if bic_hinge >= bic_line or sse_hinge > (1 - SHIFT_EXPLAINS) * sse_line or age > smear_s + SHIFT_MIN_AFTER * bucket:
        return None
    at = x[np.searchsorted(index, k).clip(max=index.size - 1)]
    # The fitted value at the last sample (x = 0): the line, plus the change of slope since the break.
    return YoungRamp(slope=(slope + change) / span, last=intercept + change * max(-at, 0.0), age=age)


def _bic(sse: float, sse_line: float, n: int, parameters: int) -> float:
    """The BIC of a fit to ``n`` bucket means with ``parameters`` parameters (its squared error floored at a
    trillionth of the straight line's, so an exact fit compares finitely)."""
    return float(n * np.log(max(sse, 1e-12 * sse_line) / n) + parameters * np.log(n))


def _bucket_means(y: np.ndarray, bucket: int) -> tuple[int, np.ndarray, np.ndarray]:
    """``y``'s means of ``bucket`` samples aligned to its last one: (the number of buckets, the indices of those
    with a finite mean, their means)."""
    y = np.asarray(y, dtype=float).ravel()
    n_all = y.size // bucket
    all_means = step_means(y[y.size - n_all * bucket :], bucket, n_all)
    keep = np.isfinite(all_means)
    return n_all, np.arange(n_all)[keep], all_means[keep]


def _bucketed(y: np.ndarray, bucket: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, float, float] | None:
    """The window in ``bucket``-sample means, for the break fits: (the buckets' indices, their x, their means,
    the number of buckets, the span in samples, the straight line's squared error). None when the window is
    too short (or too gappy) for a break, or a straight line fits it exactly."""
    n_all, index, means = _bucket_means(y, bucket)
    n = index.size
    if n < SHIFT_MIN_BUCKETS:
        return None
    # x relative to the window's last sample, at each bucket's centre, in windows (well-conditioned).
    span = float(n_all * bucket)
    x = ((index - (n_all - 1)) * bucket - (bucket - 1) / 2) / span
    straight = np.column_stack([np.ones(n), x])
    coef = np.linalg.lstsq(straight, means, rcond=None)[0]
    sse_line = float(np.sum((means - straight @ coef) ** 2))
    if sse_line <= 0:
        return None
    return index, x, means, n_all, span, sse_line


def _shift_columns(index: np.ndarray, n_all: int) -> tuple[np.ndarray, np.ndarray]:
    """Every shift's third column (K, n): 0 before bucket k, rising over its width, 1 after; and each k."""
    pairs = [(k, w) for w in SHIFT_WIDTHS for k in range(SHIFT_MIN_BEFORE, n_all - SHIFT_MIN_AFTER - w + 1)]
    ks, widths = np.array(pairs, dtype=int).reshape(-1, 2).T
    return np.clip((index[None, :] - ks[:, None] + 1) / widths[:, None], 0.0, 1.0), ks


def _hinge_columns(index: np.ndarray, x: np.ndarray, n_all: int) -> tuple[np.ndarray, np.ndarray]:
    """Every change of slope's third column (K, n): 0 before bucket k, then the distance past it; and each k."""
    ks = np.arange(SHIFT_MIN_BEFORE, n_all - 1)
    at = x[np.searchsorted(index, ks).clip(max=index.size - 1)]
    return np.maximum(x[None, :] - at[:, None], 0.0), ks


def _best_fit(
    index: np.ndarray, x: np.ndarray, means: np.ndarray, columns: tuple[np.ndarray, np.ndarray]
) -> tuple[float, int, np.ndarray] | None:
    """The least-squares fit of ``intercept + slope x + c column`` over every candidate column at once.

    Returns (squared error, the column's bucket, the three coefficients) of the best, or None when no
    candidate can be solved (a gap of NaN buckets can leave a break with nothing on one side).
    """
    third, ks = columns
    if not ks.size:
        return None
    n = index.size
    gram = np.empty((ks.size, 3, 3))
    gram[:, 0, 0], gram[:, 0, 1], gram[:, 1, 1] = n, x.sum(), x @ x
    gram[:, 0, 2], gram[:, 1, 2], gram[:, 2, 2] = third.sum(axis=1), third @ x, np.einsum("kn,kn->k", third, third)
    gram[:, 1, 0], gram[:, 2, 0], gram[:, 2, 1] = gram[:, 0, 1], gram[:, 0, 2], gram[:, 1, 2]
    rhs = np.stack([np.full(ks.size, means.sum()), np.full(ks.size, x @ means), third @ means], axis=1)
    solvable = np.abs(np.linalg.det(gram)) > 1e-9 * float(n) ** 3
    if not solvable.any():
        return None
    third, ks, gram, rhs = third[solvable], ks[solvable], gram[solvable], rhs[solvable]
    coefs = np.linalg.solve(gram, rhs[..., None])[..., 0]
    fitted = coefs[:, :1] + coefs[:, 1:2] * x[None, :] + coefs[:, 2:3] * third
    sse = np.sum((means[None, :] - fitted) ** 2, axis=1)
    best = int(np.argmin(sse))
    return float(sse[best]), int(ks[best]), coefs[best]


class LinearForecaster:
    """A straight line through the last ``window`` samples, extended into the future (never below 0)."""

    name = "linear"

    def __init__(
        self, window: int = 600, min_samples: int = 10, *, level_shifts: bool = False, smear_s: int = 0
    ) -> None:
        """``window``: samples the line is fitted on; ``min_samples``: finite samples needed for a line;
        ``level_shifts``: a step in the window is carried as the level after it (:func:`fit_level_shift`),
        not as a ramp (samples are seconds: the shift is looked for in 10-s means); ``smear_s``: the window
        the samples' rates were taken over (0: exact per-second rates), with ``level_shifts`` a ramp younger
        than it is carried only to where a step it may be would be complete (:func:`fit_young_ramp`)."""
        if window < 2:
            raise ValueError(f"window must be at least 2, got {window}")
        self.window = int(window)
        self.min_samples = max(2, int(min_samples))
        self.level_shifts = bool(level_shifts)
        self.smear_s = max(0, int(smear_s))
        self._y = np.empty(0)

    def fit(self, y: np.ndarray) -> LinearForecaster:
        """Keep the last ``window`` samples of ``y`` (NaN allowed: skipped in the fit)."""
        self._y = np.asarray(y, dtype=float).ravel()[-self.window :].copy()
        return self

    def update(self, y: np.ndarray) -> None:
        """Append new samples, keeping the last ``window``."""
        self._y = np.concatenate([self._y, np.asarray(y, dtype=float).ravel()])[-self.window :]

    @property
    def ready(self) -> bool:
        """True when there are enough finite samples for a line."""
        return int(np.count_nonzero(np.isfinite(self._y))) >= self.min_samples

    def _extrapolation(self) -> tuple[float, float, float] | None:
        """(slope per step, value at the last sample, steps the slope holds for) or None."""
        if not self.ready:
            return None
        if self.level_shifts and (step := fit_level_shift(self._y)) is not None:
            return step.slope, step.last, math.inf
        # The ramp is looked for at the window's end only, where an earlier step would not hide it.
        if (
            self.level_shifts
            and self.smear_s > 0
            and (ramp := fit_young_ramp(self._y[-YOUNG_RAMP_CONTEXT * self.smear_s :], self.smear_s)) is not None
        ):
            return ramp.slope, ramp.last, float(max(self.smear_s - ramp.age, 0))
        if self.level_shifts and (step := latest_level_shift(self._y)) is not None:
            # A shift in the window's later part alone: a slope shared over a few buckets is noise, the level is not.
            return 0.0, step.last, math.inf
        if self.level_shifts and not slope_is_significant(self._y):
            # No trend: the line's end is where the window's mean and a slope of nothing put it, not where the
            # workload stands (half-way between two levels after a step up and back down).
            return 0.0, self._level(), math.inf
        x = np.arange(self._y.size, dtype=float)
        finite = np.isfinite(self._y)
        x, y = x[finite], self._y[finite]
        x_mean, y_mean = x.mean(), y.mean()
        dx = x - x_mean
        denominator = float(dx @ dx)
        slope = float(dx @ (y - y_mean)) / denominator if denominator > 0 else 0.0
        return slope, y_mean + slope * (self._y.size - 1 - x_mean), math.inf

    def _level(self) -> float:
        """Where the workload stands: the mean of the last rate window's finite samples (a bucket's at least), else
        of the latest finite ones."""
        recent = self._y[-max(self.smear_s, SHIFT_BUCKET_S) :]
        finite = recent[np.isfinite(recent)]
        if not finite.size:
            finite = self._y[np.isfinite(self._y)][-SHIFT_BUCKET_S:]
        return float(finite.mean())

    def predict(self, horizon: int) -> np.ndarray:
        """The line at the next ``horizon`` steps (NaN if not :attr:`ready`); a young ramp held where a step
        would be complete."""
        extrapolation = self._extrapolation()
        if extrapolation is None:
            return np.full(int(horizon), np.nan)
        slope, last, steps = extrapolation
        ahead = np.minimum(np.arange(1, int(horizon) + 1, dtype=float), steps)
        return np.maximum(last + slope * ahead, 0.0)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable state."""
        return {
            "name": self.name,
            "window": self.window,
            "min_samples": self.min_samples,
            "level_shifts": self.level_shifts,
            "smear_s": self.smear_s,
            "y": [None if not np.isfinite(v) else float(v) for v in self._y],
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> LinearForecaster:
        """Rebuild from :meth:`to_dict`, validated first (raises ``StateError`` on a misfit field)."""
        from models.forecast.states import LinearState, read_state

        checked = read_state(LinearState, state)
        model = cls(
            window=checked.window,
            min_samples=checked.min_samples,
            level_shifts=checked.level_shifts,
            smear_s=checked.smear_s,
        )
        model._y = np.array([np.nan if v is None else v for v in checked.y], dtype=float)
        return model
