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


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # a rate no counter holds: the line of the peak is named, wherever it is
        ("time_s,rate\n0,1\n60,1e30\n120,1\n", ":3: rate 1e+30"),
        # a rate that fits a second but not the whole trace: 1e6/s for 1e10 s is 1e16 records
        ("time_s,rate\n0,1e6\n10000000000,1\n", ":2: rate 1e+06"),
        # six hours at 1e12/s: 2.2e16 records
        ("time_s,rate\n0,5\n21600,1e12\n", ":3: rate 1e+12 for the trace's 21601 s"),
    ],
)
def test_rates_beyond_exact_counting(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "huge.csv"
    path.write_text(text)
    with pytest.raises(TraceError) as error:
        load_trace(path)
    assert str(path) in str(error.value)
    assert message in str(error.value)
    assert "2**52" in str(error.value)


def test_magnitude_bound_is_the_whole_trace(tmp_path: Path) -> None:
    from simulator.trace import MAX_TRACE_RECORDS

    limit = MAX_TRACE_RECORDS / 21601  # six hours, both ends sampled
    path = tmp_path / "edge.csv"
    path.write_text(f"time_s,rate\n0,1\n21600,{limit * 0.999!r}\n")
    assert load_trace(path).peak == pytest.approx(limit * 0.999)
    path.write_text(f"time_s,rate\n0,1\n21600,{limit * 1.001!r}\n")
    with pytest.raises(TraceError, match=r"edge\.csv:3: "):
        load_trace(path)


def test_largest_accepted_rate_replays_exactly(tmp_path: Path) -> None:
    """At the bound every record is still counted: produced is the rate times the seconds, and the
    accounting identity holds."""
    from simulator import SimulatedFlinkJob, SimulatorSettings
    from simulator.trace import MAX_TRACE_RECORDS

    rate = MAX_TRACE_RECORDS // 61  # an integer, so rate * 61 below is exact
    path = tmp_path / "edge.csv"
    path.write_text(f"time_s,rate\n0,{rate}\n60,{rate}\n")
    settings = SimulatorSettings(workload_noise=0.0)
    job = SimulatedFlinkJob(load_trace(path), settings, parallelism=4)
    job.run_until(61)
    accounting = job.accounting
    # each partition keeps a fractional carry below one record
    assert 0 <= rate * 61 - accounting.produced < settings.partitions
    assert accounting.lost == 0
