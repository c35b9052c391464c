"""Hot reload: the agent switches to a newer, better registry model, and ignores worse or corrupt ones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from structlog.testing import capture_logs

from agent.model_reload import ModelReloader, ReloadedForecaster
from models.forecast.base import Forecaster
from models.forecast.seasonal import SeasonalForecaster
from models.registry import MODEL, version_at
from spark.registry import ModelRegistry
from tests.spark.conftest import daily_workload

T0 = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)
START_S = datetime(2026, 11, 1, tzinfo=UTC).timestamp()
V1, V2, V3 = (version_at(T0 + timedelta(hours=h)) for h in range(3))


def fitted_model(level: float = 1000.0) -> SeasonalForecaster:
    """A seasonal model fitted on two days of a daily sine."""
    return SeasonalForecaster(residual="naive").fit(daily_workload(2, seed=1, level=level), start_s=START_S)


def publish(registry: ModelRegistry, version: str, wape: float | None, level: float = 1000.0) -> SeasonalForecaster:
    model = fitted_model(level)
    registry.publish(
        "orders", version, metadata={"backtest": {"wape": wape}, "data": {"end": "2026-11-03"}}, model=model.to_dict()
    )
    return model


@pytest.fixture()
def registry(tmp_path: Path) -> ModelRegistry:
    return ModelRegistry(str(tmp_path / "registry"))


def test_without_a_score_the_agent_takes_the_newest_model(registry: ModelRegistry) -> None:
    publish(registry, V1, 0.2)
    publish(registry, V2, 0.1, level=2000.0)
    with capture_logs() as logs:
        reloader = ModelReloader(registry, "orders")
        forecaster = reloader.check(None)
        assert reloader.check(None) is None  # nothing newer than what is in use now
    assert isinstance(forecaster, ReloadedForecaster) and forecaster.version == V2
    assert isinstance(forecaster, Forecaster)  # a drop-in for the agent's forecaster
    assert reloader.current_version == V2
    switched = [e for e in logs if e["event"] == "model_reload.switched"]
    assert len(switched) == 1 and "no recent WAPE" in switched[0]["reason"]


def test_a_better_model_replaces_the_current_one_and_says_why(registry: ModelRegistry) -> None:
    publish(registry, V1, 0.3)
    with capture_logs() as logs:
        reloader = ModelReloader(registry, "orders", current_version=V1)
        assert reloader.check(0.2) is None
        publish(registry, V2, 0.08)
        forecaster = reloader.check(0.2)
    assert forecaster is not None and forecaster.version == V2 and forecaster.backtest_wape == 0.08
    (event,) = [e for e in logs if e["event"] == "model_reload.switched"]
    assert event["reason"] == "back-test WAPE 0.0800 beats the current model's recent WAPE 0.2000"
    assert event["previous"] == V1


def test_a_worse_model_is_kept_out_and_logged_once(registry: ModelRegistry) -> None:
    publish(registry, V2, 0.3)
    with capture_logs() as logs:
        reloader = ModelReloader(registry, "orders")
        assert [reloader.check(0.2) for _ in range(3)] == [None, None, None]
        # When the running model degrades past the stored back-test, the stored model wins.
        assert reloader.check(0.5) is not None
    kept = [e for e in logs if e["event"] == "model_reload.kept"]
    assert len(kept) == 1 and kept[0]["backtest_wape"] == 0.3


def test_min_improvement_prevents_flapping_on_a_tie(registry: ModelRegistry) -> None:
    publish(registry, V2, 0.19)
    reloader = ModelReloader(registry, "orders", min_improvement=0.02)
    assert reloader.check(0.2) is None
    assert reloader.check(0.22) is not None


def test_a_corrupt_artifact_is_skipped_with_a_log_line(registry: ModelRegistry, tmp_path: Path) -> None:
    publish(registry, V1, 0.1)
    publish(registry, V2, 0.05)
    model_file = tmp_path / "registry" / "orders" / V2 / MODEL
    model_file.write_text(model_file.read_text().replace('"kind"', '"kinb"'))
    publish(registry, V3, None)  # committed but never scored
    with capture_logs() as logs:
        reloader = ModelReloader(registry, "orders")
        forecaster = reloader.check(0.5)
        assert reloader.check(0.5) is None
    assert forecaster is not None and forecaster.version == V1
    events = [e["event"] for e in logs]
    assert events.count("model_reload.corrupt") == 1 and events.count("model_reload.unscored") == 1
    (corrupt,) = [e for e in logs if e["event"] == "model_reload.corrupt"]
    assert corrupt["version"] == V2 and "checksum" in corrupt["reason"]


def test_a_valid_checksum_over_a_broken_state_is_also_skipped(registry: ModelRegistry) -> None:
    registry.publish("orders", V1, metadata={"backtest": {"wape": 0.1}}, model={"kind": "seasonal", "profile": []})
    with capture_logs() as logs:
        assert ModelReloader(registry, "orders").check(None) is None
    assert [e["event"] for e in logs] == ["model_reload.corrupt"]


def test_a_missing_or_empty_registry_never_raises(tmp_path: Path) -> None:
    assert ModelReloader(str(tmp_path / "nowhere"), "orders").check(0.1) is None
    (tmp_path / "file").write_text("not a directory")
    assert ModelReloader(str(tmp_path / "file"), "orders").check(None) is None


def test_the_reloaded_forecaster_runs_at_the_agent_step(registry: ModelRegistry) -> None:
    model = publish(registry, V1, 0.1)
    forecaster = ModelReloader(registry, "orders").check(None, now=START_S + 3 * 86_400)
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
    forecaster = ModelReloader(registry, "orders").check(None)
    assert forecaster is not None
    profile = forecaster.model.profile.copy()
    forecaster.fit(np.full(900, 5000.0))
    assert np.array_equal(forecaster.model.profile, profile)
    # The residual model now starts from the refit window: the level follows the new data.
    ahead = forecaster.predict(60)
    expected_minute = forecaster.model.seasonal(np.array([forecaster.model.next_s]))[0]
    last_profile = forecaster.model.seasonal(np.array([forecaster.model.next_s - 60]))[0]
    assert ahead[0] == pytest.approx(expected_minute + (5000.0 - last_profile))
