"""Trace loading: the shipped traces load; bad files fail with file, line and reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simulator import TraceError, load_trace
from tests.conftest import TRACES


@pytest.mark.parametrize("name", ["bank_calls", "taylor"])
def test_shipped_traces(name: str) -> None:
    trace = load_trace(TRACES / f"{name}.csv")
    assert trace.name == name
    assert trace.peak == pytest.approx(120_000, rel=0.01)
    assert np.all(np.diff(trace.times) == 60)
    assert trace.duration_s >= 6 * 3600


def test_interpolation_is_linear() -> None:
    from simulator import Trace

    trace = Trace("t", np.array([0.0, 10.0]), np.array([100.0, 200.0]))
    assert trace.rate_at(5.0) == pytest.approx(150.0)
    assert list(trace.per_second(0, 3)) == pytest.approx([100.0, 110.0, 120.0])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", ":1: empty file"),
        ("t,r\n0,1\n", ":1: expected header 'time_s,rate'"),
        ("time_s,rate\n0,1\n60,abc\n", ":3: non-numeric value"),
        ("time_s,rate\n0,1\n60,-4\n", ":3: negative rate -4"),
        ("time_s,rate\n0,1\n60,2\n30,3\n", ":4: times must increase"),
        ("time_s,rate\n0,1\n60,2,3\n", ":3: expected 2 columns"),
        ("time_s,rate\n0,nan\n", ":2: value is not finite"),
        ("time_s,rate\n0,1\n", "needs at least 2 points"),
    ],
)
def test_bad_traces(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(TraceError) as error:
        load_trace(path)
    assert str(path) in str(error.value)
    assert message in str(error.value)
