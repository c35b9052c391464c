"""Hot reload: the agent switches to a newer registry model that forecast the recent window better,
and ignores worse, unscorable or corrupt ones."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from structlog.testing import capture_logs

from agent.model_reload import ModelReloader
from models.forecast.base import Forecaster
from models.forecast.reloaded import ReloadedForecaster
from models.forecast.scoring import RecentWorkload
from models.forecast.seasonal import SeasonalForecaster
from models.registry import MODEL, version_at
from spark.registry import ModelRegistry
from tests.fakes.forecasters import ScaledPersistence, feed
from tests.spark.conftest import daily_workload

T0 = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)
START_S = datetime(2026, 11, 1, tzinfo=UTC).timestamp()
V1, V2, V3 = (version_at(T0 + timedelta(hours=h)) for h in range(3))
WINDOW_START_S = START_S + 2 * 86_400 + 6 * 3600
"""The hour the agent has seen: 06:00 on the day after the two days the models were fitted on (the morning ramp)."""


def fitted_model(level: float = 1000.0) -> SeasonalForecaster:
    """A seasonal model fitted on two days of a daily sine."""
    return SeasonalForecaster(residual="naive").fit(daily_workload(2, seed=1, level=level), start_s=START_S)


def publish(registry: ModelRegistry, version: str, wape: float | None, level: float = 1000.0) -> SeasonalForecaster:
    model = fitted_model(level)
    registry.publish(
        "orders", version, metadata={"backtest": {"wape": wape}, "data": {"end": "2026-11-03"}}, model=model.to_dict()
    )
    return model


def the_daily_sine(seconds: int, *, level: float = 1000.0, seed: int = 4) -> np.ndarray:
    """What the job does from WINDOW_START_S on, at 1 s: the sine the models learned, 5 % noise."""
    rng = np.random.default_rng(seed)
    t = WINDOW_START_S + np.arange(seconds)
    return (
        level * (1.0 + 0.5 * np.sin(2 * np.pi * (t - START_S) / 86_400)) * (1.0 + 0.05 * rng.standard_normal(seconds))
    )


def window(running: Forecaster, series: np.ndarray) -> RecentWorkload:
    """The analyzer's recent window after ``series``, with ``running``'s forecasts issued every loop."""
    recent = RecentWorkload()
    feed(recent, running, series, start_s=WINDOW_START_S)
    return recent


@pytest.fixture()
def registry(tmp_path: Path) -> ModelRegistry:
    return ModelRegistry(str(tmp_path / "registry"))


def test_without_a_running_model_the_agent_takes_the_newest_scored_model(registry: ModelRegistry) -> None:
    publish(registry, V1, 0.2)
    publish(registry, V2, 0.1, level=2000.0)
    with capture_logs() as logs:
        reloader = ModelReloader(registry, "orders")
        forecaster = reloader.check(RecentWorkload(), online=None)
        assert reloader.check(RecentWorkload(), online=None) is None  # nothing newer than what is in use now
    assert isinstance(forecaster, ReloadedForecaster) and forecaster.version == V2
    assert isinstance(forecaster, Forecaster)  # a drop-in for the agent's forecaster
    assert reloader.current_version == V2
    switched = [e for e in logs if e["event"] == "model_reload.switched"]
    assert len(switched) == 1 and "no model yet" in switched[0]["reason"]


def test_a_model_that_forecast_the_window_better_replaces_the_running_one_and_says_why(registry: ModelRegistry) -> None:
    publish(registry, V1, 0.3)
    # The running model forecasts 30 % low: its window WAPE is 0.3, whatever its own last-minute score said.
    running = ScaledPersistence(0.7).fit(np.array([1000.0]))
    recent = window(running, the_daily_sine(3600))
    with capture_logs() as logs:
        reloader = ModelReloader(registry, "orders", current_version=V1)
        assert reloader.check(recent, online=running) is None  # V1 is in use, nothing newer
        publish(registry, V2, 0.5)  # a poor back-test elsewhere does not matter: this job's window does
        forecaster = reloader.check(recent, online=running, now=WINDOW_START_S + 3600)
    assert forecaster is not None and forecaster.version == V2 and forecaster.backtest_wape == 0.5
    (event,) = [e for e in logs if e["event"] == "model_reload.switched"]
    assert event["previous"] == V1
    assert event["running_wape"] == pytest.approx(0.3, abs=0.02)
    assert event["candidate_wape"] < 0.1
    # Both scored on the same 7 origins of the last hour, 15 min ahead in 1-min steps.
    assert (event["origins"], event["horizon_s"], event["step_s"]) == (7, 900, 60)
    assert event["score_ms"] > 0
    assert event["reason"].startswith(f"window WAPE {event['candidate_wape']:.4f} beats the running model's")


def test_a_model_worse_on_the_window_is_kept_out_and_scored_again_every_few_loops(registry: ModelRegistry) -> None:
    # A job without the daily season the registry model learned: persistence beats the profile.
    flat = np.full(3600, 1000.0) * (1.0 + 0.01 * np.random.default_rng(5).standard_normal(3600))
    running = ScaledPersistence(1.0).fit(np.array([1000.0]))
    recent = window(running, flat)
    publish(registry, V2, 0.01)  # an excellent back-test on other data is no reason to switch
    with capture_logs() as logs:
        reloader = ModelReloader(registry, "orders", score_every_loops=5)
        assert [reloader.check(recent, online=running) for _ in range(3)] == [None, None, None]
        # The running model degrades: from now on it forecasts half the workload.
        worse = ScaledPersistence(0.5).fit(np.array([1000.0]))
        degraded = window(worse, flat)
        assert reloader.check(degraded, online=worse) is None  # loop 4: not scored again yet
        assert reloader.check(degraded, online=worse) is None  # loop 5
        switched = reloader.check(degraded, online=worse)  # loop 6: five loops after the first score
    assert switched is not None and switched.version == V2
    kept = [e for e in logs if e["event"] == "model_reload.kept"]
    assert len(kept) == 1 and kept[0]["candidate_wape"] > kept[0]["running_wape"]
    assert [e["event"] for e in logs].count("model_reload.switched") == 1


def test_a_tie_or_a_win_below_min_improvement_keeps_the_running_model(registry: ModelRegistry) -> None:
    publish(registry, V1, 0.1)
    # The running model is the registry model itself, fed at 1 s: the replay scores it exactly as it ran.
    same = ReloadedForecaster(fitted_model(), job="orders", version="v0", backtest_wape=0.1)
    same.model.align(WINDOW_START_S)
    recent = window(same, the_daily_sine(3600))
    assert ModelReloader(registry, "orders").check(recent, online=same) is None
    running = ScaledPersistence(0.7).fit(np.array([1000.0]))
    lagging = window(running, the_daily_sine(3600))
    assert ModelReloader(registry, "orders", min_improvement=0.5).check(lagging, online=running) is None
    assert ModelReloader(registry, "orders", min_improvement=0.1).check(lagging, online=running) is not None


def test_a_running_model_without_enough_scored_forecasts_waits(registry: ModelRegistry) -> None:
    publish(registry, V1, 0.1)
    running = ScaledPersistence(0.5).fit(np.array([1000.0]))
    recent = window(running, the_daily_sine(1800))  # half an hour: two origins have their whole horizon
    with capture_logs() as logs:
        reloader = ModelReloader(registry, "orders")
        assert reloader.check(recent, online=running) is None
        assert reloader.check(recent, online=running) is None
    assert [e["event"] for e in logs] == ["model_reload.waiting"]


def test_a_corrupt_artifact_is_skipped_with_a_log_line(registry: ModelRegistry, tmp_path: Path) -> None:
    publish(registry, V1, 0.1)
    publish(registry, V2, 0.05)
    model_file = tmp_path / "registry" / "orders" / V2 / MODEL
    model_file.write_text(model_file.read_text().replace('"kind"', '"kinb"'))
    publish(registry, V3, None)  # committed but never scored
    with capture_logs() as logs:
        reloader = ModelReloader(registry, "orders")
        forecaster = reloader.check(RecentWorkload(), online=None)
        assert reloader.check(RecentWorkload(), online=None) is None
    assert forecaster is not None and forecaster.version == V1
    events = [e["event"] for e in logs]
    assert events.count("model_reload.corrupt") == 1 and events.count("model_reload.unscored") == 1
    (corrupt,) = [e for e in logs if e["event"] == "model_reload.corrupt"]
    assert corrupt["version"] == V2 and "checksum" in corrupt["reason"]


def test_a_valid_checksum_over_a_broken_state_is_also_skipped(registry: ModelRegistry) -> None:
    registry.publish("orders", V1, metadata={"backtest": {"wape": 0.1}}, model={"kind": "seasonal", "profile": []})
    with capture_logs() as logs:
        assert ModelReloader(registry, "orders").check(RecentWorkload(), online=None) is None
    assert [e["event"] for e in logs] == ["model_reload.corrupt"]


def test_a_missing_or_empty_registry_never_raises(tmp_path: Path) -> None:
    assert ModelReloader(str(tmp_path / "nowhere"), "orders").check(RecentWorkload(), online=None) is None
    (tmp_path / "file").write_text("not a directory")
    assert ModelReloader(str(tmp_path / "file"), "orders").check(RecentWorkload(), online=None) is None


def test_the_reloaded_forecaster_runs_at_the_agent_step(registry: ModelRegistry) -> None:
    model = publish(registry, V1, 0.1)
    forecaster = ModelReloader(registry, "orders").check(RecentWorkload(), online=None, now=START_S + 3 * 86_400)
    assert forecaster is not None
    reference = SeasonalForecaster.from_dict(model.to_dict())
    reference.align(START_S + 3 * 86_400)
    # 90 one-second samples: one full minute reaches the model, 30 s wait for the next minute.
    seconds = np.full(90, 1500.0)
    forecaster.update(seconds)
    reference.update(np.array([1500.0]))
    prediction = forecaster.predict(900)
    minutes = reference.predict(16)
    assert prediction.shape == (900,)
    # The first 30 s finish the current minute, then each minute's forecast holds for 60 s.
    assert np.allclose(prediction[:30], minutes[0])
    assert np.allclose(prediction[30:90], minutes[1])
    assert np.allclose(prediction[-30:], minutes[15])
    restored = ReloadedForecaster.from_dict(forecaster.to_dict())
    assert np.allclose(restored.predict(900), prediction)


def test_refitting_the_reloaded_model_keeps_the_daily_profile(registry: ModelRegistry) -> None:
    publish(registry, V1, 0.1)
    forecaster = ModelReloader(registry, "orders").check(RecentWorkload(), online=None)
    assert forecaster is not None
    profile = forecaster.model.profile.copy()
    forecaster.fit(np.full(900, 5000.0))
    assert np.array_equal(forecaster.model.profile, profile)
    # The residual model now starts from the refit window: the level follows the new data.
    ahead = forecaster.predict(60)
    expected_minute = forecaster.model.seasonal(np.array([forecaster.model.next_s]))[0]
    last_profile = forecaster.model.seasonal(np.array([forecaster.model.next_s - 60]))[0]
    assert ahead[0] == pytest.approx(expected_minute + (5000.0 - last_profile))


def test_the_replay_runs_beside_the_loop_and_a_stale_verdict_is_dropped(registry: ModelRegistry) -> None:
    publish(registry, V1, 0.3)
    running = ScaledPersistence(0.7).fit(np.array([1000.0]))
    recent = window(running, the_daily_sine(3600))
    release = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as executor:
        executor.submit(release.wait)  # the executor is busy: the replay has to wait its turn
        reloader = ModelReloader(registry, "orders", executor=executor, score_every_loops=1)
        assert reloader.check(recent, online=running) is None  # replay submitted, the loop goes on
        assert reloader.check(recent, online=running) is None  # not done yet
        # The running model was replaced meanwhile (a background retrain): that verdict is no use.
        replaced = ScaledPersistence(0.7).fit(np.array([1000.0]))
        assert reloader.check(recent, online=replaced) is None
        release.set()
        deadline = time.monotonic() + 30
        switched = None
        while switched is None and time.monotonic() < deadline:
            switched = reloader.check(recent, online=running)
            time.sleep(0.01)  # polling the background replay, bounded by the deadline
    assert switched is not None and switched.version == V1
    assert reloader.last_score_ms is not None and reloader.last_score_ms > 0
