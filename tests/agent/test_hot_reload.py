"""Hot reload in the loop: the agent adopts a better registry model and survives a corrupt one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from structlog.testing import capture_logs

from agent.knowledge.file import FileKnowledgeStore
from models.forecast.reloaded import ReloadedForecaster
from lab.replay import Replay
from lab.settings import load_lab_settings
from simulator import Trace
from spark.registry import ModelRegistry
from tests.spark.test_reload import V1, V2, publish


def flat() -> Trace:
    return Trace("flat", np.array([0.0, 7200.0]), np.array([50_000.0, 50_000.0]))


def test_the_loop_adopts_a_published_model_and_forecasts_with_it(tmp_path: Path) -> None:
    registry = ModelRegistry(str(tmp_path / "registry"))
    publish(registry, V1, 0.01)  # a back-test far better than anything the online model has shown
    settings = load_lab_settings(None, {"model_registry": str(tmp_path / "registry"), "job_name": "orders"})
    run = Replay(flat(), settings, hours=1)
    run.run(until_s=600)
    assert isinstance(run.agent.analyzer.forecaster.model, ReloadedForecaster)
    assert run.rounds[-1].analysis is not None and run.rounds[-1].analysis.forecast_source == "registry"
    assert all(r.skipped is None for r in run.rounds)


def test_a_corrupt_artifact_never_fails_a_round(tmp_path: Path) -> None:
    registry = ModelRegistry(str(tmp_path / "registry"))
    publish(registry, V2, 0.01)
    for model_file in (tmp_path / "registry").rglob("model.json"):
        model_file.write_text("{corrupt")
    settings = load_lab_settings(None, {"model_registry": str(tmp_path / "registry"), "job_name": "orders"})
    run = Replay(flat(), settings, hours=1)
    run.run(until_s=600)
    assert all(r.skipped is None for r in run.rounds)
    assert not isinstance(run.agent.analyzer.forecaster.model, ReloadedForecaster)


def test_a_reloaded_model_survives_a_restart_and_answers_the_same(tmp_path: Path) -> None:
    registry = ModelRegistry(str(tmp_path / "registry"))
    publish(registry, V1, 0.01)
    settings = load_lab_settings(None, {"model_registry": str(tmp_path / "registry"), "job_name": "orders"})
    run = Replay(flat(), settings, hours=1, knowledge=FileKnowledgeStore(tmp_path / "knowledge.json"))
    run.run(until_s=600)
    before = run.agent.analyzer.forecaster.model
    assert isinstance(before, ReloadedForecaster) and before.version == V1
    expected = before.predict(900)

    with capture_logs() as logs:
        run.agent = run.start_agent()  # a restart: a new agent on the same knowledge file
    after = run.agent.analyzer.forecaster.model
    assert isinstance(after, ReloadedForecaster) and after.version == V1
    assert np.array_equal(after.predict(900), expected)
    assert run.agent.analyzer.reloader is not None and run.agent.analyzer.reloader.current_version == V1
    assert "knowledge.restored" in [e["event"] for e in logs]

    with capture_logs() as logs:
        run.run(until_s=900)
    assert all(r.analysis is not None and r.analysis.forecast_source == "registry" for r in run.rounds[-5:])
    assert "model_reload.switched" not in [e["event"] for e in logs]  # kept, not adopted a second time
