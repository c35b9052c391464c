"""Predicted against measured recoveries (``benchmarks.recovery_errors``): what counts as the prediction."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks.bench_daedalus_ablation import run_variant
from lab.corpus import CorpusTrace


def test_each_stop_is_judged_by_its_own_prediction_and_the_planners_bound_is_beside_it(tmp_path: Path) -> None:
    """A step up, a fall and two failures an hour: at every stop the headline prediction is the analyzer's expected
    recovery for that stop (the one the watch compares with), which the benchmark recomputes from the inputs it
    recorded; the planner's check for the same scale-out is never faster (the slower of a rescale and a failure
    there, and a scale-in's bad case)."""
    path = tmp_path / "steps.csv"
    path.write_text("time_s,rate\n0,40000\n1199,40000\n1200,90000\n2399,90000\n2400,50000\n3600,50000\n")
    trace = CorpusTrace("steps", "steps", "dev", path, "test", "test")
    _, _, _, summary, _ = run_variant(trace, "daedalus", 1.0, 2.0, recovery_errors=True)
    rows = summary["recovery_errors"]
    assert {row["kind"] for row in rows} == {"rescale", "failure"}, rows
    for row in rows:
        assert row["predicted"] == pytest.approx(row["recomputed"], rel=1e-9), row
        assert row["planned"] >= row["predicted"] or math.isclose(row["planned"], row["predicted"], rel_tol=1e-9), row
    assert any(row["planned"] > row["predicted"] * 1.01 for row in rows), "some check asked more than the stop's own"
