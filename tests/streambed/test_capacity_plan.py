"""The StreamBed runner: drives CE, CO and RE on a testbed and writes a loadable capacity model."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from lab.capacity_plan import CapacityPlanError, RunReport, plan_capacity
from models.streambed import load_capacity_prior, read_capacity_model
from simulator.dag import DagTestbed
from tests.streambed.test_estimator import FluidMeasurement, FluidRun


@dataclass(frozen=True)
class FakeOperatorMetrics:
    name: str
    parallelism: int
    input_rate: float
    busyness: float
    true_rate_per_task: float


class PipelineRun(FluidRun):
    """A fluid queue whose capacity is the DS2 bound of a linear pipeline; reports operator metrics."""

    def __init__(self, testbed: LinearPipeline, parallelism: tuple[int, ...]) -> None:
        super().__init__(capacity=testbed.capacity(parallelism))
        self.testbed = testbed
        self.parallelism = parallelism

    def measure(self, seconds: int) -> FluidMeasurement:
        m = super().measure(seconds)
        operators = tuple(
            FakeOperatorMetrics(
                name,
                p,
                m.achieved_rate * ratio,
                m.achieved_rate * ratio / (p * rate),
                rate,
            )
            for name, p, rate, ratio in zip(
                self.testbed.operator_names, self.parallelism, self.testbed.rates, self.testbed.ratios
            )
        )
        return FluidMeasurement(m.seconds, m.achieved_rate, m.backpressure, m.lag_growth, operators)


class LinearPipeline:
    """A test fake of a testbed whose operators scale perfectly linearly."""

    operator_names = ("parse", "aggregate", "sink")
    rates = (50_000.0, 10_000.0, 200_000.0)
    ratios = (1.0, 0.5, 0.1)

    def __init__(self) -> None:
        self.deployments: list[tuple[tuple[int, ...], float]] = []

    def capacity(self, parallelism: tuple[int, ...]) -> float:
        return min(r * p / a for r, p, a in zip(self.rates, parallelism, self.ratios))

    def deploy(self, parallelism: Sequence[int], memory_mb: float, *, seed: int | None = None) -> PipelineRun:
        self.deployments.append((tuple(parallelism), memory_mb))
        return PipelineRun(self, tuple(parallelism))


def test_a_linear_testbed_yields_a_linear_model_that_extrapolates(tmp_path: Path) -> None:
    testbed = LinearPipeline()
    reports: list[RunReport] = []
    model = plan_capacity(
        target_rate=1_000_000.0,
        max_runs=14,
        out_path=tmp_path / "capacity.json",
        progress=reports.append,
        testbed=testbed,
        max_testbed_slots=20,
        memory_profiles_mb=(2048.0,),
        max_scale_out=8,
        slots_per_scale_out=4,
    )
    assert model.surrogate.family == "linear"
    assert [r.index for r in reports] == list(range(1, len(reports) + 1)) and len(reports) <= 14
    assert reports[0].purpose == "single-task" and reports[0].parallelism == (1, 1, 1)
    assert model.testbed_runs == len(testbed.deployments) == len(reports)
    # The single-task run (3 slots) is below the explored budgets (from 6): rates only, not fitted.
    assert [o["explored"] for o in model.observations] == [False] + [True] * (len(reports) - 1)
    assert all(o["task_slots"] >= 6 for o in model.observations if o["explored"])
    # 20x the largest testbed budget: the best integer split there scales like the fitted slope.
    best_at_400 = max(testbed.capacity((p, 400 - p - s, s)) for s in range(1, 20) for p in range(1, 400 - s))
    assert model.surrogate.capacity_at(400, 2048.0) == pytest.approx(best_at_400, rel=0.05)
    slots = model.task_slots_for_target
    assert slots is not None and model.surrogate.capacity_at(slots, 2048.0) >= 1.1 * 1_000_000.0
    assert model.surrogate.capacity_at(slots - 1, 2048.0) < 1.1 * 1_000_000.0
    assert model.extra["scale_out_for_target"] == math.ceil(slots / 4)
    assert sum(model.extra["configuration"].values()) == slots


def test_the_simulated_testbed_plan_writes_a_prior_the_agent_can_load(tmp_path: Path) -> None:
    out = tmp_path / "models" / "capacity.json"
    reports: list[RunReport] = []
    model = plan_capacity(
        target_rate=150_000.0,
        max_runs=7,
        out_path=out,
        progress=reports.append,
        seed=3,
        max_testbed_slots=10,
        memory_profiles_mb=(1024.0, 4096.0),
        max_scale_out=12,
    )
    assert 3 <= len(reports) <= 7
    assert read_capacity_model(out) == model
    prior = load_capacity_prior(out)
    assert sorted(prior) == list(range(1, 13))
    assert all(value >= 0 for value in prior.values())
    # Every budget run measured close to the testbed's own analytic capacity of its configuration.
    testbed = DagTestbed()
    for report in reports:
        true = DagTestbed().true_capacity(report.parallelism, report.memory_mb)
        assert report.mst == pytest.approx(true, rel=0.05), report
    assert testbed.operator_names == ("map-filter", "window-aggregate", "sink")
    assert model.validation["selection"] == "loocv"
    assert set(model.validation["families"]) == {"linear", "logarithmic", "sqrt"}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"target_rate": 0.0}, "target rate"),
        ({"target_rate": math.nan}, "target rate"),
        ({"max_runs": 2}, "at least 3"),
        ({"max_testbed_slots": 2}, "at least 3 task slots"),
        ({"min_testbed_slots": 2}, "min testbed slots"),
        ({"memory_profiles_mb": (0.0,)}, "memory profiles"),
        ({"max_scale_out": 0}, "at least 1"),
    ],
)
def test_bad_arguments_are_one_line_errors(tmp_path: Path, arguments: dict[str, object], message: str) -> None:
    base: dict[str, object] = {"target_rate": 1000.0, "max_runs": 5, "out_path": tmp_path / "c.json"}
    base.update(arguments)
    with pytest.raises(CapacityPlanError, match=message):
        plan_capacity(**base)  # type: ignore[arg-type]
    assert not (tmp_path / "c.json").exists()
