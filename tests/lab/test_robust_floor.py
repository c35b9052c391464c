"""The failure-robust floor (``benchmarks.bench_robust_floor``): what it counts, on traces whose answer is known."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.bench_robust_floor import floor_series, ready_optimal, worker_hours
from lab.corpus import CorpusTrace
from lab.settings import load_lab_settings
from simulator import SimulatedFlinkJob, load_trace


def _trace(tmp_path: Path, rate: float) -> CorpusTrace:
    path = tmp_path / "flat.csv"
    path.write_text("time_s,rate\n0,{r}\n7200,{r}\n".format(r=rate))
    return CorpusTrace("flat", "flat", "dev", path, "test", "test")


@pytest.mark.parametrize("fraction", [0.5, 0.97])
def test_the_floor_carries_the_workload_and_keeps_room_for_a_failure(tmp_path: Path, fraction: float) -> None:
    """A flat workload at a fraction of 6 workers' capacity: the carry floor is the fewest workers whose capacity
    holds it all the time; the failure-robust floor is never below it, and above it when the spare capacity of
    that scale-out cannot work a failure's backlog off within the target (3 % headroom cannot, half can)."""
    settings = load_lab_settings(None, {"policy": "daedalus"})
    probe = _trace(tmp_path, 1.0)
    env = SimulatedFlinkJob(load_trace(probe.path), settings.simulator).environment
    rate = fraction * env.true_capacity(6)
    trace = _trace(tmp_path, rate)
    carry_floor, robust_floor = floor_series(trace, hours=1.0)
    carry, robust = worker_hours(carry_floor), worker_hours(robust_floor)
    # The arrivals vary around the rate (2 % noise), so a scale-out just above the rate is not always enough.
    fewest = min(n for n in range(1, 17) if env.true_capacity(n) >= rate * 1.1)
    assert carry <= fewest
    assert robust >= carry
    if fraction < 0.9:
        assert robust == pytest.approx(carry)
    else:
        assert robust > carry


def test_the_failure_ready_optimal_pays_for_its_rescales_and_never_runs_below_the_floor(tmp_path: Path) -> None:
    """A step from a third to nine tenths of 6 workers' capacity and back: the failure-ready optimal is held to the
    failure-robust floor at every loop, so it spends at least the floor, misses nothing (it knows the workload),
    and rescales to follow the step. Where a rescale restarts the job it pays each restart's downtime at the
    workers it stops, so it spends more than where a rescale is in place."""
    settings = load_lab_settings(None, {"policy": "daedalus"})
    env = SimulatedFlinkJob(load_trace(_trace(tmp_path, 1.0).path), settings.simulator).environment
    low, high = 0.3 * env.true_capacity(6), 0.9 * env.true_capacity(6)
    path = tmp_path / "step.csv"
    path.write_text(f"time_s,rate\n0,{low}\n1800,{low}\n1801,{high}\n4500,{high}\n4501,{low}\n7200,{low}\n")
    trace = CorpusTrace("step", "step", "dev", path, "test", "test")
    _, floor = floor_series(trace, 2.0)
    robust = worker_hours(floor)
    spent = {}
    for cost in ("restart", "in-place"):
        name, seed, summary = ready_optimal(trace, floor, 2.0, 1.0, None, cost)
        assert name == "step" and seed == settings.simulator.failure_schedule_seed
        assert summary["worker_hours"] >= robust
        assert summary["slo_misses"] == 0
        assert summary["rescales"] >= 2
        spent[cost] = summary["worker_hours"]
    assert spent["restart"] > spent["in-place"], spent
