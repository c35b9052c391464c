"""The analyzer's judgement of a running recovery: is the job working its backlog off or falling behind,
and when did an unannounced stop (a failure) begin?"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from agent.analyze import Analysis, Analyzer, MeasuredRecovery, candidates
from agent.analyze.recovery import backlog_drain, falling_behind
from agent.analyze.forecasting import forecaster_config
from agent.analyze.restarts import RestartDetector, stopped_at
from agent.observation import Observation
from agent.settings import load_settings
from agent.loop import Agent
from lab.replay import MemoryKnowledgeStore, Replay
from lab.settings import LabSettings, load_lab_settings, rescale_cost_overrides
from lab.simulated import SimulatedMonitor
from models.forecast import Forecast, ForecasterConfig
from models.recovery import RecoveryPredictor
from planner.types import PlanInput
from simulator import SimulatedFlinkJob, Trace
from tests.models.test_forecast import _step


def observation(lag: np.ndarray, *, uptime_s: float | None, rate: float = 1000.0) -> Observation:
    times = np.arange(len(lag), dtype=float) + 1000.0
    return Observation(
        now=float(times[-1]),
        times=times,
        workload=np.full(len(lag), rate),
        worker_throughput={},
        worker_cpu={},
        consumer_lag=np.asarray(lag, dtype=float),
        parallelism=4,
        uptime_s=uptime_s,
    )


def test_a_running_job_whose_backlog_grows_is_falling_behind() -> None:
    growing = np.linspace(10_000, 70_000, 60)  # +1000 records/s for a minute at 1000 records/s of input
    assert falling_behind(observation(growing, uptime_s=3600))


def test_a_job_working_its_backlog_off_or_holding_it_is_not() -> None:
    assert not falling_behind(observation(np.linspace(70_000, 10_000, 60), uptime_s=3600))
    assert not falling_behind(observation(np.full(60, 5_000.0) + np.sin(np.arange(60)) * 200, uptime_s=3600))


def test_a_recovery_is_timed_from_its_first_stop_through_every_stop_inside_it() -> None:
    """A failure at 1,000 s, then a rescale at 1,100 s while the job still recovers: the recovery the planner holds for
    began at 1,000 s (the target counts from there), though the watch now measures the rescale's stop."""
    from agent.analyze.recovery import RecoveryTracker
    from agent.analyze.restarts import Restart

    tracker = RecoveryTracker(load_lab_settings(None, {"policy": "daedalus"}))
    assert tracker.recovering_since is None
    tracker.on_restart(Restart("uptime fell", False, 4, stopped_at=1_000.0, restarted_at=1_020.0))
    assert tracker.recovering_since == 1_000.0
    tracker.on_rescale(now=1_100.0, from_parallelism=4, to_parallelism=6, downtime_s=None, resumed_at=None)
    assert tracker.watch.started_at == 1_100.0 and tracker.recovering_since == 1_000.0
    restored = RecoveryTracker(load_lab_settings(None, {"policy": "daedalus"}))
    restored.restore(tracker.to_dict())
    assert restored.recovering_since == 1_000.0


def test_a_backlogs_drain_is_read_from_the_seconds_the_job_ran() -> None:
    """1,000 records/s off a backlog over a minute; growing, a negative drain; 40 s down then 20 s of 500/s off it:
    the 15 s run since settling alone; too few seconds run, or an unknown uptime, say nothing."""
    assert backlog_drain(observation(np.linspace(70_000, 11_000, 60), uptime_s=3600)) == pytest.approx(1_000.0)
    assert backlog_drain(observation(np.linspace(10_000, 70_000, 61), uptime_s=3600)) == pytest.approx(-1_000.0)
    lag = np.concatenate([np.linspace(0, 40_000, 40), np.linspace(40_000, 30_500, 20)])
    assert backlog_drain(observation(lag, uptime_s=20)) == pytest.approx(500.0)
    assert backlog_drain(observation(lag, uptime_s=12)) is None
    assert backlog_drain(observation(lag, uptime_s=None)) is None


def test_only_seconds_since_the_restart_count() -> None:
    """While down every job's backlog grows: 40 s of down time then 20 s of catching up is no verdict."""
    lag = np.concatenate([np.linspace(0, 40_000, 40), np.linspace(40_000, 30_000, 20)])
    assert not falling_behind(observation(lag, uptime_s=20))
    assert falling_behind(observation(lag, uptime_s=3600)), "over the whole minute the backlog grew"


def test_too_few_running_seconds_or_no_uptime_is_no_verdict() -> None:
    growing = np.linspace(10_000, 70_000, 60)
    assert not falling_behind(observation(growing, uptime_s=12))
    assert not falling_behind(observation(growing, uptime_s=None))


def test_the_stop_is_the_first_second_of_the_last_stretch_in_which_nothing_was_processed() -> None:
    # Running (lag flat), then stopped at 1020 (replayed 3000 records, then every second's input), restarted at 1035.
    lag = np.concatenate(
        [np.full(20, 500.0), 500.0 + 3000.0 + 1000.0 * np.arange(1, 16), np.linspace(18_000, 9_000, 25)]
    )
    down = observation(lag, uptime_s=24)
    assert stopped_at(down, restarted_at=1035.0) == 1020.0
    assert stopped_at(observation(lag[:30], uptime_s=0), restarted_at=None) == 1020.0, "still down"
    assert stopped_at(observation(np.full(60, 500.0), uptime_s=30), restarted_at=1030.0) is None


def failure_run(failure_at: int) -> tuple[SimulatedFlinkJob, Analyzer, list[MeasuredRecovery]]:
    """A job at a flat workload, analysed every minute, that fails at ``failure_at``."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error"})
    job = SimulatedFlinkJob(Trace("flat", np.array([0.0, 7200.0]), np.array([60_000.0, 60_000.0])), settings.simulator)
    monitor, analyzer = SimulatedMonitor(job), Analyzer(settings)
    analyzer.set_forecasting(False)
    measured: list[MeasuredRecovery] = []
    for now in range(60, 1800, 60):
        while job.now_s < now:
            if job.now_s == failure_at:
                job.fail()
            job.step()
        measured += analyzer.analyze(monitor.observe(since=now - 60, now=now), now=now).recoveries
    return job, analyzer, measured


@pytest.mark.parametrize("failure_at", [1205, 1257])
def test_a_failure_is_measured_from_when_processing_stopped_not_from_when_it_was_noticed(failure_at: int) -> None:
    """Noticed at the next round, running again (1205) or still down (1257): downtime and recovery start at the stop."""
    job, analyzer, measured = failure_run(failure_at)
    (failure,) = job.restarts
    assert analyzer.recovery.downtime_with_source("failure", failure.to_parallelism) == (failure.downtime_s, "measured")
    (recovery,) = measured
    assert recovery.watched.started_at == failure_at
    assert recovery.measured_s > failure.downtime_s


def test_a_recovery_outruns_the_expected_arrivals_not_the_rise_envelope() -> None:
    """A workload cycling 10k..90k/s every 24 min rises several-fold within minutes from its troughs, so
    at its peak the rise envelope soon lies above the capacity of 12 workers. A recovery there still
    takes under a minute of the spare capacity over the arrivals the forecast expects, not forever."""
    times = np.arange(0, 2 * 3600, 60.0)
    settings = load_lab_settings(
        None, {"telemetry.log_level": "error", "max_parallelism": 12, "forecast_quantile": 0.95}
    )
    run = Replay(Trace("cycle", times, 50_000 - 40_000 * np.cos(2 * np.pi * times / 1440)), settings, hours=1.0)
    run.run()
    analyses = [r.analysis for r in run.rounds[-24:] if r.analysis is not None]
    analysis = max(analyses, key=lambda a: a.workload_avg or 0.0)  # at the peak of the last cycle
    assert analysis.forecast is not None and analysis.forecast_upper is not None
    n = analysis.parallelism
    assert n is not None
    capacity = analysis.capacities[n]
    assert capacity is not None
    assert float(np.max(analysis.forecast_upper)) > capacity > float(np.max(analysis.forecast))
    assert analysis.recovery_times[n] < 60.0


def analyze_flat(settings: LabSettings, *, rate: float, until_s: int) -> Analysis:
    """The analyzer's last analysis of a simulated job at a flat ``rate``, one round a minute until ``until_s``."""
    job = SimulatedFlinkJob(Trace("flat", np.array([0.0, 7200.0]), np.array([rate, rate])), settings.simulator)
    monitor, analyzer = SimulatedMonitor(job), Analyzer(settings)
    analysis = None
    for now in range(60, until_s, 60):
        while job.now_s < now:
            job.step()
        analysis = analyzer.analyze(monitor.observe(since=now - 60, now=now), now=now)
    assert analysis is not None
    return analysis


def test_a_sub_second_checkpoint_interval_still_gives_every_scale_out_a_recovery_time() -> None:
    """A time-compressed job checkpoints every 0.67 s: the replay is estimated from the last second, not
    from no data at all (which made every recovery 'never' and sent Daedalus to its largest scale-out)."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error", "checkpoint_interval_s": 0.67})
    analysis = analyze_flat(settings, rate=60_000.0, until_s=1200)
    assert analysis.parallelism is not None
    assert np.isfinite(analysis.recovery_times[analysis.parallelism])


def replayed_flat(settings: LabSettings) -> tuple[Analyzer, Observation, float]:
    """The analyzer after half an hour of the agent's loop over a flat 40,000/s, the last minute's observation and
    its time."""
    run = Replay(Trace("flat", np.array([0.0, 7200.0]), np.array([40_000.0, 40_000.0])), settings, hours=0.5)
    run.run()
    analyzer = run.agent.analyzer
    assert isinstance(analyzer, Analyzer)
    now = float(run.job.now_s)
    return analyzer, run.monitor.observe(since=now - 60, now=now), now


def test_records_already_waiting_lengthen_every_predicted_recovery() -> None:
    """A job rescaled while behind starts its recovery with that backlog too."""
    analyzer, observation, now = replayed_flat(load_lab_settings(None, {"telemetry.log_level": "error"}))
    caught_up = analyzer.analyze(observation, now=now)
    behind = analyzer.analyze(replace(observation, consumer_lag=observation.consumer_lag + 1_000_000.0), now=now)
    n = caught_up.parallelism
    assert n is not None
    spare = caught_up.capacities[n] - 40_000.0  # type: ignore[operator]
    # At least the whole job's spare capacity's time: a backlog built while running sits with the
    # workers that fell short (models.recovery gives it to the bottleneck), never drains faster.
    assert behind.recovery_times[n] - caught_up.recovery_times[n] >= 0.8 * 1_000_000.0 / spare


def test_a_scale_in_is_judged_by_its_bad_case_and_the_watch_by_the_expected_one() -> None:
    """A scale-in is only an option: its recovery is the slower of the expected one and the bad case (a
    whole checkpoint interval replayed, the workload rising as the envelope says). What the recovery watch
    compares a measured stop with stays the expected prediction."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error", "max_parallelism": 12})
    analyzer, observation, now = replayed_flat(settings)
    analysis = analyzer.analyze(observation, now=now)
    current = analysis.parallelism
    assert current is not None and current > 2
    expected = analyzer.tracker.stop_predictions
    below = [n for n in range(1, current) if np.isfinite(expected.get(n, np.inf))]
    assert below, expected
    for n in below:
        assert analysis.recovery_times[n] > expected[n]
    # The rescale's own recovery goes to the planner too: where a rescale is cheap, a decision's hold starts there.
    assert dict(analysis.rescale_recoveries) == dict(expected)
    # Scale-outs are needed, not optional: the expected case (and a failure once there) decides.
    for n in range(current + 1, settings.max_parallelism + 1):
        assert analysis.recovery_times[n] >= expected[n]


@pytest.mark.parametrize("cost", ["in-place", "restart"])
def test_where_cheap_a_scale_in_can_be_ready_for_a_failure_as_its_own_stop_ends(
    cost: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``SCALE_IN_READY_AFTER_RESCALE = "cheap"``, where a rescale is in place a scale-in's failure-ready
    workload is that of a failure striking as the scale-in's rescale ends (one recovery for both stops), lower than a
    caught-up job's; the current scale-out and every scale-out above it keep the caught-up one, and where a rescale
    restarts the job so does every one."""
    settings = load_lab_settings(
        None, {"telemetry.log_level": "error", "max_parallelism": 12, **rescale_cost_overrides(cost)}
    )
    analyzer, observation, now = replayed_flat(settings)
    alone = analyzer.analyze(observation, now=now)  # the shipped setting, "never"
    monkeypatch.setattr(candidates, "SCALE_IN_READY_AFTER_RESCALE", "cheap")
    cheap = analyzer.analyze(observation, now=now)
    current = cheap.parallelism
    assert current is not None and current > 2
    below = [n for n in range(1, current) if n in alone.failure_ready]
    assert below and set(cheap.failure_ready) == set(alone.failure_ready)
    # A second round reads the models a little further on: equal is within a thousandth.
    for n in below:
        if cost == "in-place":  # a stop of seconds more and its replay: a few percent less
            assert 0 < cheap.failure_ready[n] < 0.995 * alone.failure_ready[n]
        else:
            assert cheap.failure_ready[n] == pytest.approx(alone.failure_ready[n], rel=1e-3)
    for n in range(current, settings.max_parallelism + 1):
        assert cheap.failure_ready.get(n) == pytest.approx(alone.failure_ready.get(n), rel=1e-3)


@pytest.mark.parametrize("cost", ["in-place", "restart"])
def test_where_dear_a_scale_ins_bad_case_can_be_one_bad_moment_at_a_time_or_none(
    cost: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``BAD_CASE_JOINS`` ``either``, where a rescale restarts the job a scale-in's bad case is the slower of a
    whole interval replayed under the point forecast and the expected replay under the upper bound, never slower
    than the shipped ``both`` (both at once); with ``none`` only the expected recovery of the rescale and of a
    failure there, shorter still. Scale-outs keep their recoveries, and where a rescale is in place so does every
    scale-out: the bad case stays whole there."""
    settings = load_lab_settings(
        None, {"telemetry.log_level": "error", "max_parallelism": 12, **rescale_cost_overrides(cost)}
    )
    planned = {}
    for joins in ("both", "either", "none"):  # each on the shipped replay, read by the same first round after it
        monkeypatch.setattr(candidates, "BAD_CASE_JOINS", "both")
        analyzer, observation, now = replayed_flat(settings)
        monkeypatch.setattr(candidates, "BAD_CASE_JOINS", joins)
        analysis = analyzer.analyze(observation, now=now)
        planned[joins] = analysis.recovery_times
    current = analysis.parallelism
    assert current is not None
    below = [n for n in range(1, current) if np.isfinite(planned["both"].get(n, np.inf))]
    if cost == "restart":
        assert below, planned["both"]
        for n in below:
            assert planned["none"][n] < 0.999 * planned["either"][n] <= planned["both"][n]
        # the envelope's rises over the noise, with a whole interval to work off besides, lengthen the joined case
        assert any(planned["either"][n] < 0.999 * planned["both"][n] for n in below)
    else:
        assert planned["either"] == planned["both"] == planned["none"]
    for n in range(current, settings.max_parallelism + 1):
        assert planned["none"][n] == planned["both"][n]


def test_where_dear_a_scale_ins_bad_case_can_plan_for_the_rises_seen_from_where_the_workload_stands(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At the top of a cycle, with ``BAD_CASE_CONDITIONED_WHERE`` ``always`` a dear round's scale-in bad case plans
    for the rises seen from other tops, lower than the upper bound the round's other checks read; with the shipped
    ``cheap`` it plans for that bound itself."""
    from agent.analyze import forecasting

    settings = load_lab_settings(None, {"policy": "daedalus", "telemetry.log_level": "error"})
    part = forecasting.Forecasting(settings, executor=None, enabled=False)  # the envelope and level alone
    period = 1440
    round_s = 60
    base = lagless(float(round_s), parallelism=2, uptime_s=1e6, window_s=round_s)
    top = 7 * period + period // 2  # the cycle at its highest, three hours in
    for now in range(round_s, top + 1, round_s):
        times = np.arange(now - round_s + 1.0, now + 1.0)
        workload = 50_000 - 40_000 * np.cos(2 * np.pi * times / period)
        part.step(replace(base, now=float(now), times=times, workload=workload), float(now))
    level = part.level()
    assert level is not None and level > 85_000  # the top of the cycle
    forecast = Forecast(np.full(settings.forecast_horizon_s, level), "naive", None)
    shipped = part.outlook(forecast, span=round_s, cheap_rescale=False)
    assert shipped.bad_case_upper is None and shipped.scale_in_upper is shipped.upper
    monkeypatch.setattr(forecasting, "BAD_CASE_CONDITIONED_WHERE", "always")
    dear = part.outlook(forecast, span=round_s, cheap_rescale=False)
    cheap = part.outlook(forecast, span=round_s, cheap_rescale=True)
    assert dear.upper is not None and dear.scale_in_upper is not None
    assert np.array_equal(dear.upper, shipped.upper)
    assert dear.scale_in_upper[180] < 0.95 * dear.upper[180]
    assert cheap.bad_case_upper is None  # where cheap every bound is conditioned already
    part.close()
    # A scale-in's bad case reads that bound, the rest of its checks the upper bound.
    predictor = RecoveryPredictor(checkpoint_interval_s=10, downtime_rescale_prior_s=30, downtime_failure_prior_s=15)
    flat, rising = np.full(900, 100.0), np.linspace(100.0, 150.0, 900)
    outlook = forecasting.WorkloadOutlook(forecast, 100.0, None, rising, flat)

    def planned(bound: np.ndarray | None) -> float:
        seen = replace(outlook, bad_case_upper=bound)
        return candidates.evaluate_candidate(
            4, capacity=200.0, profile=None, current=6, backlog=0.0, outlook=seen, predictor=predictor
        ).planned_s

    assert planned(flat) == pytest.approx(69.0)
    assert planned(None) > 69.5


@pytest.mark.parametrize("failure_prior_s", [5.0, 5_000.0])
def test_every_scale_out_is_judged_by_a_failure_there_too(failure_prior_s: float) -> None:
    """A scale-out Daedalus moves to must also recover from a failure within the target, or the next round
    finds the current scale-out failing its own check and rescales back: each candidate's recovery is
    the slower of the rescale to it and a failure once there."""
    settings = load_lab_settings(
        None,
        {
            "telemetry.log_level": "error",
            "downtime_failure_prior_s": failure_prior_s,
            "downtime_rescale_prior_s": 5.0,
        },
    )
    analysis = analyze_flat(settings, rate=40_000.0, until_s=900)
    finite = {n: t for n, t in analysis.recovery_times.items() if np.isfinite(t)}
    assert len(finite) >= 3, analysis.recovery_times
    if failure_prior_s > 1000:
        assert all(t >= failure_prior_s for t in finite.values()), finite
    else:
        assert all(t < 1000 for t in finite.values()), finite


def test_the_loop_before_is_the_mean_of_the_stretch_as_long_as_this_rounds_just_before_it() -> None:
    """A workload that steps from 20k/s to 30k/s at 600 s: the round at 660 s ran at 30k/s and the loop
    before it at 20k/s (what the planner reads as a climb); a loop later both are 30k/s."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error"})
    trace = Trace("step", np.array([0.0, 600.0, 600.1, 7200.0]), np.array([20_000.0, 20_000.0, 30_000.0, 30_000.0]))
    job = SimulatedFlinkJob(trace, settings.simulator)
    monitor, analyzer = SimulatedMonitor(job), Analyzer(settings)
    analyses = {}
    for now in range(60, 721, 60):
        while job.now_s < now:
            job.step()
        analyses[now] = analyzer.analyze(monitor.observe(since=now - 60, now=now), now=now)
    assert analyses[600].workload_previous == pytest.approx(20_000.0, rel=0.05)
    assert analyses[660].workload_avg == pytest.approx(30_000.0, rel=0.05)
    assert analyses[660].workload_previous == pytest.approx(20_000.0, rel=0.05)
    assert analyses[720].workload_previous == pytest.approx(30_000.0, rel=0.05)


@pytest.mark.parametrize(("rate_window_s", "climbs"), [(60.0, False), (0.0, True)])
def test_a_fresh_agent_reading_windowed_rates_forecasts_a_spreading_step_as_its_level(
    rate_window_s: float, climbs: bool
) -> None:
    """Four rounds: three minutes at 700/s, then a step to 3,000/s that a 60-s rate window has just spread over
    the last minute. Read from Prometheus (the window says so) the forecast is the step's level; the same
    samples as exact per-second rates are a ramp, and the line climbs to several times the level."""
    y = _step(700.0, 3000.0, 60, smear_s=60)[-240:]
    analyzer = Analyzer(load_lab_settings(None, {"telemetry.log_level": "error"}))
    for start in range(0, 240, 60):
        times = np.arange(start, start + 60, dtype=float) + 1.0
        seen = replace(
            observation(np.zeros(60), uptime_s=600.0 + start),
            times=times,
            now=float(times[-1]),
            workload=y[start : start + 60],
            rate_window_s=rate_window_s,
        )
        analysis = analyzer.analyze(seen, now=float(times[-1]))
    assert analysis.forecast is not None
    assert bool(analysis.forecast.max() > 2 * 3000.0) is climbs, analysis.forecast.max()


def test_the_first_round_of_a_job_saturated_from_the_start_reads_its_bottleneck() -> None:
    """The lab's job at its initial scale-out under a workload above every worker's capacity: no second is
    unsaturated. The workers' backlogs say who receives what (as the partitions' weights over the window do, here
    left out at the end), so the first capacity is the true one, not the sum of what
    the saturated workers read."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error"})
    job = SimulatedFlinkJob(
        Trace("over", np.array([0.0, 7200.0]), np.array([200_000.0, 200_000.0])), settings.simulator
    )
    monitor, analyzer = SimulatedMonitor(job), Analyzer(settings)
    job.run_until(60)
    observation = monitor.observe(since=0, now=60)
    assert set(observation.worker_backlog) == set(observation.worker_throughput)
    analysis = analyzer.analyze(observation, now=60)
    n = job.parallelism
    read = sum(float(np.mean(s[-10:])) for s in observation.worker_throughput.values())
    assert analysis.capacities[n] == pytest.approx(job.true_capacity(n), rel=0.03)
    assert job.true_capacity(n) < 0.8 * read

    blind = Analyzer(settings)
    alone = replace(observation, worker_backlog={}, partition_ends_since=None)  # nor the partitions' weights
    assert blind.analyze(alone, now=60).capacities[n] == pytest.approx(read, rel=0.03)


def test_the_first_round_reads_the_partition_weights_from_the_offsets_over_its_window() -> None:
    """The monitor gives each partition's log-end offset at the start of the window too (from its own start),
    so the first round knows how the partitions share the input and the skew at scale-outs never run: with
    Zipf-weighted partitions dealt round-robin, 12 to 16 workers differ (the lab's cold start chose 12 among
    five equal estimates, where 14 carries 8 % more). Without it, one snapshot gives no weights and the
    partition count alone cannot tell them apart."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error"})
    job = SimulatedFlinkJob(
        Trace("near", np.array([0.0, 7200.0]), np.array([110_000.0, 110_000.0])), settings.simulator
    )
    monitor = SimulatedMonitor(job)
    job.run_until(60)
    observation = monitor.observe(since=0, now=60)
    assert observation.partition_ends_since is not None
    untried = range(job.parallelism + 4, 17)
    truth = {n: job.true_capacity(n) for n in untried}
    assert max(truth.values()) > 1.05 * min(truth.values())
    informed = Analyzer(settings).analyze(observation, now=60).capacities
    assert all(informed[n] == pytest.approx(truth[n], rel=0.03) for n in untried), (informed, truth)
    blind = Analyzer(settings).analyze(replace(observation, partition_ends_since=None), now=60).capacities
    assert len({round(blind[n] or 0) for n in untried}) < len(untried)


def test_after_a_restart_the_backlogs_wait_for_the_throughput_averages_to_settle() -> None:
    """The workers' throughput is a moving average over the metric window that, just after a rescale, still
    counts the stop's idle seconds for the workers that were there: the simulated monitor gives no backlog
    for those samples (as the real monitor marks them unsettled), so the shares are read after them."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error"})
    job = SimulatedFlinkJob(Trace("flat", np.array([0.0, 7200.0]), np.array([50_000.0, 50_000.0])), settings.simulator)
    monitor = SimulatedMonitor(job)
    job.run_until(120)
    job.rescale(job.parallelism + 2)
    job.run_until(240)
    observation = monitor.observe(since=120, now=240)
    window = settings.simulator.metric_window_s
    resumed = 120 + job.restarts[-1].downtime_s
    for backlog in observation.worker_backlog.values():
        unknown = np.isnan(backlog)
        assert unknown[: resumed - 120 + window].all() and not unknown[resumed - 120 + window :].any()


def test_the_observation_step_is_the_monitors_spacing_of_samples() -> None:
    """Input shares weigh each sample by it: a 5-s Prometheus step is five seconds of input per sample."""
    every_five = replace(observation(np.zeros(12), uptime_s=None), times=np.arange(1000.0, 1060.0, 5.0))
    assert every_five.step_s == 5.0
    with_a_gap = replace(
        every_five, times=np.concatenate([np.arange(1000.0, 1030.0, 5.0), np.arange(1100.0, 1130.0, 5.0)])
    )
    assert with_a_gap.step_s == 5.0, "a gap in the samples is not the step"
    assert replace(every_five, times=np.asarray([1000.0])).step_s == 1.0


def lagless(now: float, *, parallelism: int, uptime_s: float, rate: float = 1500.0, window_s: int = 60) -> Observation:
    """A round of a job whose source reports no backlog: the workload is what its workers read."""
    times = np.arange(now - window_s + 1.0, now + 1.0)
    share = np.full(times.size, rate / parallelism)
    workers = {f"tm-{i}": share + 1e-13 * i for i in range(parallelism)}  # the sums differ in the last bits
    return Observation(
        now=now,
        times=times,
        workload=np.sum(list(workers.values())[::-1], axis=0),
        worker_throughput=workers,
        worker_cpu={},
        worker_busy={w: np.full(times.size, 0.25) for w in workers},
        consumer_lag=np.full(times.size, np.nan),
        parallelism=parallelism,
        uptime_s=uptime_s,
        gaps={"consumer_lag": "empty", "worker_backlog": "empty"},
    )


def test_without_a_lag_a_stop_before_the_gap_is_learned_is_let_go_unmeasured() -> None:
    """Perdix started beside a job that is still coming up: the parallelism it first read changes, which
    is a restart it did not cause. With no lag there is no caught-up test and the gap's band is not learned
    yet, so the stop could never be seen to end: it is let go at once, not held until the target, and the
    band is learned from the next round on; a later stop is measured."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error", "target_recovery_time_s": 300.0})
    analyzer = Analyzer(settings)
    # Rounds every 5 s (a short loop), the job a few seconds old: five samples of the gap per round.
    analyzer.analyze(lagless(1000.0, parallelism=1, uptime_s=5.0, window_s=5), now=1000.0)
    started = analyzer.analyze(lagless(1005.0, parallelism=3, uptime_s=10.0, window_s=5), now=1005.0)
    assert started.restart_detected and not started.recovering
    assert not analyzer.watch.active and analyzer.watch.abandoned == 1
    for k in range(1, 4):
        analyzer.analyze(lagless(1005.0 + 60 * k, parallelism=3, uptime_s=10.0 + 60 * k), now=1005.0 + 60 * k)
    assert analyzer.watch.detector.ready
    # A rescale now: the job runs again at once, and the gap (still zero up to rounding) ends the watch.
    analyzer.on_rescale(now=1250.0, from_parallelism=3, to_parallelism=2, downtime_s=0.2, resumed_at=1250.2)
    after = analyzer.analyze(lagless(1300.0, parallelism=2, uptime_s=50.0), now=1300.0)
    assert not after.recovering and not analyzer.watch.active and analyzer.watch.abandoned == 1
    assert after.recoveries and after.recoveries[0].kind == "rescale"


def test_a_stop_inside_a_watched_recovery_supersedes_it_and_says_so() -> None:
    """A rescale taken while the last one's recovery is watched (the planner found the job could not catch up in
    time) carries that recovery on: the earlier stop has no end of its own to measure. The watch moves to the new
    stop and logs the earlier one as superseded, which is how an operator (and the end-to-end test) tells a
    recovery cut short from a lost watch."""
    from structlog.testing import capture_logs

    settings = load_lab_settings(None, {"telemetry.log_level": "error", **rescale_cost_overrides("restart")})
    job = SimulatedFlinkJob(Trace("flat", np.array([0.0, 7200.0]), np.array([20_000.0, 20_000.0])), settings.simulator)
    monitor, analyzer = SimulatedMonitor(job), Analyzer(settings)
    for now in range(60, 660, 60):
        job.run_until(now)
        analyzer.analyze(monitor.observe(since=now - 60, now=now), now=now)
    before = job.parallelism
    job.rescale(before - 2)
    analyzer.on_rescale(now=600.0, from_parallelism=before, to_parallelism=before - 2, downtime_s=None, resumed_at=None)
    job.run_until(610)
    assert analyzer.analyze(monitor.observe(since=600, now=610), now=610.0).recovering
    job.rescale(before)
    with capture_logs() as logs:
        analyzer.on_rescale(
            now=610.0, from_parallelism=before - 2, to_parallelism=before, downtime_s=None, resumed_at=None
        )
    (superseded,) = [e for e in logs if e["event"] == "recovery.superseded"]
    assert superseded["started_at"] == 600.0 and superseded["parallelism"] == before - 2
    assert superseded["by"] == "rescale" and superseded["at"] == 610.0
    assert analyzer.watch.active and analyzer.watch.started_at == 610.0


@pytest.mark.parametrize("profile", ["in-place-aligned", "in-place"])
def test_a_rescale_that_replays_nothing_ends_its_watch_when_the_uptime_says_the_job_runs_again(profile: str) -> None:
    """A rescale aligned with a checkpoint stops the job for a second and replays nothing: with workers to spare the
    lag never leaves the caught-up band, so the watch never sees the stop. A scaler that does not say when the job
    ran again (the simulated one, the Kubernetes targets) leaves it to the job's uptime, which then ends the watch
    within the next round instead of holding the planner for the whole target; a rescale that replays is seen."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error", **rescale_cost_overrides(profile)})
    job = SimulatedFlinkJob(Trace("flat", np.array([0.0, 7200.0]), np.array([20_000.0, 20_000.0])), settings.simulator)
    monitor, analyzer = SimulatedMonitor(job), Analyzer(settings)
    for now in range(60, 660, 60):
        job.run_until(now)
        assert not analyzer.analyze(monitor.observe(since=now - 60, now=now), now=now).recovering
    before = job.parallelism
    job.rescale(before - 2)
    analyzer.on_rescale(now=600.0, from_parallelism=before, to_parallelism=before - 2, downtime_s=None, resumed_at=None)
    job.run_until(660)
    after = analyzer.analyze(monitor.observe(since=600, now=660), now=660.0)
    (stop,) = job.restarts
    assert (stop.replayed_records == 0) == (profile == "in-place-aligned")
    assert not after.recovering and not analyzer.watch.active
    (measured,) = after.recoveries
    assert measured.kind == "rescale" and measured.measured_s < 30


def _steady_job(profile: str, *, until: int) -> tuple[SimulatedFlinkJob, SimulatedMonitor, Analyzer]:
    """A job at a steady 20,000/s priced as the lab's ``profile``, its analyzer fed a round a minute to ``until``."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error", **rescale_cost_overrides(profile)})
    job = SimulatedFlinkJob(Trace("flat", np.array([0.0, 7200.0]), np.array([20_000.0, 20_000.0])), settings.simulator)
    monitor, analyzer = SimulatedMonitor(job), Analyzer(settings)
    for now in range(60, until + 1, 60):
        job.run_until(now)
        analyzer.analyze(monitor.observe(since=now - 60, now=now), now=now)
    return job, monitor, analyzer


def test_the_uptime_samples_date_each_restart_of_the_window_and_the_earliest_since_a_moment_counts() -> None:
    """An old attempt, a stop, a restart at 20, a second stop and a restart at 45 (its samples held between scrapes
    date it late, never early): since 5 the job first restarted at 20, since 30 at 45; with the last uptime alone
    only the restart it shows is known."""
    times = np.arange(0.0, 60.0)
    uptime = np.where(times < 10, times + 1000, np.where(times <= 20, 0, np.where(times <= 40, times - 20, 0.0)))
    uptime = np.where(times >= 46, 1.0 + 5 * ((times - 46) // 5), uptime)  # scraped every 5 s from 46
    zeros = np.zeros_like(times)
    observation = Observation(0.0, times, zeros, {}, {}, zeros, 4, float(uptime[-1]), uptime=uptime)
    assert observation.restarted_since(5.0) == 20.0
    assert observation.restarted_since(30.0) == 45.0
    assert observation.restarted_since(50.0) is None
    last_only = replace(observation, uptime=None)
    assert last_only.restarted_since(5.0) == pytest.approx(59.0 - float(uptime[-1]))


def test_a_failure_inside_a_rescales_watch_does_not_date_the_rescales_end() -> None:
    """A rescale at a restart's cost stops the job for tens of seconds; two seconds after it runs again, before it
    has caught up, it fails. The rescale's downtime is learned from the first restart since it (what the uptime
    samples date), not from the failure's restart, which the last uptime of the round shows."""
    job, monitor, analyzer = _steady_job("restart", until=600)
    before = job.parallelism
    job.rescale(before - 2)
    analyzer.on_rescale(now=600.0, from_parallelism=before, to_parallelism=before - 2, downtime_s=None, resumed_at=None)
    while not job.restarts:
        job.step()
    job.run_until(job.now_s + 2)
    job.fail()
    for now in (660, 720):
        job.run_until(now)
        analyzer.analyze(monitor.observe(since=now - 60, now=now), now=float(now))
    rescale, failure = job.restarts
    assert failure.kind == "failure" and failure.start_s + failure.downtime_s < 660
    learned, source = analyzer.recovery.downtime_with_source("rescale", before - 2, before)
    assert source == "measured"
    assert learned == pytest.approx(rescale.downtime_s, abs=1.0)


def test_a_rescale_requested_while_a_failure_has_the_job_down_teaches_no_rescale_downtime() -> None:
    """The job fails just before a round and is down at it; a rescale requested then waits for that restart. The
    stop lasts as long as the failure's restart, not as a rescale does: neither it nor its recovery is learned as a
    rescale's downtime (learned, a 1-s in-place rescale read as a restart of seconds)."""
    job, monitor, analyzer = _steady_job("in-place", until=540)
    job.run_until(595)
    job.fail()
    job.run_until(600)
    analyzer.analyze(monitor.observe(since=540, now=600), now=600.0)
    before = job.parallelism
    assert job.rescale(before + 2), "taken as the restart's new scale-out"
    analyzer.on_rescale(now=600.0, from_parallelism=before, to_parallelism=before + 2, downtime_s=None, resumed_at=None)
    for now in range(660, 1200, 60):
        job.run_until(now)
        analyzer.analyze(monitor.observe(since=now - 60, now=now), now=float(now))
    (failure,) = job.restarts
    assert failure.to_parallelism == before + 2 and failure.downtime_s > 5
    assert analyzer.recovery.downtime_with_source("rescale", before + 2, before)[1] == "prior"
    assert not analyzer.watch.active, "the stop was watched to its end"


def test_the_rise_envelope_is_conditioned_on_where_the_workload_stands_only_where_a_rescale_is_cheap() -> None:
    """Two analyzers read the same cycling job; one expects a rescale to stop it for 2 s (in place), the other
    for 30 s (a restart). At the top of the cycle the cheap one plans for the rises seen from other tops, the
    dear one for every rise (the troughs' climbs too); without rise_conditioned both plan alike at one quantile.
    The cheap one plans at forecast_quantile_cheap, the dear one at forecast_quantile."""
    times = np.arange(0, 3 * 3600, 60.0)
    trace = Trace("cycle", times, 50_000 - 40_000 * np.cos(2 * np.pi * times / 1440))

    def upper_at_peak(**overrides: object) -> float:
        settings = load_lab_settings(
            None, {"telemetry.log_level": "error", "simulator.initial_parallelism": 12, **overrides}
        )
        job = SimulatedFlinkJob(trace, settings.simulator)
        monitor, analyzer = SimulatedMonitor(job), Analyzer(settings)
        peaks = []
        for now in range(60, 3 * 3600, 60):
            while job.now_s < now:
                job.step()
            analysis = analyzer.analyze(monitor.observe(since=now - 60, now=now), now=now)
            if now > 2 * 3600 and analysis.forecast_upper is not None:
                peaks.append((analysis.workload_avg or 0.0, float(analysis.forecast_upper[180])))
        return max(peaks)[1]

    same = {"forecast_quantile_cheap": 0.8}
    cheap = upper_at_peak(downtime_rescale_prior_s=2.0, **same)
    dear = upper_at_peak(downtime_rescale_prior_s=30.0, **same)
    assert cheap < 0.95 * dear
    plain = upper_at_peak(downtime_rescale_prior_s=2.0, rise_conditioned=False, **same)
    assert plain == pytest.approx(dear)
    # Where a rescale is cheap the bound is forecast_quantile_cheap's; where it is dear, forecast_quantile's.
    assert upper_at_peak(downtime_rescale_prior_s=2.0, rise_conditioned=False) < plain
    assert upper_at_peak(downtime_rescale_prior_s=30.0, forecast_quantile_cheap=0.6) == pytest.approx(dear)


def test_a_document_that_cannot_be_restored_resets_the_injected_analyzer_and_keeps_it() -> None:
    """The lab injects its analyzer (on its executor, or the oracle's). A knowledge document the models cannot
    use is set aside and the agent starts afresh with that same analyzer: what it learned is forgotten, what it
    was given (settings, executor, the forecasting switch) is kept."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error"})
    run = Replay(Trace("flat", np.array([0.0, 7200.0]), np.array([40_000.0, 40_000.0])), settings, hours=0.5)
    run.run()
    analyzer = run.agent.analyzer
    assert isinstance(analyzer, Analyzer) and analyzer.observed_scale_outs()
    analyzer.set_forecasting(False)
    document = run.agent.document()
    document["analyzer"]["capacity"]["surprise"] = 1
    store = MemoryKnowledgeStore()
    store.save(document)
    agent = Agent(
        settings=settings, clock=run.clock, monitor=run.monitor, scaler=run.scaler, knowledge=store, analyzer=analyzer
    )
    assert agent.analyzer is analyzer
    assert not analyzer.observed_scale_outs() and not analyzer.forecasting.enabled
    fresh = Analyzer(settings, forecasting=False)
    assert json.dumps(analyzer.to_dict(), sort_keys=True) == json.dumps(fresh.to_dict(), sort_keys=True)


def test_the_restart_detector_tells_a_restart_nobody_announced_and_stays_quiet_while_one_is_watched() -> None:
    """An uptime that fell short of the time passed is a failure, a parallelism nobody asked for an operator's
    rescale; a rescale announced here (expect) or a watched recovery is no surprise."""
    detector = RestartDetector()
    assert detector.detect(lagless(1000.0, parallelism=3, uptime_s=600.0), 1000.0, watching=False) is None
    assert detector.detect(lagless(1060.0, parallelism=3, uptime_s=660.0), 1060.0, watching=False) is None
    failure = detector.detect(lagless(1120.0, parallelism=3, uptime_s=20.0), 1120.0, watching=False)
    assert failure is not None and not failure.rescaled_outside and failure.parallelism == 3
    assert failure.restarted_at == 1100.0 and failure.stopped_at == 1100.0, "no lag: the stop is the restart"
    rescaled = detector.detect(lagless(1180.0, parallelism=5, uptime_s=80.0), 1180.0, watching=False)
    assert rescaled is not None and rescaled.rescaled_outside and "3 -> 5" in rescaled.reason
    assert detector.detect(lagless(1240.0, parallelism=2, uptime_s=5.0), 1240.0, watching=True) is None
    detector.expect(4)
    assert detector.detect(lagless(1300.0, parallelism=4, uptime_s=65.0), 1300.0, watching=False) is None
    restored = RestartDetector()
    restored.restore(detector.to_dict())
    assert restored.to_dict() == detector.to_dict() == {"last_uptime": [1300.0, 65.0], "expected_parallelism": 4}


def test_the_settings_state_no_forecasting_default_of_their_own() -> None:
    """Settings left at their defaults give the forecaster its own defaults (ForecasterConfig states them)."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error"})
    assert forecaster_config(settings) == ForecasterConfig()
    assert Analyzer(settings).forecaster.config == ForecasterConfig()


def test_the_naive_candidate_holds_the_level_over_the_rate_window() -> None:
    """The level the forecaster's naive candidate holds spans the agent's rate window, as the agent's own level does."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error", "prometheus.rate_window_s": 10})
    assert forecaster_config(settings).level_s == 10
    assert Analyzer(settings).forecaster.config.level_s == 10


@pytest.mark.parametrize(("policy", "switched"), [("hpa", [False]), ("daedalus", [])])
def test_the_agent_switches_forecasting_off_on_any_analyze_stage_for_a_policy_that_reads_none(
    policy: str, switched: list[bool]
) -> None:
    """The lab's oracle is an analyze stage too: the agent tells it, as it tells the Analyzer, that the policy reads
    no forecast (and says nothing to a stage whose policy reads one)."""
    from lab.oracle import OracleAnalyzer

    settings = load_lab_settings(None, {"telemetry.log_level": "error", "policy": policy})
    run = Replay(Trace("flat", np.array([0.0, 7200.0]), np.array([40_000.0, 40_000.0])), settings, hours=0.1)
    calls: list[bool] = []

    class RecordingOracle(OracleAnalyzer):
        def set_forecasting(self, enabled: bool) -> None:
            calls.append(enabled)

    oracle = RecordingOracle(run.job, settings)
    agent = Agent(
        settings=settings,
        clock=run.clock,
        monitor=run.monitor,
        scaler=run.scaler,
        knowledge=MemoryKnowledgeStore(),
        analyzer=oracle,
    )
    assert agent.analyzer is oracle and calls == switched


def test_the_analyzer_answers_downtimes_from_its_recovery_predictor() -> None:
    """The per-vertex plan reads a stop's expected downtime through the stage: the recovery predictor's."""
    analyzer = Analyzer(load_lab_settings(None, {"telemetry.log_level": "error"}))
    for kind in ("rescale", "failure"):
        for n in (1, 4, 12):
            assert analyzer.downtime(kind, n) == analyzer.recovery.downtime(kind, n) > 0


@pytest.mark.parametrize(
    ("overrides", "aligned"),
    [
        ({"scale_target.kind": "flink-rest"}, True),
        ({"scale_target.kind": "flink-rest", "scale_target.checkpoint_before_rescale": False}, False),
        ({"scale_target.kind": "deployment"}, False),
    ],
)
def test_rescales_replay_nothing_only_where_the_scale_target_aligns_them_with_a_checkpoint(
    overrides: dict[str, object], aligned: bool
) -> None:
    analyzer = Analyzer(load_settings(None, overrides))
    assert analyzer.recovery.aligned_rescales is aligned
    assert (analyzer.recovery.replay_records(1_000.0, "rescale") == 0.0) is aligned


def test_with_the_conformal_bound_a_cheap_round_plans_for_the_forecasts_own_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``UPPER_BOUND = "forecast_errors"`` (experiment 16): a steady workload whose every 10-s mean the forecast
    meets gives a bound at the level where a rescale is cheap; a dear round keeps the rise envelope, and the
    default keeps the envelope everywhere without scoring any forecast."""
    from agent.analyze import forecasting

    settings = load_lab_settings(None, {"policy": "daedalus", "forecast_horizon_s": 300})
    monkeypatch.setattr(forecasting, "UPPER_BOUND", "forecast_errors")
    part = forecasting.Forecasting(settings, executor=None, enabled=True)
    for minute in range(1, 40):
        forecast = part.step(lagless(60.0 * minute, parallelism=2, uptime_s=60.0 * minute, rate=1500.0), 60.0 * minute)
    assert part.errors.ratios(), "forecasts scored"
    cheap = part.outlook(forecast, span=60, cheap_rescale=True)
    assert cheap.upper is not None and np.allclose(cheap.upper, 1500.0, rtol=1e-6)
    bound = part.errors.upper(forecast.values, part=part.envelope.part(1500.0), level=1500.0)  # type: ignore[arg-type]
    assert bound is not None and np.array_equal(cheap.upper, bound)
    dear = part.outlook(forecast, span=60, cheap_rescale=False)
    expected = part.envelope.upper(forecast.values, 1500.0, conditioned=False)  # type: ignore[arg-type]
    assert dear.upper is not None and np.array_equal(dear.upper, expected)
    part.close()
    monkeypatch.setattr(forecasting, "UPPER_BOUND", "rises")
    default = forecasting.Forecasting(settings, executor=None, enabled=True)
    default.step(lagless(60.0, parallelism=2, uptime_s=60.0, rate=1500.0), 60.0)
    assert not default.errors._pending  # noqa: SLF001 (nothing recorded: the default does not score forecasts)
    default.close()


@pytest.mark.parametrize("horizon", [90, 150, 61])
def test_a_forecast_horizon_off_the_minute_builds_and_runs_the_analyze_stage(horizon: int) -> None:
    """``forecast_horizon_s`` accepts any whole number of seconds from 60; the stage scoring the forecasts used to
    refuse one that was not a multiple of its minute step, and ``perdix run`` ended in a traceback."""
    settings = load_lab_settings(None, {"policy": "daedalus", "forecast_horizon_s": horizon})
    analyzer = Analyzer(settings)
    for minute in range(1, 4):
        analysis = analyzer.analyze(lagless(60.0 * minute, parallelism=2, uptime_s=60.0 * minute), now=60.0 * minute)
    assert analysis.forecast is not None and len(analysis.forecast) == horizon


@pytest.mark.parametrize("window_s", [5, 60])
def test_the_level_the_upper_bound_starts_from_is_the_workloads_mean_over_the_rate_window(window_s: int) -> None:
    """Where the workload stands is its mean over the rate window, the span every rate is averaged over: a descent
    from 3,000 to 1,000/s over a minute stands at its last 5 s with a 5-s window (a short target, or a compressed
    replay), not at the minute's mean, which no scale-in during the descent could carry."""
    from agent.analyze import forecasting

    settings = load_lab_settings(None, {"policy": "daedalus", "prometheus.rate_window_s": window_s})
    part = forecasting.Forecasting(settings, executor=None, enabled=True)
    descent = lagless(600.0, parallelism=2, uptime_s=600.0)
    descent = replace(descent, workload=np.linspace(3000.0, 1000.0, descent.times.size))
    part.step(descent, 600.0)
    assert part.level() == pytest.approx(float(np.mean(descent.workload[-window_s:])))
    # After a restart the readings of a rate window are dropped: the latest window of known ones stands in.
    restarted = lagless(660.0, parallelism=2, uptime_s=0.0)
    part.step(replace(restarted, workload=np.full(restarted.times.size, np.nan)), 660.0)
    if window_s * 2 > 60:
        assert part.level() == pytest.approx(float(np.mean(descent.workload[-(2 * window_s - 60) :])))
    else:
        assert part.level() is None
    part.close()


def test_the_usual_workload_is_the_rise_quantile_of_the_hour_kept_and_unknown_until_it_is_kept_whole() -> None:
    """Where the workload usually stands: the rise quantile of what the agent keeps (an hour at the default
    horizon), so a burst of a few minutes in it does not raise it and a trough below it stays a trough; None
    before the hour is kept whole."""
    from agent.analyze import forecasting

    settings = load_lab_settings(None, {"policy": "daedalus", "forecast_quantile": 0.8})
    part = forecasting.Forecasting(settings, executor=None, enabled=False)
    span = part.recent.spec.window_s
    assert span == 3600
    half = span // 2
    first = lagless(float(half), parallelism=2, uptime_s=float(half), rate=2_000.0, window_s=half)
    part.step(first, float(half))
    assert part.usual() is None
    rest = lagless(float(span), parallelism=2, uptime_s=float(span), rate=2_000.0, window_s=half)
    burst = rest.workload.copy()
    burst[-300:] = 20_000.0  # five minutes of a burst at the end of the hour
    part.step(replace(rest, workload=burst), float(span))
    kept = part.recent.last(span)
    assert part.usual() == pytest.approx(float(np.quantile(kept[np.isfinite(kept)], 0.8)))
    assert part.usual() == pytest.approx(2_000.0)
    part.close()


@pytest.mark.parametrize("noise_from", ["second differences", "changes"])
@pytest.mark.parametrize("whole_span", [True, False])
def test_the_workloads_noise_is_the_spread_of_its_loop_means_that_no_trend_explains(
    whole_span: bool, noise_from: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The noise a climb must rise beyond: the spread of the change of the workload's mean from one loop to the next
    that noise alone explains, relative to its level. A steady ramp (a climb of a constant slope) has none; the
    same ramp with independent noise on each loop's mean has that noise's spread times the square root of 2 (the
    change of two independent means), within the sampling error of an hour's 120 loops, and a loop without readings
    drops out. Unknown until the hour is kept whole (``NOISE_WHOLE_SPAN``), or else until eight second differences
    are known (ten loops)."""
    from agent.analyze import forecasting

    monkeypatch.setattr(forecasting, "NOISE_WHOLE_SPAN", whole_span)
    monkeypatch.setattr(forecasting, "NOISE_FROM", noise_from)
    settings = load_lab_settings(None, {"policy": "daedalus"})
    span = 3600
    loop = 30
    rng = np.random.default_rng(3)
    ramp = np.linspace(10_000.0, 40_000.0, span)
    means_noise = np.repeat(1.0 + 0.05 * rng.standard_normal(span // loop), loop)
    noisy = ramp * means_noise
    gap = noisy.copy()
    gap[1800:1830] = np.nan  # a loop of no readings: its stretch and the three second differences it is in drop out
    spread = 0.05 * math.sqrt(2.0)
    for workload, expected in ((ramp, 0.0), (noisy, spread), (gap, spread)):
        part = forecasting.Forecasting(settings, executor=None, enabled=False)
        for now in (270, 300):  # nine loops kept: seven second differences, too few; ten: eight
            window = 270 if now == 270 else 30
            kept = lagless(float(now), parallelism=2, uptime_s=float(now), rate=10_000.0, window_s=window)
            part.step(replace(kept, workload=workload[now - window : now]), float(now))
            assert (part.noise(loop) is None) == (whole_span or now == 270)
        rest = lagless(float(span), parallelism=2, uptime_s=float(span), rate=10_000.0, window_s=span - 300)
        part.step(replace(rest, workload=workload[300:]), float(span))
        noise = part.noise(loop)
        assert noise is not None
        assert noise == pytest.approx(expected, abs=0.005 if expected else 1e-9)
        part.close()
    if whole_span:  # an hour kept whole but less than half of it read
        part = forecasting.Forecasting(settings, executor=None, enabled=False)
        sparse = noisy.copy()
        sparse[: span // 2 + 60] = np.nan
        whole = lagless(float(span), parallelism=2, uptime_s=float(span), rate=10_000.0, window_s=span)
        part.step(replace(whole, workload=sparse), float(span))
        assert part.noise(loop) is None
        part.close()


@pytest.mark.parametrize(("noise_from", "read"), [("second differences", math.sqrt(2.0 / 3.0)), ("changes", 1.0)])
def test_the_noise_of_a_random_walk_is_its_steps_spread_only_when_read_from_the_changes(
    noise_from: str, read: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loop means that walk at random (each a step of 3 % from the one before, as many workloads do at the minute
    scale): a climb is read on one step, whose spread the changes give; the second differences, exact for noise
    independent from one loop to the next, read it at the square root of 2/3 (their variance is twice a step's, not
    three times). Averaged over eight walks of 360 loops, to within the sampling error (0.82 and 1.0 apart)."""
    from agent.analyze import forecasting

    monkeypatch.setattr(forecasting, "NOISE_FROM", noise_from)
    settings = load_lab_settings(None, {"policy": "daedalus"})
    span, loop = 3600, 10
    read_noises = []
    for seed in range(8):
        steps = np.exp(np.cumsum(0.03 * np.random.default_rng(seed).standard_normal(span // loop)))
        part = forecasting.Forecasting(settings, executor=None, enabled=False)
        whole = lagless(float(span), parallelism=2, uptime_s=float(span), rate=20_000.0, window_s=span)
        part.step(replace(whole, workload=20_000.0 * np.repeat(steps, loop)), float(span))
        noise = part.noise(loop)
        assert noise is not None
        read_noises.append(noise)
        part.close()
    assert float(np.mean(read_noises)) == pytest.approx(0.03 * read, rel=0.06)


@pytest.mark.parametrize(("target_s", "run_s"), [(300.0, 10), (60.0, 2), (15.0, 1)])
def test_a_watched_recovery_ends_after_a_thirtieth_of_the_target_caught_up(target_s: float, run_s: int) -> None:
    """The run of caught-up seconds that ends a watched recovery, and with it the planner's hold, is a part of the
    target recovery time (10 s of the default 300 s, a second at least), read again from the settings when a
    document saved under another target is restored."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error", "target_recovery_time_s": target_s})
    analyzer = Analyzer(settings)
    assert analyzer.watch.consecutive_s == run_s
    saved = Analyzer(load_lab_settings(None, {"telemetry.log_level": "error"})).to_dict()
    analyzer.restore(saved)
    assert analyzer.watch.consecutive_s == run_s


def test_a_restored_document_keeps_its_downtimes_and_takes_the_priors_and_alignment_set_now() -> None:
    """What an agent measured survives a restart; how it is configured does not: a document saved without aligned
    rescales or under other priors, restored by an agent whose target aligns each rescale with a checkpoint, prices
    no replay for a rescale and assumes the priors set now for what it never measured."""
    quiet = {"telemetry.log_level": "error"}
    before = Analyzer(load_lab_settings(None, {**quiet, **rescale_cost_overrides("restart")}))
    before.tracker.predictor.observe_downtime(kind="rescale", parallelism=4, downtime_s=0.4)
    aligned = load_lab_settings(None, {**quiet, **rescale_cost_overrides("in-place-aligned")})
    after = Analyzer(aligned)
    after.restore(json.loads(json.dumps(before.to_dict())))
    assert after.recovery.aligned_rescales
    assert after.recovery.replay_records(1000.0, "rescale") == 0.0
    assert after.recovery.replay_records(1000.0, "failure") > 0.0
    assert after.recovery.priors["rescale"] == aligned.downtime_rescale_prior_s == 2.0
    assert after.recovery.downtime("rescale", 4) == pytest.approx(0.4)


def test_the_drift_is_the_rise_of_the_rate_windows_means_and_nothing_else() -> None:
    """A slow rise is read as its slope whatever the noise within each window; a flat or falling workload, one of
    fewer than three windows, or one with a window of no readings drifts by nothing."""
    from agent.analyze.forecasting import drift_per_s

    rng = np.random.default_rng(3)
    ramp = 100_000.0 + 10.0 * np.arange(300.0)
    assert drift_per_s(ramp + rng.normal(0.0, 2_000.0, 300) * (np.arange(300) % 60 != 59), 60) == pytest.approx(
        10.0, rel=0.3
    )
    assert drift_per_s(ramp, 60) == pytest.approx(10.0)
    assert drift_per_s(ramp[::-1], 60) == 0.0
    assert drift_per_s(np.full(300, 5_000.0), 60) == 0.0
    assert drift_per_s(ramp[-119:], 60) == 0.0  # one whole window and a part: no line
    gap = ramp.copy()
    gap[60:120] = np.nan
    assert drift_per_s(gap, 60) == 0.0
    some = ramp.copy()
    some[60:90] = np.nan  # half a window read: its mean stands
    assert drift_per_s(some, 60) > 0.0


@pytest.mark.parametrize(
    ("where", "cheap", "drifted"),
    [("dear", False, True), ("dear", True, False), ("never", False, False), ("always", True, True)],
)
def test_a_dear_recovery_outruns_the_workloads_drift_continued_up_to_the_upper_bound(
    monkeypatch: pytest.MonkeyPatch, where: str, cheap: bool, drifted: bool
) -> None:
    """On a slow rise (1 % a minute, under any climb margin) the arrivals a recovery must outrun go on rising from
    the level where :data:`ARRIVALS_DRIFT_WHERE` says, never above the upper bound, where the forecast stays flat;
    else they are the point forecast never below the level."""
    from agent.analyze import forecasting

    monkeypatch.setattr(forecasting, "ARRIVALS_DRIFT_WHERE", where)
    settings = load_lab_settings(None, {"policy": "daedalus", "forecast_horizon_s": 600})
    part = forecasting.Forecasting(settings, executor=None, enabled=True)
    slope = 100_000.0 * 0.01 / 60.0
    for minute in range(1, 15):
        round_ = lagless(60.0 * minute, parallelism=10, uptime_s=60.0 * minute)
        round_ = replace(round_, workload=100_000.0 + slope * round_.times)
        forecast = part.step(round_, 60.0 * minute)
    level = part.level()
    assert level is not None
    # The forecast as a naive one reads a slow rise: flat at the level.
    forecast = replace(forecast, values=np.full(600, level))
    outlook = part.outlook(forecast, span=60, cheap_rescale=cheap)
    assert (
        outlook.arrivals is not None and outlook.upper is not None and level is not None and forecast.values is not None
    )
    plain = np.maximum(forecast.values, level)
    assert np.all(outlook.arrivals >= plain)
    assert np.all(outlook.arrivals <= np.maximum(plain, outlook.upper))
    if drifted:
        ahead = outlook.arrivals[300]
        assert ahead > plain[300]
        assert ahead == pytest.approx(min(level + slope * 330.0, outlook.upper[300]), rel=1e-3)
    else:
        assert np.array_equal(outlook.arrivals, plain)
    part.close()


@pytest.mark.parametrize("then", ["flat", "climb"])
def test_arrivals_carry_no_drift_once_the_rise_stops_or_where_it_is_a_climb(
    monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    """Five minutes of a slow rise, then two minutes flat at its top (the drift is over), or one flat and one
    climbing 20 % (a climb, the planner's climb rules'): the arrivals are the point forecast never below the level."""
    from agent.analyze import forecasting

    monkeypatch.setattr(forecasting, "ARRIVALS_DRIFT_WHERE", "always")
    settings = load_lab_settings(None, {"policy": "daedalus", "forecast_horizon_s": 600})
    part = forecasting.Forecasting(settings, executor=None, enabled=True)
    for minute in range(1, 8):
        round_ = lagless(60.0 * minute, parallelism=10, uptime_s=60.0 * minute)
        rate = 100_000.0 + 1_000.0 * np.minimum(round_.times, 300.0) / 60.0
        if minute == 7 and then == "climb":
            rate = rate * (1.0 + 0.2 * (round_.times - 360.0) / 60.0)
        forecast = part.step(replace(round_, workload=rate), 60.0 * minute)
    level = part.level()
    assert level is not None
    forecast = replace(forecast, values=np.full(600, level))
    outlook = part.outlook(forecast, span=60, cheap_rescale=True)
    assert outlook.arrivals is not None and np.array_equal(outlook.arrivals, np.full(600, level))
    assert forecasting.drift_per_s(part.recent.last(300), 60) > 0.0  # the fit alone still reads the rise
    part.close()


def planner_inputs(
    monkeypatch: pytest.MonkeyPatch, trace: Trace, settings: LabSettings, *, hours: float
) -> list[PlanInput]:
    """What the whole-job policy was given at every round of the agent's own loop over ``hours`` of ``trace``."""
    return replayed_inputs(monkeypatch, Replay(trace, settings, hours=hours))


def replayed_inputs(monkeypatch: pytest.MonkeyPatch, replay: Replay) -> list[PlanInput]:
    """What the whole-job policy was given at every round of the agent's own loop as ``replay`` runs."""
    from agent import loop as agent_loop

    given: list[PlanInput] = []
    original = agent_loop.plan_input_of

    def recorded(*args: Any, **kwargs: Any) -> PlanInput:
        given.append(original(*args, **kwargs))
        return given[-1]

    monkeypatch.setattr(agent_loop, "plan_input_of", recorded)
    replay.run()
    return given


def test_the_workloads_noise_and_usual_level_reach_the_planner_once_an_hour_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A workload of one point a minute about 30,000/s with independent noise of 10 % on each: what the planner is
    given (the agent's PlanInput, through its own loop) carries no noise nor usual level until the hour is kept whole,
    then a noise of that order (the loop-to-loop spread of the minute's means, not the per-second noise's) and a
    usual level about the workload's upper part."""
    minutes = np.arange(0, 80, dtype=float)
    rates = 30_000.0 * (1.0 + 0.10 * np.random.default_rng(3).standard_normal(minutes.size))
    settings = load_lab_settings(None, {"telemetry.log_level": "error", "simulator.workload_noise": 0.02})
    given = planner_inputs(monkeypatch, Trace("noisy", minutes * 60.0, rates), settings, hours=75 / 60)
    seen = [(plan_input.now, plan_input.workload_noise, plan_input.workload_usual) for plan_input in given]
    early = [(noise, usual) for now, noise, usual in seen if now < 3000]
    late = [(noise, usual) for now, noise, usual in seen if now >= 3900]
    assert early and all(noise is None and usual is None for noise, usual in early)
    assert late and all(noise is not None and usual is not None for noise, usual in late)
    noises = [noise for noise, _ in late if noise is not None]
    # The minute's points are 10 % apart; the per-second noise of 2 % alone gives a 60-s mean's change under 0.5 %.
    assert 0.03 < min(noises) <= max(noises) < 0.2
    usuals = [usual for _, usual in late if usual is not None]
    assert all(30_000.0 < usual < 36_000.0 for usual in usuals)


def test_a_sustained_climb_starts_where_every_loop_since_ran_above_the_one_before() -> None:
    """``Forecasting.climb_from``: the mean of the stretch ``loops`` before the last, where each since ran above the
    one before it; None where one fell back or held, where a stretch has no readings, with too little kept, or with
    no loops asked for."""
    from agent.analyze import forecasting

    settings = load_lab_settings(None, {"policy": "daedalus"})
    loop = 60
    means = [20_000.0, 21_000.0, 22_500.0, 24_000.0]

    def read(levels: list[float], *, gap: bool = False, loops: int | None = 3) -> float | None:
        workload = np.repeat(np.asarray(levels), loop)
        if gap:
            workload[loop : 2 * loop] = np.nan
        part = forecasting.Forecasting(settings, executor=None, enabled=False)
        now = float(workload.size)
        kept = lagless(now, parallelism=2, uptime_s=now, rate=20_000.0, window_s=workload.size)
        part.step(replace(kept, workload=workload), now)
        try:
            return part.climb_from(loop, loops)
        finally:
            part.close()

    assert read(means) == pytest.approx(20_000.0)
    assert read([19_000.0, *means]) == pytest.approx(20_000.0)  # only the last loops + 1 stretches count
    assert read([20_000.0, 21_000.0, 20_900.0, 24_000.0]) is None
    assert read([20_000.0, 21_000.0, 21_000.0, 24_000.0]) is None
    assert read(means, gap=True) is None
    assert read(means[1:]) is None
    assert read(means, loops=None) is None
    assert read(means, loops=2) == pytest.approx(21_000.0)


def test_a_sustained_climbs_foot_reaches_the_planner_on_a_ramp_and_not_on_a_flat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ten minutes flat at 20,000/s, then a ramp to 60,000/s over twenty: what the planner is given through the agent's
    own loop carries no climb's foot on the flat, and on the ramp the mean three loops back, below the workload now."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error"})
    trace = Trace("ramp", np.array([0.0, 600.0, 1800.0, 2400.0]), np.array([20_000.0, 20_000.0, 60_000.0, 60_000.0]))
    given = planner_inputs(monkeypatch, trace, settings, hours=1800 / 3600)
    seen = [(plan_input.now, plan_input.workload_climb_from, plan_input.workload_avg) for plan_input in given]
    flat = [climb_from for now, climb_from, _ in seen if now <= 600]
    ramp = [(climb_from, workload) for now, climb_from, workload in seen if 900 <= now <= 1800]
    assert flat and all(climb_from is None for climb_from in flat)
    read = [(climb_from, workload) for climb_from, workload in ramp if climb_from is not None]
    assert len(read) >= len(ramp) // 2
    assert all(workload is not None and climb_from < workload for climb_from, workload in read)


def test_the_start_and_drain_of_the_recovery_held_for_reach_the_planner_while_it_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two hours of a steady 30,000/s with two failures an hour: each round the planner is told the job recovers, it is
    told since when (at or before the round, within the target of it: the watch holds no longer) and, where measured,
    how fast the backlog falls; no round told it does not recover is given either."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error", "simulator.failure_seed": 7})
    trace = Trace("steady", np.array([0.0, 7200.0]), np.array([30_000.0, 30_000.0]))
    replay = Replay(trace, settings, hours=2.0, failures_per_hour=2.0)
    given = replayed_inputs(monkeypatch, replay)
    held = [plan_input for plan_input in given if plan_input.recovering]
    assert held
    # Each start is a stop of the job: an injected failure (as the uptime tells it, within a few seconds) or a rescale.
    stops = [*replay.failures, *(p.last_rescale_at for p in given if p.last_rescale_at is not None)]
    for p in held:
        assert p.recovering_since is not None and p.recovering_since <= p.now
        assert min(abs(p.recovering_since - stop) for stop in stops) <= 5.0
    # Some round holds a loop and more after its recovery's start (the start is not this round's time).
    assert any(p.now - p.recovering_since >= settings.loop_interval_s for p in held if p.recovering_since is not None)
    # The backlog's drain over the loop is given where the job ran long enough in it, and the backlog fell.
    drains = [p.backlog_drain for p in held if p.backlog_drain is not None]
    assert drains and max(drains) > 0.0
    free = [p for p in given if not p.recovering]
    assert all(p.recovering_since is None and p.backlog_drain is None for p in free)


def test_a_partition_offset_that_jumps_moves_no_capacity() -> None:
    """One partition's log-end offset read 1e14 records ahead (an exporter's glitch), or a jump the workload's own
    reading cannot tell from a burst, must not move the capacity at any scale-out: the offsets whose records
    disagree with the workload read over the same round are refused (logged), and one reading alone never moves
    the partition weights."""
    from structlog.testing import capture_logs

    settings = load_lab_settings(None, {"telemetry.log_level": "error"})
    job = SimulatedFlinkJob(
        Trace("near", np.array([0.0, 7200.0]), np.array([110_000.0, 110_000.0])), settings.simulator
    )
    monitor = SimulatedMonitor(job)
    clean, glitched, nudged = Analyzer(settings), Analyzer(settings), Analyzer(settings)
    rounds = []
    for now in (60, 120, 180):
        job.run_until(now)
        rounds.append(monitor.observe(since=now - 60, now=now))
    for analyzer in (clean, glitched, nudged):
        analyzer.analyze(rounds[0], now=60)
    assert rounds[1].partition_offsets is not None
    total = sum(
        end - start for (end, _), start in zip(rounds[1].partition_offsets, rounds[1].partition_ends_since or ())
    )

    def jumped(observation: Observation, by: float) -> Observation:
        offsets = list(observation.partition_offsets or ())
        end, committed = offsets[0]
        offsets[0] = (end + int(by), committed)
        return replace(observation, partition_offsets=tuple(offsets))

    expected = clean.analyze(rounds[1], now=120).capacities
    with capture_logs() as logs:
        absurd = glitched.analyze(jumped(rounds[1], 1e14), now=120).capacities
    assert [e for e in logs if e["event"] == "capacity.partition_offsets_refused"]
    inside = nudged.analyze(jumped(rounds[1], 0.2 * total), now=120).capacities
    for n in range(1, 17):
        assert absurd[n] == pytest.approx(expected[n], rel=1e-9), n
        assert inside[n] == pytest.approx(expected[n], rel=1e-9), n
    after = clean.analyze(rounds[2], now=180).capacities
    assert nudged.analyze(rounds[2], now=180).capacities == pytest.approx(after)


def _flat_job_rounds(overrides: dict[str, Any], rate: float, until_s: int) -> tuple[LabSettings, list[Observation]]:
    """The lab's settings with ``overrides``, and the rounds of a minute its monitor reads up to ``until_s`` from a
    simulated job on a flat workload of ``rate``."""
    lab = load_lab_settings(None, overrides)
    job = SimulatedFlinkJob(Trace("flat", np.array([0.0, 7200.0]), np.array([rate, rate])), lab.simulator)
    monitor = SimulatedMonitor(job)
    rounds = []
    for now in range(60, until_s + 1, 60):
        job.run_until(now)
        rounds.append(monitor.observe(since=now - 60, now=now))
    return lab, rounds


def test_the_partition_count_the_sources_report_keeps_the_split_at_a_scale_out_not_run() -> None:
    """At 5 readers of 12 equal partitions the busiest reads 3, as at 4: the job's capacity at 4 is its capacity
    at 5. Without the count the skew seen at 5 is kept at 4 and the capacity read a fifth low (every scale-in to
    4 refused on it); with the count the sources report, the split is kept. A count set in the settings wins."""
    from structlog.testing import capture_logs

    overrides = {
        "telemetry.log_level": "error",
        "simulator.partitions": 12,
        "simulator.partition_skew": 0.0,
        "simulator.worker_speed_spread": 0.0,
        "simulator.workload_noise": 0.0,
        "simulator.initial_parallelism": 5,
    }
    lab, observed = _flat_job_rounds(overrides, 40_000.0, 600)
    # A job whose offsets are not exported: only the readers' count, as the Prometheus monitor reads it.
    rounds = [replace(o, partition_offsets=None, partition_ends_since=None) for o in observed]
    blind = Analyzer(lab.model_copy(update={"source_partitions": None}))
    counted = Analyzer(lab.model_copy(update={"source_partitions": None}))
    configured = Analyzer(lab.model_copy(update={"source_partitions": 12}))
    with capture_logs() as logs:
        for index, observation in enumerate(rounds):
            now = 60.0 * (index + 1)
            unknown = blind.analyze(observation, now=now)
            # A round in which some readers went unscraped reads fewer: the count only grows.
            read = counted.analyze(replace(observation, source_partitions=7 if index == 5 else 12), now=now)
            kept = configured.analyze(replace(observation, source_partitions=6), now=now)
    assert [e["partitions"] for e in logs if e["event"] == "capacity.partitions_read"] == [12]
    at_five = read.capacities[5]
    assert at_five is not None and unknown.capacities[5] == pytest.approx(at_five, rel=1e-9)
    assert unknown.capacities[4] == pytest.approx(at_five * 4 / 5, rel=1e-9)
    assert read.capacities[4] == pytest.approx(at_five, rel=1e-9)
    assert read.capacities[6] == pytest.approx(at_five * 6 / 4, rel=1e-9), "6 readers of 12 read 2 each"
    assert read.source_partitions == 12 and unknown.source_partitions is None
    assert kept.source_partitions == 12 and kept.capacities[4] == pytest.approx(at_five, rel=1e-9)


@pytest.mark.parametrize(("where", "cheap", "held"), [("always", False, True), ("dear", True, False)])
def test_a_forecast_is_held_to_the_steepest_rises_the_workload_has_shown(
    monkeypatch: pytest.MonkeyPatch, where: str, cheap: bool, held: bool
) -> None:
    """A workload that has climbed 10 % a minute at its steepest, forecast to go 5x within the horizon (a model
    carrying a climb's momentum): within a lead the history measures, the forecast the round plans with rises no
    more than the workload has within it, counted from where the level stands; past the longest lead measured, no
    faster than that lead's rise; where it stays under the bound it stands as it is."""
    from agent.analyze import forecasting

    monkeypatch.setattr(forecasting, "FORECAST_HELD_WHERE", where)
    settings = load_lab_settings(None, {"policy": "daedalus", "forecast_horizon_s": 600})
    part = forecasting.Forecasting(settings, executor=None, enabled=True)
    for minute in range(1, 12):
        round_ = lagless(60.0 * minute, parallelism=10, uptime_s=60.0 * minute)
        rate = 10_000.0 * (1.0 + 0.1 * np.minimum(round_.times, 240.0) / 60.0)
        forecast = part.step(replace(round_, workload=rate), 60.0 * minute)
    level = part.level()
    assert level is not None and level == pytest.approx(14_000.0)
    wild = replace(forecast, values=np.linspace(level, 5 * level, 600))
    outlook = part.outlook(wild, span=60, cheap_rescale=cheap)
    values = outlook.forecast.values
    assert values is not None and wild.values is not None
    if not held:
        assert np.array_equal(values, wild.values)
        return
    highest = part.envelope.highest()
    longest = max(highest)
    assert longest < 600 and highest[longest] < 1.5
    assert np.all(values <= wild.values)
    # Each second ahead is counted from the level, half a rate window back.
    ahead = np.arange(1, 601) + 0.5 * settings.prometheus.rate_window_s
    shortest = min(highest)
    within = ahead <= longest
    bound = np.where(
        within,
        np.interp(ahead, [0.0, *highest], [1.0, *highest.values()]),
        1 + (highest[longest] - 1) * ahead / longest,
    )
    assert shortest < longest and np.any(within) and not np.all(within)
    assert values == pytest.approx(np.minimum(wild.values, level * bound), rel=1e-9)
    assert values[-1] < wild.values[-1]
    assert outlook.arrivals is not None and np.all(outlook.arrivals <= np.maximum(values, level))
    calm = replace(forecast, values=np.full(600, level))
    assert np.array_equal(part.outlook(calm, span=60, cheap_rescale=cheap).forecast.values, calm.values)
    part.close()


def _reads_only(observation: Observation, **changes: Any) -> Observation:
    """``observation`` as a job without kafka_exporter shows it: no log-end offsets, and each partition's reader
    advanced what the partition received (the simulated job keeps up: its readers read what arrives)."""
    ends = [end for end, _ in observation.partition_offsets or ()]
    since = observation.partition_ends_since or ()
    changes = {"partition_reads": tuple(zip(since, ends)), **changes}
    return replace(observation, partition_offsets=None, partition_ends_since=None, **changes)


def _first_read_back(reads: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """``reads`` with the first partition's read going back (its reader restored an older offset)."""
    (start, end), *rest = reads
    return ((end, start), *rest)


def test_the_readers_offsets_weigh_the_partitions_while_the_job_keeps_up() -> None:
    """Without kafka_exporter the readers' own per-partition offsets give the partition weights, and with them the
    capacity at every scale-out, as the log-end offsets would: but only over a round whose backlog stayed within
    1 % of the records read (a backlogged reader reads its partitions round-robin, not as they receive), in which
    the job did not restart, no read went back, and every partition the readers count has its own series."""
    overrides = {
        "telemetry.log_level": "error",
        "simulator.partitions": 12,
        "simulator.partition_skew": 1.0,
        "simulator.workload_noise": 0.0,
        "simulator.initial_parallelism": 4,
    }
    lab, rounds = _flat_job_rounds(overrides, 20_000.0, 360)
    assert all(o.partition_ends_since is not None for o in rounds[1:])
    records = sum(e - s for (e, _), s in zip(rounds[1].partition_offsets or (), rounds[1].partition_ends_since or ()))
    kept_up = [_reads_only(o) for o in rounds[1:]]
    assert max(float(np.nanmax(o.consumer_lag)) for o in kept_up) <= 0.01 * records, "the simulated job keeps up"

    def capacities(observations: list[Observation], settings: LabSettings = lab) -> dict[int, float | None]:
        analyzer = Analyzer(settings)
        for index, observation in enumerate(observations):
            analysis = analyzer.analyze(observation, now=60.0 * (index + 2))
        return analysis.capacities

    def at(capacity: dict[int, float | None]) -> list[float]:
        return [float(capacity[n] or 0.0) for n in range(1, 13)]

    by_ends = capacities(rounds[1:])
    by_reads = capacities(kept_up)
    blind = capacities([_reads_only(o, partition_reads=None) for o in rounds[1:]])
    np.testing.assert_allclose(at(by_reads), at(by_ends), rtol=1e-6)
    assert not np.allclose(at(blind), at(by_ends), rtol=0.02), "the skew is what the weights tell"

    backlogged = [replace(o, consumer_lag=np.full_like(o.consumer_lag, 0.02 * records)) for o in kept_up]
    restarted = [replace(o, uptime=np.linspace(-20.0, 40.0, o.times.size).clip(0.0)) for o in kept_up]
    went_back = [replace(o, partition_reads=_first_read_back(o.partition_reads or ())) for o in kept_up]
    for refused in (backlogged, restarted, went_back):
        np.testing.assert_allclose(at(capacities(refused)), at(blind), rtol=1e-6)
    # A stretch shorter than the window (a 5-s loop reads its offsets 4 s apart): what the partitions were read is
    # checked against the workload over the stretch's own seconds, not the window's.
    from structlog.testing import capture_logs

    shorter = [replace(o, partition_reads_span_s=0.7 * o.times.size, workload=o.workload / 0.7) for o in kept_up]
    with capture_logs() as logs:
        np.testing.assert_allclose(at(capacities(shorter)), at(by_ends), rtol=1e-6)
        assert not [e for e in logs if e["event"] == "capacity.partition_offsets_refused"]
        capacities([replace(o, partition_reads_span_s=None) for o in shorter])
        assert [e for e in logs if e["event"] == "capacity.partition_offsets_refused"]
    # Two topics of 12 partitions each, their readers' offsets folded into 12 series by partition number.
    two_topics = lab.model_copy(update={"source_partitions": 24})
    blind_of_two = capacities([_reads_only(o, partition_reads=None) for o in rounds[1:]], two_topics)
    np.testing.assert_allclose(at(capacities(kept_up, two_topics)), at(blind_of_two), rtol=1e-6)
