"""The analyzer's judgement of a running recovery: is the job working its backlog off or falling behind?"""

from __future__ import annotations

import numpy as np

from agent.analyze import _falling_behind
from agent.observation import Observation


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
    assert _falling_behind(observation(growing, uptime_s=3600))


def test_a_job_working_its_backlog_off_or_holding_it_is_not() -> None:
    assert not _falling_behind(observation(np.linspace(70_000, 10_000, 60), uptime_s=3600))
    assert not _falling_behind(observation(np.full(60, 5_000.0) + np.sin(np.arange(60)) * 200, uptime_s=3600))


def test_only_seconds_since_the_restart_count() -> None:
    """While down every job's backlog grows: 40 s of down time then 20 s of catching up is no verdict."""
    lag = np.concatenate([np.linspace(0, 40_000, 40), np.linspace(40_000, 30_000, 20)])
    assert not _falling_behind(observation(lag, uptime_s=20))
    assert _falling_behind(observation(lag, uptime_s=3600)), "over the whole minute the backlog grew"


def test_too_few_running_seconds_or_no_uptime_is_no_verdict() -> None:
    growing = np.linspace(10_000, 70_000, 60)
    assert not _falling_behind(observation(growing, uptime_s=12))
    assert not _falling_behind(observation(growing, uptime_s=None))
