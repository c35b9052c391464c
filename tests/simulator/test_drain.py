"""The compiled moving averages the simulated job reports, against their definition written plainly."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.drain import moving_averages


def _by_definition(parallelism: np.ndarray, raw: np.ndarray, first: int, start: int, window_s: int) -> np.ndarray:
    """Each worker's mean over the last ``window_s`` seconds it has existed without a break; NaN while absent."""
    seconds, workers = raw.shape
    out = np.full((seconds - (start - first), workers), np.nan)
    for i in range(workers):
        for k in range(start - first, seconds):
            if parallelism[k] <= i:
                continue
            run = 0
            while run < window_s and k - run >= 0 and parallelism[k - run] > i:
                run += 1
            out[k - (start - first), i] = raw[k - run + 1 : k + 1, i].sum() / run
    return out


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    workers=st.integers(1, 4),
    seconds=st.integers(1, 40),
    window_s=st.integers(1, 12),
)
def test_each_worker_averages_the_seconds_it_existed_within_the_window(
    data: st.DataObject, workers: int, seconds: int, window_s: int
) -> None:
    parallelism = np.asarray(
        data.draw(st.lists(st.integers(0, workers), min_size=seconds, max_size=seconds)), dtype=np.int64
    )
    raw = np.asarray(
        data.draw(st.lists(st.floats(0, 1e4), min_size=seconds * workers, max_size=seconds * workers))
    ).reshape(seconds, workers)
    first = data.draw(st.integers(0, 100))
    start = first + data.draw(st.integers(0, seconds - 1))
    out = np.empty((seconds - (start - first), workers))
    moving_averages(parallelism, raw, first, start, window_s, out)
    expected = _by_definition(parallelism, raw, first, start, window_s)
    assert np.array_equal(np.isnan(out), np.isnan(expected))
    present = ~np.isnan(expected)
    assert np.allclose(out[present], expected[present], rtol=1e-9, atol=1e-6)


def test_a_worker_that_just_joined_is_averaged_over_its_own_seconds_only() -> None:
    parallelism = np.array([1, 1, 2, 2], dtype=np.int64)
    raw = np.array([[10.0, 0.0], [20.0, 0.0], [30.0, 4.0], [40.0, 8.0]])
    out = np.empty((4, 2))
    moving_averages(parallelism, raw, 0, 0, 3, out)
    assert out[:, 0].tolist() == [10.0, 15.0, 20.0, 30.0]
    assert math.isnan(out[0, 1]) and math.isnan(out[1, 1])
    assert out[2:, 1].tolist() == [4.0, 6.0]
