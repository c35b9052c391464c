"""Capacity Estimator: the MST search finds the testbed's true maximum within the paper's tolerance."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.streambed import EstimationError, EstimatorSettings, estimate_capacity, is_sustainable
from simulator.dag import DagTestbed, DagTestbedSettings

TOLERANCE = EstimatorSettings().tolerance
# The search stops within 1 % of its last target, and a probe passes at 99 % of its target, so the
# MST may sit up to about two tolerances from the true maximum.
BOUND = 2 * TOLERANCE + 0.005


@dataclass(frozen=True)
class FluidMeasurement:
    seconds: int
    achieved_rate: float
    backpressure: float
    lag_growth: float
    operators: tuple[Any, ...] = ()


@dataclass
class FluidRun:
    """A test fake of a testbed run: a queue drained at a fixed capacity, with exact arithmetic."""

    capacity: float
    rate: float | None = 0.0
    queue: float = 0.0
    history: list[tuple[float, float, float]] = field(default_factory=list)

    def set_rate(self, rate: float | None) -> None:
        self.rate = rate

    def advance(self, seconds: int) -> None:
        for _ in range(seconds):
            arrivals = self.capacity if self.rate is None else self.rate
            self.queue += arrivals
            served = min(self.queue, self.capacity)
            self.queue -= served
            if self.queue <= 1e-9 * self.capacity:
                self.queue = 0.0  # rounding of rate sums, not a backlog
            blocked = 0.0 if self.queue == 0 else 1.0
            self.history.append((served, self.queue, blocked))

    def measure(self, seconds: int) -> FluidMeasurement:
        window = self.history[-seconds:]
        start = self.history[-seconds - 1][1] if len(self.history) > seconds else 0.0
        return FluidMeasurement(
            seconds=len(window),
            achieved_rate=sum(s for s, _, _ in window) / len(window),
            backpressure=sum(b for _, _, b in window) / len(window),
            lag_growth=(window[-1][1] - start) / len(window),
        )

    @property
    def backlog(self) -> float:
        return self.queue


@given(capacity=st.floats(10.0, 1e8))
def test_the_search_lands_within_tolerance_of_an_exact_capacity(capacity: float) -> None:
    estimate = estimate_capacity(FluidRun(capacity))
    assert estimate.mst <= capacity * (1 + 1e-9)
    assert estimate.mst >= capacity * (1 - BOUND)
    assert all(p.sustainable == (p.target_rate <= capacity * (1 + 1e-9)) for p in estimate.probes)


def test_the_search_descends_when_the_warmup_overestimates() -> None:
    class Optimistic(FluidRun):
        """Warmup absorbs 30 % more than the job sustains (empty buffers), as the paper warns."""

        def measure(self, seconds: int) -> FluidMeasurement:
            m = super().measure(seconds)
            if self.rate is None:
                return FluidMeasurement(m.seconds, 1.3 * self.capacity, 0.0, 0.0)
            return m

    estimate = estimate_capacity(Optimistic(50_000.0))
    assert estimate.mst == pytest.approx(50_000.0, rel=BOUND)
    assert estimate.probes[0].sustainable is False


def test_a_job_that_sustains_nothing_is_an_error() -> None:
    class Broken(FluidRun):
        def measure(self, seconds: int) -> FluidMeasurement:
            m = super().measure(seconds)
            return FluidMeasurement(m.seconds, m.achieved_rate, 1.0, m.lag_growth)

    with pytest.raises(EstimationError, match="no probe was sustainable"):
        estimate_capacity(Broken(1000.0))
    with pytest.raises(EstimationError, match="accepted no record"):
        estimate_capacity(FluidRun(0.0))


def test_sustainability_needs_rate_flat_backlog_and_little_backpressure() -> None:
    settings = EstimatorSettings()
    assert is_sustainable(FluidMeasurement(30, 995.0, 0.0, 5.0), 1000.0, settings)
    assert not is_sustainable(FluidMeasurement(30, 980.0, 0.0, 0.0), 1000.0, settings)
    assert not is_sustainable(FluidMeasurement(30, 1000.0, 0.0, 20.0), 1000.0, settings)
    assert not is_sustainable(FluidMeasurement(30, 1000.0, 0.5, 0.0), 1000.0, settings)


@pytest.mark.parametrize(
    ("parallelism", "memory_mb"),
    [((1, 1, 1), 2048.0), ((1, 4, 1), 2048.0), ((2, 8, 1), 512.0), ((3, 12, 1), 4096.0)],
)
def test_finds_the_simulated_jobs_true_maximum_within_tolerance(parallelism: tuple[int, ...], memory_mb: float) -> None:
    testbed = DagTestbed()
    estimate = estimate_capacity(testbed.deploy(parallelism, memory_mb, seed=11))
    true = testbed.true_capacity(parallelism, memory_mb)
    assert estimate.mst == pytest.approx(true, rel=BOUND)
    assert estimate.probes[-1].target_rate > 0 and len(estimate.probes) <= EstimatorSettings().max_iterations


def test_the_mst_is_sustained_over_a_long_run_and_a_higher_rate_is_not() -> None:
    testbed = DagTestbed(settings=DagTestbedSettings(seed=5))
    parallelism, memory = (2, 8, 1), 1024.0
    mst = estimate_capacity(testbed.deploy(parallelism, memory, seed=1)).mst

    def backlog_growth(rate: float) -> float:
        run = testbed.deploy(parallelism, memory, seed=2)
        run.set_rate(rate)
        run.advance(600)
        return run.measure(300).lag_growth / rate

    assert backlog_growth(0.98 * mst) < 0.002
    assert backlog_growth((1 + BOUND) * mst) > 0.005


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="tolerance"):
        EstimatorSettings(tolerance=0.0)
    with pytest.raises(ValueError, match="cooldown_max_s"):
        EstimatorSettings(cooldown_s=30, cooldown_max_s=10)


def test_a_fresh_job_per_probe_needs_no_cooldown_and_searches_below_the_saturated_rate() -> None:
    @dataclass
    class Fresh(FluidRun):
        """Every set_rate restarts the job from an empty queue (the Flink testbed's resubmission)."""

        rates: list[float | None] = field(default_factory=list)

        def set_rate(self, rate: float | None) -> None:
            self.rates.append(rate)
            self.queue = 0.0
            super().set_rate(rate)

    settings = EstimatorSettings(cooldown_s=0, cooldown_max_s=0, upper_margin=1.0, lower_fraction=0.8, max_iterations=4)
    run = Fresh(1000.0)
    estimate = estimate_capacity(run, settings)
    # The saturated warmup reads the capacity; a probe there is sustained and the search stops.
    assert estimate.mst == pytest.approx(1000.0) and len(estimate.probes) == 1
    assert run.rates == [None, estimate.probes[0].target_rate]  # warmup, then the probe: no cooldown rate


def test_a_floor_above_the_mst_is_an_error_that_names_it() -> None:
    class Skewed(FluidRun):
        """The warmup reads 30 % above what the job sustains (a skewed job's saturated readers)."""

        def measure(self, seconds: int) -> FluidMeasurement:
            m = super().measure(seconds)
            return FluidMeasurement(m.seconds, 1.3 * self.capacity, 0.0, 0.0) if self.rate is None else m

    settings = EstimatorSettings(cooldown_s=0, cooldown_max_s=0, upper_margin=1.0, lower_fraction=0.9, max_iterations=3)
    with pytest.raises(EstimationError, match="below the floor"):
        estimate_capacity(Skewed(1000.0), settings)
    # With the floor low enough the search descends to the MST.
    estimate = estimate_capacity(Skewed(1000.0), EstimatorSettings(upper_margin=1.0, lower_fraction=0.5))
    assert estimate.mst == pytest.approx(1000.0, rel=BOUND)
    with pytest.raises(ValueError, match="lower_fraction"):
        EstimatorSettings(lower_fraction=1.0)
