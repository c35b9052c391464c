"""The model registry: commit marker, checksums, newest-K retention, local paths and URIs alike."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import numpy as np

from models.forecast.seasonal import SeasonalForecaster
from models.registry import MARKER, METADATA, MODEL, CorruptArtifact, RegistryError, version_at
from spark.registry import ModelRegistry

T0 = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)


def versions(count: int) -> list[str]:
    """``count`` increasing version strings a minute apart."""
    return [version_at(T0 + timedelta(minutes=i)) for i in range(count)]


def model_state(level: float = 1000.0) -> dict:
    """A small seasonal model's state (the reader builds what it loads, so it must be a real one)."""
    return SeasonalForecaster(residual="naive").fit(np.full(1440, level)).to_dict()


def publish(registry: ModelRegistry, job: str, version: str, wape: float = 0.1) -> None:
    registry.publish(job, version, metadata={"backtest": {"wape": wape}}, model=model_state(1000.0 * wape))


def test_versions_sort_in_time_order() -> None:
    stamps = [T0 + timedelta(milliseconds=ms) for ms in (0, 1, 999, 1000, 60_000, 86_400_000)]
    assert [version_at(s) for s in stamps] == sorted(version_at(s) for s in stamps)
    assert version_at(T0) == "v20261123T030000000Z"


def test_publish_then_load_round_trips(tmp_path: Path) -> None:
    registry = ModelRegistry(str(tmp_path))
    (version,) = versions(1)
    publish(registry, "orders", version, wape=0.12)
    artifact = registry.load("orders")
    assert artifact.version == version
    assert artifact.metadata["backtest"]["wape"] == 0.12
    assert artifact.metadata["job"] == "orders" and artifact.metadata["version"] == version
    assert artifact.model == model_state(120.0)
    assert registry.jobs() == ["orders"]


def test_a_version_without_marker_is_invisible(tmp_path: Path) -> None:
    registry = ModelRegistry(str(tmp_path))
    old, new = versions(2)
    publish(registry, "orders", old)
    publish(registry, "orders", new)
    (tmp_path / "orders" / new / MARKER).unlink()  # as if the publisher died before committing
    assert registry.versions("orders") == [old]
    assert registry.load("orders").version == old


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: (d / MODEL).write_text('{"kind": "tampered"}'),
        lambda d: (d / METADATA).unlink(),
        lambda d: (d / MARKER).write_text("not json"),
        lambda d: (d / MODEL).write_bytes((d / MODEL).read_bytes()[:-3]),
    ],
    ids=["changed model", "missing metadata", "garbled marker", "truncated model"],
)
def test_damaged_artifacts_raise_corrupt(tmp_path: Path, damage) -> None:
    registry = ModelRegistry(str(tmp_path))
    (version,) = versions(1)
    publish(registry, "orders", version)
    damage(tmp_path / "orders" / version)
    with pytest.raises(CorruptArtifact):
        registry.load("orders", version)


def _replace_with(path: Path, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path.unlink()
    if kind == "a FIFO":
        os.mkfifo(path)
    elif kind == "a link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "a directory":
        path.mkdir()
    else:
        from models import storage

        monkeypatch.setattr(storage.Location.read_bytes, "__defaults__", (1024,))
        path.write_bytes(b" " * 2048)


@pytest.mark.parametrize("name", [MODEL, MARKER])
@pytest.mark.parametrize("kind", ["a FIFO", "a link to /dev/zero", "a directory", "over the size limit"])
def test_a_file_that_is_no_artifact_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, kind: str
) -> None:
    """Opening a FIFO blocked the agent's round for good; /dev/zero, or a file of gigabytes, read until memory ran
    out. Each is refused as a corrupt artifact before a byte is read, and the version before it stays loadable."""
    registry = ModelRegistry(str(tmp_path))
    old, new = versions(2)
    publish(registry, "orders", old)
    publish(registry, "orders", new)
    _replace_with(tmp_path / "orders" / new / name, kind, monkeypatch)
    with pytest.raises(CorruptArtifact, match="not a regular file|byte limit"):
        registry.load("orders", new)
    if kind == "over the size limit":
        return
    assert registry.load("orders", old).version == old


def test_only_the_newest_k_versions_survive(tmp_path: Path) -> None:
    registry = ModelRegistry(str(tmp_path), keep=3)
    all_versions = versions(6)
    leftover = tmp_path / "orders" / all_versions[0]
    for version in all_versions[1:]:
        publish(registry, "orders", version)
        if version == all_versions[1]:
            leftover.mkdir()  # an uncommitted directory older than everything kept
    assert registry.versions("orders") == all_versions[-3:]
    assert sorted(p.name for p in (tmp_path / "orders").iterdir()) == all_versions[-3:]


def test_republishing_a_version_replaces_it(tmp_path: Path) -> None:
    registry = ModelRegistry(str(tmp_path))
    (version,) = versions(1)
    publish(registry, "orders", version, wape=0.3)
    publish(registry, "orders", version, wape=0.2)  # a retried Spark task
    assert registry.versions("orders") == [version]
    assert registry.load("orders").metadata["backtest"]["wape"] == 0.2


def test_a_uri_registry_behaves_like_a_path() -> None:
    registry = ModelRegistry("memory://perdix-tests/registry", keep=2)
    for version in versions(3):
        publish(registry, "orders", version)
    assert registry.versions("orders") == versions(3)[-2:]
    assert json.loads(json.dumps(registry.load("orders").model))["kind"] == "seasonal"


def test_a_model_state_that_does_not_fit_its_schema_is_corrupt_though_its_checksums_match(tmp_path: Path) -> None:
    registry = ModelRegistry(str(tmp_path))
    (version,) = versions(1)
    state = model_state()
    state["profile"] = ["1e3"] * len(state["profile"])  # numbers as strings: not what a model reads
    registry.publish("orders", version, metadata={"backtest": {"wape": 0.1}}, model=state)
    with pytest.raises(CorruptArtifact, match="model state refused"):
        registry.load("orders")
    registry.publish("orders", version, metadata={"backtest": "0.1"}, model=model_state())
    with pytest.raises(CorruptArtifact, match="backtest"):
        registry.load("orders")


def test_bad_arguments_are_clear(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="keep"):
        ModelRegistry(str(tmp_path), keep=0)
    with pytest.raises(RegistryError, match="malformed model version"):
        publish(ModelRegistry(str(tmp_path)), "orders", "latest")
    with pytest.raises(RegistryError, match="no committed model"):
        ModelRegistry(str(tmp_path)).load("nobody")


def test_a_statsforecast_residual_is_published_as_plain_numbers_and_forecasts_the_same_when_loaded(
    tmp_path: Path,
) -> None:
    """The retraining's statsforecast residual goes through the registry as JSON and comes back identical."""
    from tests.spark.conftest import daily_workload

    registry = ModelRegistry(str(tmp_path))
    (version,) = versions(1)
    model = SeasonalForecaster(residual="statsforecast-arima", residual_window_s=6 * 3600).fit(
        daily_workload(2, seed=3, level=1000.0), start_s=0.0
    )
    registry.publish("orders", version, metadata={"backtest": {"wape": 0.1}}, model=model.to_dict())
    text = (tmp_path / "orders" / version / MODEL).read_text()
    assert '"fitted"' in text and "gASV" not in text  # parameters, not a pickle
    loaded = SeasonalForecaster.from_dict(registry.load("orders").model)
    assert np.array_equal(loaded.predict(60), model.predict(60))


def _fits(state: object) -> list[dict]:
    """Every statsforecast fit (``arma`` and its coefficients) in a model state."""
    if isinstance(state, dict):
        return ([state] if "arma" in state else []) + [f for v in state.values() for f in _fits(v)]
    return [f for v in state for f in _fits(v)] if isinstance(state, list) else []


@pytest.mark.parametrize(
    ("arma", "sar", "refused"),
    [([0, 0, 1, 0, 300, 0, 0], 1, True), ([0, 0, 2, 0, 100, 0, 0], 2, True), ([2, 1, 0, 0, 1, 1, 0], 0, False)],
)
def test_an_arima_whose_state_no_fit_of_perdix_needs_is_refused_though_its_checksums_match(
    tmp_path: Path, arma: list[int], sar: int, refused: bool
) -> None:
    """A seasonal order at a long season (a 15-KB artifact) made the library's Kalman set-up take gigabytes at the
    first forecast; Perdix fits with a season of 1, and such a state is refused on load."""
    from tests.spark.conftest import daily_workload

    registry = ModelRegistry(str(tmp_path))
    (version,) = versions(1)
    model = SeasonalForecaster(residual="statsforecast-arima", residual_window_s=6 * 3600).fit(
        daily_workload(2, seed=3, level=1000.0), start_s=0.0
    )
    state = model.to_dict()
    (fit,) = _fits(state)
    p, q = arma[0], arma[1]
    fit["arma"] = arma
    fit["coef"] = (
        [[f"ar{i + 1}", 0.1] for i in range(p)]
        + [[f"ma{i + 1}", 0.1] for i in range(q)]
        + [[f"sar{i + 1}", 0.1] for i in range(sar)]
    )
    registry.publish("orders", version, metadata={"backtest": {"wape": 0.1}}, model=state)
    if refused:
        with pytest.raises(CorruptArtifact, match="Kalman state of .* more than any ARIMA this Perdix fits"):
            registry.load("orders")
    else:
        assert registry.load("orders").version == version


@pytest.mark.parametrize("name", ["v99999999T999999999Z", "v20261340T250000000Z", "v29991231T000000000Z"])
def test_a_version_that_names_no_time_or_a_future_one_is_no_version(tmp_path: Path, name: str) -> None:
    """Newer than any version to come, such a name was adopted and stopped hot reload for good."""
    registry = ModelRegistry(str(tmp_path))
    (version,) = versions(1)
    publish(registry, "orders", version)
    (tmp_path / "orders" / version).rename(tmp_path / "orders" / name)
    publish(registry, "orders", version)
    assert registry.versions("orders") == [version]
    assert registry.latest("orders") == version
    if name != "v29991231T000000000Z":
        with pytest.raises(RegistryError, match="malformed model version"):
            publish(registry, "orders", name)
