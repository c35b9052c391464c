"""RecoveryPredictor: hand-computed cases, inversion of measured recoveries, persistence, simulator."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from models.recovery import RecoveryPredictor, ready_workload, recovery_time
from simulator import SimulatedFlinkJob, Trace
from simulator.config import SimulatorSettings


def test_hand_computed_constant_workload() -> None:
    # Backlog = the expected replay (half of 10 s at 100/s) + 30 s downtime at 100/s = 3500; spare 100/s
    # brings it down to one second of input (100) 34 s after the restart.
    predictor = RecoveryPredictor(checkpoint_interval_s=10, downtime_rescale_prior_s=30, downtime_failure_prior_s=15)
    rt = predictor.predict(200.0, np.full(900, 100.0), 100.0, kind="rescale", parallelism=4)
    assert rt == pytest.approx(64.0)
    # Failure prior 15 s: backlog 500 + 1500 = 2000 -> 19 s after restart.
    assert predictor.predict(200.0, np.full(900, 100.0), 100.0, kind="failure", parallelism=4) == pytest.approx(34.0)


def test_the_bad_case_replays_a_whole_interval_over_the_rise_and_is_not_learned_from() -> None:
    predictor = RecoveryPredictor(checkpoint_interval_s=10, downtime_rescale_prior_s=30, downtime_failure_prior_s=15)
    # Flat: the whole interval (1000) + 30 s downtime at 100/s = 4000; spare 100/s, down to 100 in 39 s.
    flat = np.full(900, 100.0)
    assert predictor.predict_bad_case(200.0, flat, 100.0, parallelism=4, current=6) == pytest.approx(69.0)
    # The rise envelope's arrivals lengthen it; never when they reach the capacity.
    rising = np.linspace(100.0, 150.0, 900)
    assert predictor.predict_bad_case(200.0, rising, 100.0, parallelism=4, current=6) > 69.0
    assert predictor.predict_bad_case(200.0, np.full(900, 200.0), 100.0, parallelism=4, current=6) == math.inf
    # A stop at a random moment under the rise instead: half an interval replayed, the expected rescale's 64 s flat.
    assert predictor.predict_bad_case(200.0, flat, 100.0, parallelism=4, current=6, whole_interval=False) == (
        pytest.approx(64.0)
    )
    # A what-if: the recovery a stop is later measured against stays the expected one.
    predictor.predict(200.0, flat, 100.0, kind="rescale", parallelism=4)
    predictor.predict_bad_case(200.0, rising, 100.0, parallelism=4, current=6)
    assert predictor.observe_recovery(kind="rescale", parallelism=4, measured_s=64.0) == pytest.approx(30.0, abs=1e-6)


def test_rising_forecast_takes_longer_and_never_is_inf() -> None:
    predictor = RecoveryPredictor(10, 30, 15)
    flat = predictor.predict(200.0, np.full(900, 100.0), 100.0, parallelism=2)
    rising = predictor.predict(200.0, np.linspace(100.0, 190.0, 900), 100.0, parallelism=2)
    assert rising > flat
    assert predictor.predict(100.0, np.full(900, 100.0), 100.0, parallelism=2) == math.inf
    assert predictor.predict(None, np.full(900, 100.0), 100.0, parallelism=2) == math.inf
    assert predictor.predict(0.0, np.full(900, 100.0), 100.0, parallelism=2) == math.inf


def test_beyond_the_horizon_the_last_value_persists() -> None:
    # 60 s horizon only; recovery at 69 s (4000 records at restart, down to 100 at 100/s spare) needs the tail.
    assert recovery_time(capacity=200.0, forecast=np.full(60, 100.0), replay_records=1000.0, downtime_s=30.0) == (
        pytest.approx(69.0)
    )


def test_fractional_crossing_is_interpolated() -> None:
    # Backlog 250 at spare 100/s, caught up at one second of input (100): 1.5 s after a zero downtime.
    assert recovery_time(capacity=200.0, forecast=np.full(10, 100.0), replay_records=250.0, downtime_s=0.0) == (
        pytest.approx(1.5)
    )


def test_observe_recovery_inverts_the_prediction() -> None:
    predictor = RecoveryPredictor(10, 30, 15)
    predictor.predict(200.0, np.full(900, 100.0), 100.0, kind="rescale", parallelism=6)
    # measured 90 = D + (500 + 100 D - 100) / 100  ->  D = 43
    assert predictor.observe_recovery(kind="rescale", parallelism=6, measured_s=90.0) == pytest.approx(43.0, abs=1e-6)
    assert predictor.downtime_with_source("rescale", 6) == (pytest.approx(43.0), "measured")
    assert predictor.predict(200.0, np.full(900, 100.0), 100.0, kind="rescale", parallelism=6) == pytest.approx(90.0)
    # Other scale-outs use the kind mean until a second scale-out gives a line.
    assert predictor.downtime_with_source("rescale", 3)[1] == "kind-mean"
    assert predictor.downtime_with_source("failure", 6) == (15.0, "prior")


def test_downtime_line_over_scale_outs() -> None:
    predictor = RecoveryPredictor(10, 30, 15)
    for n in (2, 4, 8):
        predictor.observe_downtime(kind="rescale", parallelism=n, downtime_s=10 + 1.5 * n)
    value, source = predictor.downtime_with_source("rescale", 6)
    assert source == "interpolated"
    assert value == pytest.approx(19.0)


def test_the_downtime_line_is_read_between_the_scale_outs_measured() -> None:
    """Two neighbours 23 s apart make a steep line: below and above them it reads the nearest one's value, not the
    4 s it extrapolates one scale-out down (a restart taken for an in-place rescale) nor 96 s three up."""
    predictor = RecoveryPredictor(10, 30, 15)
    predictor.observe_downtime(kind="rescale", parallelism=13, downtime_s=27.0)
    predictor.observe_downtime(kind="rescale", parallelism=14, downtime_s=50.0)
    assert predictor.downtime_with_source("rescale", 12) == pytest.approx((27.0, "interpolated"))
    assert predictor.downtime_with_source("rescale", 1)[0] == pytest.approx(27.0)
    assert predictor.downtime_with_source("rescale", 16)[0] == pytest.approx(50.0)


def test_observe_without_context_or_with_bad_measure_is_counted() -> None:
    predictor = RecoveryPredictor()
    assert predictor.observe_recovery(kind="failure", parallelism=3, measured_s=50.0) is None
    assert predictor.observe_recovery(kind="failure", parallelism=3, measured_s=math.nan) is None
    assert predictor.unexplained == 2
    explicit = predictor.observe_recovery(
        kind="failure",
        parallelism=3,
        measured_s=50.0,
        capacity=200.0,
        forecast=np.full(900, 100.0),
        recent_workload_rate=100.0,
    )
    assert explicit == pytest.approx(23.0, abs=1e-6)  # 50 = D + (500 + 100 D - 100) / 100
    with pytest.raises(ValueError, match="kind"):
        predictor.predict(1.0, [1.0], 1.0, kind="restart", parallelism=1)


def test_round_trip() -> None:
    predictor = RecoveryPredictor(5, 20, 10)
    predictor.observe_downtime(kind="rescale", parallelism=4, downtime_s=25.0)
    predictor.observe_downtime(kind="failure", parallelism=2, downtime_s=8.0)
    copy = RecoveryPredictor.from_dict(predictor.to_dict())
    assert copy.to_dict() == predictor.to_dict()
    forecast = np.full(900, 100.0)
    for kind in ("rescale", "failure"):
        for n in (2, 4, 7):
            assert copy.predict(300.0, forecast, 100.0, kind=kind, parallelism=n) == predictor.predict(
                300.0, forecast, 100.0, kind=kind, parallelism=n
            )


def _caught_up(job: SimulatedFlinkJob, start: int) -> float:
    """Seconds from the stop at ``start`` until the lag is within one second of input again (the SLO's count)."""
    window = job.window(start, job.recorded_seconds)
    resume = job.restarts[-1].downtime_s
    caught_up = np.flatnonzero(window.lag[resume:] <= np.maximum(window.workload[resume:], 1.0))
    return float(resume + caught_up[0]) if caught_up.size else math.inf


def test_prediction_matches_simulated_rescales_with_known_downtime() -> None:
    # Constant workload, no jitter, the true downtime (10 + 1.5 * max(n)) given: what is checked is
    # the backlog and catch-up arithmetic against the simulator's queues, worker by worker.
    config = SimulatorSettings(partitions=12, initial_parallelism=4, downtime_jitter=0.0, workload_noise=0.0)
    trace = Trace("flat", np.array([0.0, 4000.0]), np.array([30000.0, 30000.0]))
    job = SimulatedFlinkJob(trace, config)
    predictor = RecoveryPredictor(checkpoint_interval_s=config.checkpoint_interval_s)
    forecast = np.full(900, 30000.0)
    t = 300
    for target in (6, 4, 8, 5):
        job.run_until(t)
        lag_before = float(job.window(t - 1, t).lag[0])
        downtime = config.rescale_downtime_base_s + config.rescale_downtime_per_worker_s * max(target, job.parallelism)
        capacity = job.true_capacity(target)
        profile = (job.shares(target), job.worker_capacity[:target])
        expected = predictor.predict(
            capacity,
            forecast,
            30000.0,
            kind="rescale",
            parallelism=target,
            downtime_s=downtime,
            current_lag=lag_before,
            profile=profile,
        )
        job.rescale(target)
        job.run_until(t + 400)
        actual = _caught_up(job, t)
        # With the replay that actually happened (known only after the stop) the arithmetic is tight...
        replayed = job.restarts[-1].replayed_records
        exact = recovery_time(
            capacity=capacity,
            forecast=forecast,
            replay_records=lag_before + replayed,
            downtime_s=downtime,
            profile=profile,
        )
        assert exact == pytest.approx(actual, abs=2.0), (target, exact, actual)
        # ...and before the stop, the replay is somewhere between none and a whole checkpoint interval:
        # the expected one (half) is between the two.
        bounds = [
            recovery_time(
                capacity=capacity,
                forecast=forecast,
                replay_records=lag_before + 30000.0 * interval,
                downtime_s=downtime,
                profile=profile,
            )
            for interval in (0, config.checkpoint_interval_s)
        ]
        assert bounds[0] - 2.0 <= actual <= bounds[1] + 2.0, (target, bounds, actual)
        assert bounds[0] < expected < bounds[1]
        t += 400


def test_workers_with_spare_capacity_drain_their_share_first() -> None:
    """12 partitions on 5 workers: two read three, three read two. The job's capacity is set by the
    busiest, but the others are done with their share of the backlog well before it; the job is
    caught up when what they still hold together is within a second of input."""
    config = SimulatorSettings(partitions=12, initial_parallelism=6, downtime_jitter=0.0, workload_noise=0.0)
    job = SimulatedFlinkJob(Trace("flat", np.array([0.0, 2000.0]), np.array([48000.0, 48000.0])), config)
    job.run_until(300)
    job.rescale(5)
    job.run_until(800)
    stop = job.restarts[-1]
    backlog = float(job.window(299, 300).lag[0]) + stop.replayed_records
    inputs = {
        "capacity": job.true_capacity(5),
        "forecast": np.full(900, 48000.0),
        "replay_records": backlog,
        "downtime_s": float(stop.downtime_s),
    }
    actual = _caught_up(job, 300)
    by_worker = recovery_time(**inputs, profile=(job.shares(5), job.worker_capacity[:5]))
    assert by_worker == pytest.approx(actual, abs=2.0)
    assert recovery_time(**inputs) > actual + 10, "one worker at the bottleneck's rate drains everything last"


@settings(max_examples=100, deadline=None)
@given(
    st.floats(min_value=1.0, max_value=1e6),
    st.lists(st.floats(min_value=0.0, max_value=1e6), min_size=1, max_size=50),
    st.floats(min_value=0.0, max_value=1e6),
    st.floats(min_value=0.0, max_value=200.0),
    st.floats(min_value=0.0, max_value=50.0),
)
def test_recovery_time_grows_with_downtime_and_shrinks_with_capacity(
    capacity: float, forecast: list[float], replay: float, downtime: float, extra: float
) -> None:
    series = np.array(forecast)
    base = recovery_time(capacity=capacity, forecast=series, replay_records=replay, downtime_s=downtime)
    assert base >= downtime
    longer = recovery_time(capacity=capacity, forecast=series, replay_records=replay, downtime_s=downtime + extra)
    faster = recovery_time(capacity=capacity * 1.5, forecast=series, replay_records=replay, downtime_s=downtime)
    if math.isinf(base):
        assert math.isinf(longer)
    else:
        assert longer >= base - 1e-6 * max(1.0, base)
        assert faster <= base + 1e-6 * max(1.0, base)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=30),
    st.floats(allow_nan=True, allow_infinity=True),
)
def test_predict_never_raises_on_garbage(forecast: list[float], rate: float) -> None:
    value = RecoveryPredictor().predict(1000.0, forecast, rate, parallelism=3)
    assert value >= 0 or math.isinf(value)


def test_a_rescale_downtime_is_kept_under_the_larger_scale_out() -> None:
    """A scale-in from 16 to 8 restarts as many tasks as a scale-out from 8 to 16, not as one from 4 to 8."""
    predictor = RecoveryPredictor(10, 30, 15)
    predictor.observe_downtime(kind="rescale", parallelism=8, downtime_s=22.0, current=4)
    predictor.observe_downtime(kind="rescale", parallelism=16, downtime_s=34.0, current=8)
    assert predictor.downtime("rescale", 8, current=16) == pytest.approx(34.0)
    assert predictor.downtime("rescale", 8, current=4) == pytest.approx(22.0)
    assert predictor.downtime("rescale", 16, current=8) == pytest.approx(34.0)
    predictor.observe_downtime(kind="failure", parallelism=8, downtime_s=12.0, current=16)
    assert predictor.downtime_with_source("failure", 8, current=16) == (12.0, "measured"), "a failure stays where it is"


def test_a_backlog_already_waiting_is_the_bottlenecks_to_work_off() -> None:
    """Two workers with equal shares, one twice as fast: a backlog built while running sits with the slow
    one (its partitions fell behind), which drains it at its own spare capacity, not the job's."""
    profile = (np.array([0.5, 0.5]), np.array([600.0, 1200.0]))  # job capacity 1200/s, set by the slow worker
    forecast = np.full(900, 1000.0)
    spread = recovery_time(capacity=1200.0, forecast=forecast, replay_records=20_000.0, downtime_s=0.0, profile=profile)
    held = recovery_time(
        capacity=1200.0, forecast=forecast, replay_records=0.0, downtime_s=0.0, profile=profile, held_records=20_000.0
    )
    # The slow worker's spare is 100/s of its own: 20,000 records less the one second of input (1,000) it may keep.
    assert held == pytest.approx((20_000.0 - 1_000.0) / 100.0, rel=0.01)
    assert held > 1.5 * spread


def _recovery_by_definition(
    capacity: float,
    forecast: np.ndarray,
    replay: float,
    downtime: float,
    profile: tuple[np.ndarray, np.ndarray],
    held: float,
) -> float:
    """The recovery written plainly: every worker's waiting records at every second (a workers x seconds
    table), then beyond the horizon each worker's finishing time in turn. What the fast path must equal."""
    shares, caps = (np.asarray(a, dtype=float) for a in profile)
    shares = shares / shares.sum()
    rates = caps / shares
    rates = rates * (capacity / rates.min())
    backlog = np.full(shares.size, replay)
    # The worker that saturates first; of several at the slowest rate, the smallest share (the longest to work off).
    tied = [i for i in range(rates.size) if rates[i] <= rates.min() * (1 + 1e-9)]
    bottleneck = min(tied, key=lambda i: shares[i])
    backlog[bottleneck] += held / shares[bottleneck]
    arrivals = np.concatenate(([0.0], np.cumsum(forecast)))
    # Caught up up to a billionth of the records in play: both ways of summing round in the last bits.
    slack = 1e-9 * max(1.0, float(backlog.max()) + float(arrivals[-1]))

    def arrived_at(t: float) -> float:
        if t >= forecast.size:
            return float(arrivals[-1] + forecast[-1] * (t - forecast.size))
        k = int(math.floor(t))
        return float(arrivals[k] + forecast[k] * (t - k))

    def behind(t: float, arrived: float, rate: float) -> float:
        waiting = shares * np.maximum(backlog + arrived - rates * max(t - downtime, 0.0), 0.0)
        return float(waiting.sum()) - rate

    k = min(int(math.floor(downtime)), forecast.size)
    previous_t, previous = downtime, behind(downtime, arrived_at(downtime), float(forecast[max(0, k - 1)]))
    if previous <= slack:
        return downtime
    for t in range(int(math.floor(downtime)) + 1, forecast.size + 1):
        value = behind(float(t), float(arrivals[t]), float(forecast[t - 1]))
        if value <= slack:
            return previous_t + (t - previous_t) * _to_slack(previous, value, slack)
        previous_t, previous = float(t), value
    start = max(float(forecast.size), downtime)
    rate = float(forecast[-1])
    excess = backlog + arrived_at(start) - rates * (start - downtime)
    drain = rates - rate
    if np.any((excess > 0) & (drain <= 0)):
        return math.inf
    done = np.where(excess > 0, excess / np.where(drain > 0, drain, 1.0), 0.0)
    last, v0 = 0.0, float(np.sum(shares * np.maximum(excess, 0.0))) - rate
    if v0 <= slack:
        return start
    for tau in np.unique(done[excess > 0]):
        v1 = float(np.sum(shares * np.where((excess > 0) & (done > tau), excess - drain * tau, 0.0))) - rate
        if v1 <= slack:
            return start + last + (float(tau) - last) * _to_slack(v0, v1, slack)
        last, v0 = float(tau), v1
    return math.inf


def _to_slack(before: float, after: float, slack: float) -> float:
    """Where (0..1) the line from ``before`` to ``after`` reaches ``slack``."""
    return min(1.0, max(0.0, (before - slack) / (before - after))) if before > after else 1.0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0.1, 10.0), st.floats(100.0, 10_000.0)), min_size=1, max_size=40),
    st.lists(st.floats(0.0, 20_000.0), min_size=1, max_size=120),
    st.floats(0.0, 1e6),
    st.floats(0.0, 60.0),
    st.floats(0.0, 1e6),
)
@example(
    workers=[(5.5, 120.0)], forecast=[0.0, 0.0], replay=0.0, downtime=0.0, held=120.0
)  # drains to exactly nothing at 1 s
@example(
    workers=[(0.6, 600.0), (0.1, 100.0)], forecast=[0.0], replay=0.0, downtime=0.0, held=101.0
)  # two workers at one rate, rounded apart: the held backlog is the smaller share's either way
def test_the_fast_recovery_equals_the_plain_definition(
    workers: list[tuple[float, float]], forecast: list[float], replay: float, downtime: float, held: float
) -> None:
    profile = (np.array([w[0] for w in workers]), np.array([w[1] for w in workers]))
    capacity = float(np.min(profile[1] / (profile[0] / profile[0].sum())))
    series = np.array(forecast)
    fast = recovery_time(
        capacity=capacity,
        forecast=series,
        replay_records=replay,
        downtime_s=downtime,
        profile=profile,
        held_records=held,
    )
    plain = _recovery_by_definition(capacity, series, replay, downtime, profile, held)
    if math.isinf(plain):
        assert math.isinf(fast)
    else:
        assert fast == pytest.approx(plain, rel=1e-6, abs=1e-6)


def test_an_aligned_rescale_replays_nothing_and_recovers_sooner_while_a_failure_replays_as_before() -> None:
    plain = RecoveryPredictor(checkpoint_interval_s=60, downtime_rescale_prior_s=2.0)
    aligned = RecoveryPredictor(checkpoint_interval_s=60, downtime_rescale_prior_s=2.0, aligned_rescales=True)
    forecast = np.full(900, 1_000.0)
    assert plain.replay_records(1_000.0, "rescale") == 30_000.0
    assert aligned.replay_records(1_000.0, "rescale") == 0.0
    assert aligned.replay_records(1_000.0, "failure") == plain.replay_records(1_000.0, "failure") == 30_000.0
    rescale = {"kind": "rescale", "parallelism": 4}
    sooner = aligned.predict(1_500.0, forecast, 1_000.0, **rescale)
    later = plain.predict(1_500.0, forecast, 1_000.0, **rescale)
    assert sooner < later
    failure = {"kind": "failure", "parallelism": 4}
    assert aligned.predict(1_500.0, forecast, 1_000.0, **failure) == plain.predict(
        1_500.0, forecast, 1_000.0, **failure
    )
    # The bad case of a scale-in assumes the checkpoint failed and a whole interval is replayed, aligned or not.
    bad = {"parallelism": 3, "current": 4}
    assert aligned.predict_bad_case(1_500.0, forecast, 1_000.0, **bad) == plain.predict_bad_case(
        1_500.0, forecast, 1_000.0, **bad
    )


@given(
    capacity=st.floats(1_000, 1e6),
    downtime=st.floats(1, 60),
    interval=st.floats(1, 120),
    target=st.floats(90, 900),
    shares=st.lists(st.floats(0.01, 1.0), min_size=1, max_size=12),
    spread=st.floats(0.0, 1.0),
)
def test_a_failure_at_the_ready_workload_recovers_at_the_target(
    capacity: float, downtime: float, interval: float, target: float, shares: list[float], spread: float
) -> None:
    """The failure-ready workload is where the predicted recovery of a failure at a steady workload meets the target:
    a little below it the failure recovers in time, a little above it does not, whatever the workers' shares and
    capacities (a skewed job is caught up while its bottleneck still holds up to a second of the job's input)."""
    predictor = RecoveryPredictor(checkpoint_interval_s=interval, downtime_failure_prior_s=downtime)
    weights = np.asarray(shares)
    profile = (weights, weights * (1.0 + spread * np.linspace(0.0, 1.0, weights.size)))
    ready = predictor.failure_ready_rate(capacity, 4, target, profile)
    assert ready is not None and 0 < ready <= capacity

    def failure_at(workload: float) -> float:
        steady = np.full(60, workload)
        return predictor.predict(capacity, steady, workload, kind="failure", parallelism=4, profile=profile)

    assert failure_at(ready * 0.999) <= target
    if ready < capacity:
        assert failure_at(ready * 1.001) > target


def test_the_ready_workload_of_an_unknown_capacity_is_unknown_and_of_a_target_within_the_downtime_nothing() -> None:
    predictor = RecoveryPredictor(checkpoint_interval_s=10, downtime_failure_prior_s=15)
    assert predictor.failure_ready_rate(None, 4, 300) is None
    assert predictor.failure_ready_rate(float("nan"), 4, 300) is None
    assert predictor.failure_ready_rate(10_000, 4, 15) == 0.0
    # 10,000 * (300 - 15) / (300 - 15 + 15 + 5 - 1)
    assert predictor.failure_ready_rate(10_000, 4, 300) == pytest.approx(10_000 * 285 / 304)


@pytest.mark.parametrize("aligned", [False, True])
def test_a_failure_as_a_rescale_ends_is_ready_only_for_a_workload_that_works_off_both_stops(aligned: bool) -> None:
    """A failure striking as a rescale's stop ends leaves one recovery to work off both stops: the failure-ready
    workload after a rescale is that of one stop of both downtimes replaying both stops' records (an aligned
    rescale replays none of its own), below the workload a failure on a caught-up job is ready for."""
    predictor = RecoveryPredictor(
        checkpoint_interval_s=10,
        downtime_failure_prior_s=15,
        downtime_rescale_prior_s=2,
        aligned_rescales=aligned,
    )
    alone = predictor.failure_ready_rate(10_000, 4, 300)
    after = predictor.failure_ready_rate(10_000, 4, 300, after_rescale_from=6)
    assert alone is not None and after is not None and after < alone
    # 10,000 * (300 - 15 - 2) / (300 - 15 - 2 + 15 + 2 + 5 + rescale replay - 1)
    replayed = 0.0 if aligned else 5.0
    assert after == pytest.approx(10_000 * 283 / (304 + replayed))
    assert alone == pytest.approx(ready_workload(capacity=10_000, downtime_s=15, replay_s=5, target_s=300))
