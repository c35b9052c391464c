"""Hot reload in the loop: the agent adopts a better registry model and survives a corrupt one."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from agent.model_reload import ReloadedForecaster
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
