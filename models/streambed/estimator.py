"""Capacity Estimator (StreamBed §IV): the maximum sustainable throughput (MST) of one configuration.

A warmup at the highest rate the job accepts fills buffers and window state and gives the saturated
throughput; a dichotomous search then tries fixed target rates. Each probe starts with a cooldown at
a low rate until the backlog is drained, injects the target for a local ramp-up, and only then
observes. A probe succeeds when the source injects at least ``success_ratio`` (99 %) of the target,
the backlog does not grow, and the source's backpressure stays below a threshold. On success the
lower bound rises to the target, otherwise the upper bound falls to it; the next target is the
midpoint, and the search stops when it moves by less than ``tolerance`` (1 %) or after
``max_iterations``. The MST is the highest successful target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from models.streambed.testbed import Measurement, TestbedRun


class EstimationError(RuntimeError):
    """The testbed sustained no rate at all, or the search was given impossible settings."""


@dataclass(frozen=True)
class EstimatorSettings:
    """Phases and thresholds of one capacity estimation.

    The paper uses a 120 s warmup, 15 s cooldown, 60 s local ramp-up and 30 s observation for its
    simple queries; the ramp-up here is 30 s because the simulated testbed has no JVM warm-up or
    state-backend compaction to wait for (its window state refills within one 10 s window).
    """

    warmup_s: int = 120
    cooldown_s: int = 15
    """Shortest cooldown before a probe, seconds; 0 skips the cooldown, for testbeds that start every
    probe from a fresh job with no backlog or saturation left over from the previous one."""
    cooldown_max_s: int = 300
    """Longest cooldown: a backlog that is still not drained by then is left (and will fail the probe)."""
    cooldown_fraction: float = 0.1
    """Cooldown rate as a fraction of the warmup throughput (low but not zero, as in the paper)."""
    rampup_s: int = 30
    observe_s: int = 30
    success_ratio: float = 0.99
    backpressure_threshold: float = 0.1
    tolerance: float = 0.01
    """Stop when the next target is within this fraction of the previous one."""
    max_iterations: int = 10
    upper_margin: float = 1.25
    """Upper bound of the search as a multiple of the saturated warmup throughput."""
    lower_fraction: float = 0.0
    """Lower bound of the search as a fraction of the saturated warmup throughput (0: the paper's).

    A testbed whose warmup reads the saturated throughput itself (a fresh job per probe, so no empty
    buffers or window state inflate it) can start the bracket just below it and spend its few
    probes near the MST; the bound is not tested, so a job that sustains less finds no MST.
    """

    def __post_init__(self) -> None:
        if min(self.warmup_s, self.rampup_s, self.observe_s) < 1 or self.cooldown_s < 0:
            raise ValueError("warmup_s, rampup_s and observe_s must be >= 1 s, cooldown_s >= 0")
        if self.cooldown_max_s < self.cooldown_s:
            raise ValueError("cooldown_max_s must be >= cooldown_s")
        if not 0 < self.success_ratio <= 1 or not 0 < self.tolerance < 1 or self.max_iterations < 1:
            raise ValueError("success_ratio in (0, 1], tolerance in (0, 1), max_iterations >= 1")
        if self.upper_margin < 1 or not 0 < self.cooldown_fraction < 1:
            raise ValueError("upper_margin >= 1 and cooldown_fraction in (0, 1)")
        if not 0 <= self.lower_fraction < 1:
            raise ValueError("lower_fraction must be in [0, 1)")


@dataclass(frozen=True)
class Probe:
    """One tested target rate and its verdict."""

    target_rate: float
    achieved_rate: float
    lag_growth: float
    backpressure: float
    sustainable: bool


@dataclass(frozen=True)
class CapacityEstimate:
    """The MST of a configuration and the metrics of its highest sustainable probe."""

    mst: float
    probes: tuple[Probe, ...]
    measurement: Measurement
    """Operator metrics at the MST (busyness and true rates feed the Configuration Optimizer)."""
    warmup_rate: float
    """Throughput at saturation during warmup."""
    simulated_s: int
    """Testbed seconds the estimation took."""


def is_sustainable(measurement: Measurement, target_rate: float, settings: EstimatorSettings) -> bool:
    """Whether a probe at ``target_rate`` kept up: rate reached, backlog flat, little backpressure."""
    slack = (1.0 - settings.success_ratio) * target_rate
    return (
        measurement.achieved_rate >= settings.success_ratio * target_rate
        and measurement.lag_growth <= slack
        and measurement.backpressure <= settings.backpressure_threshold
    )


def estimate_capacity(run: TestbedRun, settings: EstimatorSettings | None = None) -> CapacityEstimate:
    """Search the MST of a deployed configuration by dichotomy over fixed target rates."""
    settings = settings or EstimatorSettings()
    elapsed = 0
    run.set_rate(None)
    run.advance(settings.warmup_s)
    elapsed += settings.warmup_s
    warm = run.measure(min(settings.observe_s, settings.warmup_s))
    warmup_rate = warm.achieved_rate
    if warmup_rate <= 0:
        raise EstimationError("the job accepted no record during warmup: the configuration cannot run")

    floor = settings.lower_fraction * warmup_rate
    low, high = floor, settings.upper_margin * warmup_rate
    target = warmup_rate
    probes: list[Probe] = []
    best: Measurement | None = None
    for _ in range(settings.max_iterations):
        elapsed += _cool_down(run, settings.cooldown_fraction * warmup_rate, settings)
        run.set_rate(target)
        run.advance(settings.rampup_s + settings.observe_s)
        elapsed += settings.rampup_s + settings.observe_s
        measurement = run.measure(settings.observe_s)
        ok = is_sustainable(measurement, target, settings)
        probes.append(Probe(target, measurement.achieved_rate, measurement.lag_growth, measurement.backpressure, ok))
        if ok:
            low, best = target, measurement
        else:
            high = target
        following = (low + high) / 2
        if abs(following - target) <= settings.tolerance * target:
            break
        target = following
    if best is None:
        raise _nothing_sustainable(probes, floor, warmup_rate, settings)
    return CapacityEstimate(
        mst=low, probes=tuple(probes), measurement=best, warmup_rate=warmup_rate, simulated_s=elapsed
    )


def _nothing_sustainable(
    probes: list[Probe], floor: float, warmup_rate: float, settings: EstimatorSettings
) -> EstimationError:
    """The error of a search in which no probe was sustainable: the floor is too high, or the job cannot run."""
    lowest = min(p.target_rate for p in probes)
    if floor > 0:
        return EstimationError(
            f"no probe was sustainable (lowest target {lowest:.1f} records/s, search floor "
            f"{settings.lower_fraction:g} x the saturated {warmup_rate:.1f} records/s): the MST is below "
            "the floor; lower it"
        )
    return EstimationError(
        f"no probe was sustainable (lowest target {lowest:.1f} records/s): "
        "the configuration cannot keep up even at a small fraction of its saturated throughput"
    )


def _cool_down(run: TestbedRun, rate: float, settings: EstimatorSettings) -> int:
    """Inject a low rate until the backlog of the previous probe is drained; returns seconds spent."""
    if settings.cooldown_s == 0:
        return 0
    run.set_rate(rate)
    run.advance(settings.cooldown_s)
    spent = settings.cooldown_s
    # Poll in short steps with a deadline until the backlog stops shrinking: an overloaded probe can
    # leave minutes of backlog, and at the cooldown rate a few seconds of input are always queued.
    previous = math.inf
    while spent < settings.cooldown_max_s:
        backlog = run.backlog
        if backlog >= 0.95 * previous:
            break
        previous = backlog
        run.advance(5)
        spent += 5
    return spent
