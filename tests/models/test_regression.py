"""WelfordRegression: exact against numpy least squares, mergeable, guarded, persistent."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from models.regression import WelfordRegression

finite = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, allow_infinity=False)
pairs = st.lists(st.tuples(finite, finite), min_size=2, max_size=60)


def _lstsq(xs: np.ndarray, ys: np.ndarray) -> tuple[float, float]:
    design = np.column_stack([np.ones_like(xs), xs])
    (intercept, slope), *_ = np.linalg.lstsq(design, ys, rcond=None)
    return float(slope), float(intercept)


def _well_spread(xs: np.ndarray) -> bool:
    # lstsq itself loses digits on a nearly flat x; compare where the problem is well conditioned.
    return float(np.std(xs)) > 1e-2 * max(1.0, float(np.max(np.abs(xs))))


@settings(max_examples=200, deadline=None)
@given(pairs)
def test_equals_numpy_least_squares(data: list[tuple[float, float]]) -> None:
    xs, ys = (np.array(c) for c in zip(*data))
    assume(_well_spread(xs))
    model = WelfordRegression()
    for x, y in data:
        model.update(x, y)
    slope, intercept = _lstsq(xs, ys)
    scale_y = max(1.0, float(np.max(np.abs(ys))))
    scale_slope = scale_y / float(np.std(xs))
    assert model.slope == pytest.approx(slope, rel=1e-9, abs=1e-9 * scale_slope)
    for x in (float(xs.min()), float(xs.max()), 0.0):
        assert model.predict(x) == pytest.approx(intercept + slope * x, rel=1e-9, abs=1e-9 * scale_y * 10)


@settings(max_examples=100, deadline=None)
@given(pairs, st.integers(min_value=0, max_value=60))
def test_update_many_equals_one_by_one(data: list[tuple[float, float]], cut: int) -> None:
    xs, ys = (np.array(c) for c in zip(*data))
    one = WelfordRegression()
    for x, y in data:
        one.update(x, y)
    batched = WelfordRegression()
    batched.update_many(xs[:cut], ys[:cut])
    batched.update_many(xs[cut:], ys[cut:])
    assert batched.n == one.n
    assert batched.mean_x == pytest.approx(one.mean_x, rel=1e-9, abs=1e-9)
    assert batched.c_xy == pytest.approx(one.c_xy, rel=1e-7, abs=1e-6)
    assert batched.m2_x == pytest.approx(one.m2_x, rel=1e-7, abs=1e-6)


@settings(max_examples=100, deadline=None)
@given(pairs, pairs, pairs)
def test_merge_is_associative_and_equals_one_pass(a: list, b: list, c: list) -> None:
    def fitted(data: list) -> WelfordRegression:
        model = WelfordRegression()
        for x, y in data:
            model.update(x, y)
        return model

    left = fitted(a).merge(fitted(b)).merge(fitted(c))
    right = fitted(a).merge(fitted(b).merge(fitted(c)))
    whole = fitted(a + b + c)
    for merged in (left, right):
        assert merged.n == whole.n
        for name in ("mean_x", "mean_y"):
            assert getattr(merged, name) == pytest.approx(getattr(whole, name), rel=1e-9, abs=1e-7)
        for name in ("m2_x", "m2_y", "c_xy"):
            scale = 1e-9 * max(1.0, abs(whole.m2_x) + abs(whole.m2_y))
            assert getattr(merged, name) == pytest.approx(getattr(whole, name), rel=1e-9, abs=scale)


@settings(max_examples=50, deadline=None)
@given(pairs)
def test_round_trip_keeps_predictions(data: list) -> None:
    model = WelfordRegression(min_samples=3, min_x_variance=1e-3)
    for x, y in data:
        model.update(x, y)
    copy = WelfordRegression.from_dict(model.to_dict())
    assert copy.to_dict() == model.to_dict()
    assert copy.predict(0.5) == model.predict(0.5)


def test_guards_give_no_line() -> None:
    model = WelfordRegression(min_samples=5, min_x_variance=0.01)
    for y in (10.0, 11.0, 12.0, 13.0):
        model.update(0.5 + y * 1e-3, y)
    assert model.predict(1.0) is None, "below min_samples"
    model.update(0.5, 14.0)
    assert model.n == 5
    assert model.predict(1.0) is None, "flat CPU series: variance far below the minimum"
    assert model.slope is None and model.intercept is None


def test_non_finite_pairs_are_skipped_and_counted() -> None:
    model = WelfordRegression()
    assert model.update(math.nan, 1.0) is False
    assert model.update(1.0, math.inf) is False
    used = model.update_many([0.1, np.nan, 0.3, 0.5], [10.0, 20.0, np.nan, 50.0])
    assert used == 2
    assert model.skipped == 4
    assert model.predict(1.0) == pytest.approx(100.0)


def test_rejects_bad_guards() -> None:
    with pytest.raises(ValueError, match="min_samples"):
        WelfordRegression(min_samples=1)
    with pytest.raises(ValueError, match="lengths|differ"):
        WelfordRegression().update_many([1.0, 2.0], [1.0])
