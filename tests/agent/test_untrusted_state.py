"""Stored model states are untrusted input: a crafted one is refused, never executed, and the loop goes on.

Each document carries a pickle whose loading would run ``touch <marker>``. The first test proves the
payload is live (unpickled, it does touch its marker); the others hand it to Perdix the three ways a
stored state reaches a model (the knowledge document directly, a registry model's residual inside the
knowledge document, a registry artifact with valid commit checksums) and check that no marker
appears, the state is refused with a warning (and a metric), and rounds keep completing.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from agent.analyze import Analyzer
from agent.knowledge.file import FileKnowledgeStore
from agent.loop import Agent, RoundStatus
from agent.telemetry import Telemetry
from lab.replay import Replay
from lab.settings import load_lab_settings
from models.forecast.reloaded import ReloadedForecaster
from models.forecast.seasonal import SeasonalForecaster
from models.forecast.states import StateError
from models.forecast.statsforecast_arima import StatsForecastArima
from models.registry import CorruptArtifact, RegistryReader
from simulator import Trace
from spark.registry import ModelRegistry
from tests.spark.test_reload import START_S, V1
from tests.spark.conftest import daily_workload


class _Touch:
    """Unpickled, runs ``touch marker`` (what a crafted knowledge document or artifact would carry)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def payload(marker: Path) -> str:
    """The base64 pickle the state used to hold, now crafted to touch ``marker``."""
    return base64.b64encode(pickle.dumps(_Touch(marker))).decode()


def flat() -> Trace:
    return Trace("flat", np.array([0.0, 7200.0]), np.array([50_000.0, 50_000.0]))


def test_the_payload_is_live(tmp_path: Path) -> None:
    """Loaded with pickle (in a child process), the payload touches its marker: the tests below can fail."""
    marker = tmp_path / "proof"
    code = f"import base64, pickle; pickle.loads(base64.b64decode({payload(marker)!r}))"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert marker.exists()


def statsforecast_states(marker: Path) -> dict[str, dict[str, Any]]:
    """statsforecast states with the payload: the old layout (``model``) and in the new one's place (``fitted``)."""
    y = [1000.0 + i for i in range(90)]
    base = {"name": "statsforecast-arima", "window": 90, "max_d": 1, "y": y}
    return {
        "old layout": {**base, "model": payload(marker)},
        "fitted as a string": {**base, "fitted": payload(marker)},
        "pickle in a coefficient": {
            **base,
            "fitted": {"arma": [1, 0, 0, 0, 1, 0, 0], "coef": [["ar1", payload(marker)]], "sigma2": 1.0, "x": y},
        },
    }


@pytest.mark.parametrize("case", sorted(statsforecast_states(Path("m"))))
def test_a_statsforecast_state_with_a_pickle_is_refused_by_its_schema(tmp_path: Path, case: str) -> None:
    marker = tmp_path / "marker"
    with pytest.raises(StateError):
        StatsForecastArima.from_dict(statsforecast_states(marker)[case])
    assert not marker.exists()


def _knowledge_run(tmp_path: Path, **overrides: Any) -> tuple[Replay, Path]:
    path = tmp_path / "knowledge.json"
    settings = load_lab_settings(None, {"job_name": "orders", **overrides})
    run = Replay(flat(), settings, hours=1, knowledge=FileKnowledgeStore(path))
    run.run(until_s=600)
    return run, path


def _restart_on(
    run: Replay, path: Path, document: dict[str, Any], marker: Path
) -> tuple[Agent, list[dict[str, Any]], Telemetry]:
    """Write ``document`` as the knowledge and start a new agent on it (a restart), with its own telemetry."""
    path.write_text(json.dumps(document))
    telemetry = Telemetry(CollectorRegistry())
    with capture_logs() as logs:
        agent = Agent(
            settings=run.settings,
            clock=run.clock,
            monitor=run.monitor,
            scaler=run.scaler,
            knowledge=FileKnowledgeStore(path),
            analyzer=Analyzer(run.settings, executor=run.background),
            telemetry=telemetry,
        )
    assert not marker.exists(), "the payload ran"
    return agent, logs, telemetry


def _refused_and_running(
    run: Replay, agent: Agent, logs: list[dict[str, Any]], telemetry: Telemetry, path: Path, raw: str, marker: Path
) -> None:
    events = [e["event"] for e in logs]
    assert "knowledge.restore_failed" in events and "knowledge.restored" not in events, events
    assert (
        telemetry.registry.get_sample_value("perdix_states_refused_total", {"source": "knowledge", "kind": "restore"})
        == 1.0
    )
    (aside,) = path.parent.glob("knowledge.json.bad-*")
    assert aside.read_text() == raw, "the refused document was not kept byte for byte"
    run.agent = agent
    run.run(until_s=1200)
    assert not marker.exists()
    assert all(r.outcome.status is RoundStatus.COMPLETED for r in run.rounds[-5:])
    assert json.loads(path.read_text())["loop"]["last_round_at"] == 1200, "the fresh knowledge was not saved"


@pytest.mark.parametrize("case", sorted(statsforecast_states(Path("m"))))
def test_knowledge_with_a_pickle_in_the_forecaster_state_is_moved_aside_not_run(tmp_path: Path, case: str) -> None:
    marker = tmp_path / "marker"
    run, path = _knowledge_run(tmp_path)
    document = json.loads(path.read_text())
    document["analyzer"]["forecaster"]["model"] = statsforecast_states(marker)[case]
    agent, logs, telemetry = _restart_on(run, path, document, marker)
    _refused_and_running(run, agent, logs, telemetry, path, json.dumps(document), marker)


def _seasonal_with_statsforecast_residual(marker: Path) -> dict[str, Any]:
    model = SeasonalForecaster(residual="naive").fit(daily_workload(2, seed=1, level=1000.0), start_s=START_S)
    state = model.to_dict()
    state["residual"] = {"name": "statsforecast-arima", "state": statsforecast_states(marker)["old layout"]}
    return state


def test_knowledge_with_a_registry_model_whose_residual_holds_a_pickle_is_moved_aside_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    run, path = _knowledge_run(tmp_path)
    document = json.loads(path.read_text())
    document["analyzer"]["forecaster"]["model"] = {
        "name": "registry",
        "job": "orders",
        "version": V1,
        "backtest_wape": 0.01,
        "agent_step_s": 10.0,
        "buffer": [],
        "model": _seasonal_with_statsforecast_residual(marker),
    }
    agent, logs, telemetry = _restart_on(run, path, document, marker)
    _refused_and_running(run, agent, logs, telemetry, path, json.dumps(document), marker)


def test_a_registry_artifact_with_a_pickle_and_valid_checksums_is_refused_and_the_running_model_stays(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "marker"
    root = tmp_path / "registry"
    registry = ModelRegistry(str(root))
    # publish() writes the commit marker over exactly these bytes: the checksums match, as a forger's would.
    registry.publish(
        "orders", V1, metadata={"backtest": {"wape": 0.0001}}, model=_seasonal_with_statsforecast_residual(marker)
    )
    with pytest.raises(CorruptArtifact, match="model state refused"):
        RegistryReader(str(root)).load("orders", V1)
    assert not marker.exists()

    settings = load_lab_settings(None, {"model_registry": str(root), "job_name": "orders"})
    run = Replay(flat(), settings, hours=1)
    telemetry = Telemetry(CollectorRegistry())
    run.agent = Agent(
        settings=settings,
        clock=run.clock,
        monitor=run.monitor,
        scaler=run.scaler,
        knowledge=run.knowledge,
        analyzer=Analyzer(settings, executor=run.background),
        telemetry=telemetry,
    )
    with capture_logs() as logs:
        run.run(until_s=900)
    assert not marker.exists(), "the payload ran"
    corrupt = [e for e in logs if e["event"] == "model_reload.corrupt"]
    assert len(corrupt) == 1 and corrupt[0]["log_level"] == "warning" and "model state refused" in corrupt[0]["reason"]
    assert (
        telemetry.registry.get_sample_value("perdix_states_refused_total", {"source": "registry", "kind": "corrupt"})
        == 1.0
    )
    assert all(r.outcome.status is RoundStatus.COMPLETED for r in run.rounds)
    model = run.agent.analyzer.forecaster.model
    assert model is not None and not isinstance(model, ReloadedForecaster), "the online model did not stay"
