"""The knowledge document is read field by field: whatever does not fit is moved aside and the agent starts fresh.

Every case runs over both real stores (the file, and the ConfigMap on the loopback API server): a real
document from a replay is damaged in one field, the agent restarts on it, and the document must be
kept byte for byte beside the fresh one (never overwritten), with one ``knowledge.unusable`` line
naming the field. A file that is not UTF-8 is moved aside the same way, and a knowledge path the
daemon could never write is a start-up error: exit 2, one line.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import structlog
import yaml
from structlog.testing import capture_logs
from typer.testing import CliRunner

from agent.knowledge.document import KnowledgeUnrecoverable
from agent.knowledge.file import FileKnowledgeStore
from agent.knowledge.schema import validate_document
from cli import app
from lab.replay import Replay
from lab.settings import load_lab_settings
from simulator import Trace, load_trace
from tests.adapters.test_contracts import StoreCase, store_case  # noqa: F401  (both real stores)
from tests.adapters.test_prometheus_monitor import healthy
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.prometheus_api import FakePrometheus
from tests.fixtures.k8s import kube_api, kube_client, kubeconfig  # noqa: F401  (the loopback API server)


@pytest.fixture(scope="module")
def good_document() -> dict[str, Any]:
    """A real document: half an hour of the bank trace with failures, so every model has a state."""
    settings = load_lab_settings(None, {"policy": "ds2"})
    run = Replay(load_trace("traces/bank_calls.csv"), settings, hours=0.5, failures_per_hour=4.0)
    run.run()
    document = json.loads(json.dumps(run.agent.document()))
    validate_document(document)
    assert document["loop"]["rescales"], "the replay must have rescaled for the rescale cases below"
    return document


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = document
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return change


# case -> (the change, a fragment of the field the one warning must name)
MISFITS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "a count as a string": (_set("analyzer.forecaster.poor_loops", "3"), "analyzer.forecaster.poor_loops"),
    "a negative count": (_set("analyzer.forecaster.bucket_count", -1), "analyzer.forecaster.bucket_count"),
    "a boolean for a number": (_set("analyzer.recovery.checkpoint_interval_s", True), "checkpoint_interval_s"),
    "an absurd parallelism": (_set("analyzer.expected_parallelism", 10**9), "analyzer.expected_parallelism"),
    "an unknown field": (_set("analyzer.capacity.surprise", 1), "analyzer.capacity.surprise"),
    "a rescale to -2": (_set("loop.rescales.0.to", -2), "loop.rescales.0.to"),
    "a regression that is a list": (_set("analyzer.capacity.regressions", [1, 2]), "analyzer.capacity.regressions"),
    "a negative light sum": (
        _set("analyzer.capacity.light_ratios", {"0": [-1.0, 0.5]}),
        "analyzer.capacity.light_ratios",
    ),
    "a reason that is a number": (_set("loop.rescales.0.reasons.0", 5), "loop.rescales.0.reasons.0"),
    "a policy state that is not an object": (
        _set("loop.policy_state", {"policy": "ds2", "state": "gASV"}),
        "loop.policy_state.state",
    ),
    "a capacity beyond any job's": (
        _set("analyzer.capacity.observed", {"8": 1e308}),
        "analyzer.capacity.observed.8",
    ),
    "a capacity at no worker": (_set("analyzer.capacity.observed", {"0": 1000.0}), "analyzer.capacity.observed.0"),
    "a workload below zero": (_set("analyzer.envelope.levels.0", -1e9), "analyzer.envelope.levels.0"),
    "a line whose mean no job reads": (
        lambda document: _first_line(document).update(mean_y=1e300),
        "analyzer.capacity.regressions",
    ),
    "a line whose covariance exceeds its spreads": (
        lambda document: _first_line(document).update(c_xy=10.0 * (1.0 + _first_line(document)["m2_y"])),
        "analyzer.capacity.regressions",
    ),
    "an old base64 model state": (
        _set(
            "analyzer.forecaster.model",
            {"name": "statsforecast-arima", "window": 90, "max_d": 1, "y": [], "model": "not base64 at all!"},
        ),
        "StatsForecastState",
    ),
}


def _first_line(document: dict[str, Any]) -> dict[str, Any]:
    """The first worker's line in the capacity model (a mutable part of ``document``)."""
    lines: dict[str, dict[str, Any]] = document["analyzer"]["capacity"]["regressions"]
    return lines[min(lines)]


def test_a_document_from_the_future_is_moved_aside_and_the_agent_rescales_again() -> None:
    """A stored rescale far after the agent's clock (another clock, or a forged document) would hold every round in
    its grace until then, while the backlog grew without bound. Restarted on it, the agent refuses the document,
    naming the moment, keeps it aside and starts fresh: it scales the job out as the agent that never stopped does."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error"})
    trace = Trace("climb", np.array([0.0, 600.0, 3600.0]), np.array([20_000.0, 20_000.0, 90_000.0]))
    kept, fresh = Replay(trace, settings, hours=1.0), Replay(trace, settings, hours=1.0)
    kept.run(until_s=600)
    fresh.run(until_s=600)
    assert kept.knowledge.document is not None
    kept.knowledge.document["loop"]["last_rescale_at"] = 1e308
    with capture_logs() as logs:
        kept.agent = kept.start_agent()
    refused = [e for e in logs if e["event"] == "knowledge.restore_failed"]
    assert refused and "loop.last_rescale_at" in refused[0]["error"], logs
    assert kept.knowledge.aside and kept.knowledge.aside[0]["loop"]["last_rescale_at"] == 1e308
    fresh.knowledge.document = None
    fresh.agent = fresh.start_agent()
    kept.run()
    fresh.run()
    ours, theirs = kept.result().summary, fresh.result().summary
    assert ours["rescales"] >= 1 and ours["rescales"] == theirs["rescales"]
    assert ours["worker_hours"] == pytest.approx(theirs["worker_hours"])


def _nan(document: dict[str, Any]) -> str:
    """The document with a NaN literal (the JSON parser accepts it; Perdix never writes one)."""
    return re.sub(r'"last_round_at": [^,}]+', '"last_round_at": NaN', json.dumps(document), count=1)


@pytest.mark.parametrize("case", sorted(MISFITS) + ["a NaN"])
def test_a_field_that_does_not_fit_moves_the_document_aside_and_the_agent_starts_fresh(
    store_case: StoreCase,
    good_document: dict[str, Any],
    case: str,  # noqa: F811
) -> None:
    document = copy.deepcopy(good_document)
    if case == "a NaN":
        raw, field = _nan(document), "last_round_at"
        assert "NaN" in raw
    else:
        change, field = MISFITS[case]
        change(document)
        raw = json.dumps(document)
    store_case.write_raw(raw)
    settings = load_lab_settings(None, {"policy": "ds2"})
    flat = Trace("flat", np.array([0.0, 1800.0]), np.array([30_000.0, 30_000.0]))
    with capture_logs() as logs:
        run = Replay(flat, settings, hours=0.2, knowledge=store_case.reopen())
    unusable = [e for e in logs if e["event"] in ("knowledge.unusable", "knowledge.restore_failed")]
    assert len(unusable) >= 1 and any(field in str(e) for e in unusable), unusable
    assert "knowledge.restored" not in [e["event"] for e in logs]
    assert run.agent.rescales.to_list() == [] and run.agent.last_round_at is None, "the agent did not start fresh"
    run.run(until_s=300)
    assert raw in store_case.everything_stored(), "the document was not kept byte for byte"
    fresh = store_case.reopen().load()
    assert fresh is not None and fresh["loop"]["last_round_at"] == 300


def test_every_field_of_a_real_document_round_trips(good_document: dict[str, Any]) -> None:
    typed = validate_document(good_document)
    assert typed.analyzer is not None and typed.analyzer.capacity.regressions
    assert [r.model_dump(by_alias=True)["to"] for r in typed.loop.rescales] == [
        r["to"] for r in good_document["loop"]["rescales"]
    ]


def test_a_knowledge_file_that_is_not_utf8_is_moved_aside_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "knowledge.json"
    raw = b'{"version": 1, "loop": {"last_round_at": 1.0}, "analyzer": {}, "\xff\xfe": 0}'
    path.write_bytes(raw)
    settings = load_lab_settings(None, {})
    flat = Trace("flat", np.array([0.0, 1800.0]), np.array([30_000.0, 30_000.0]))
    with capture_logs() as logs:
        run = Replay(flat, settings, hours=0.2, knowledge=FileKnowledgeStore(path))
    assert [e for e in logs if e["event"] == "knowledge.unusable"], logs
    run.run(until_s=120)
    (aside,) = tmp_path.glob("knowledge.json.bad-*")
    assert aside.read_bytes() == raw
    assert json.loads(path.read_text())["loop"]["last_round_at"] == 120


@pytest.mark.parametrize("case", ["nested past the parser", "a FIFO", "a device", "over the size limit"])
def test_a_knowledge_file_no_parser_should_read_is_moved_aside_unread_never_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """A JSON array nested 100,000 deep (the parser's recursion gives out), a FIFO (reading it would block start-up
    for ever), a link to /dev/zero (it would read until memory runs out), a file over the limit: each is moved aside
    as it stands and the agent starts fresh beside it."""
    from agent.knowledge import file as file_store

    path = tmp_path / "knowledge.json"
    if case == "nested past the parser":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif case == "a FIFO":
        os.mkfifo(path)
    elif case == "a device":
        path.symlink_to("/dev/zero")
    else:
        monkeypatch.setattr(file_store, "MAX_FILE_BYTES", 64)
        path.write_text(json.dumps({"version": 1, "padding": "x" * 64}))
    before = path.lstat()
    store = FileKnowledgeStore(path)
    with capture_logs() as logs:
        assert store.load() is None
    (unusable,) = [e for e in logs if e["event"] == "knowledge.unusable"]
    (aside,) = tmp_path.glob("knowledge.json.bad-*")
    assert unusable["moved_to"] == str(aside)
    assert (aside.lstat().st_ino, aside.lstat().st_mode) == (before.st_ino, before.st_mode)  # the same file, moved
    assert not path.exists() and not path.is_symlink()


def test_the_file_store_writes_no_document_a_start_would_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over the limit a start reads, a document is not written (the last good file stays), as the ConfigMap store does
    at its 1 MiB: written, it would be moved aside unread at the next start."""
    from agent.knowledge import file as file_store
    from agent.knowledge.document import KnowledgeTooLarge

    path = tmp_path / "knowledge.json"
    store = FileKnowledgeStore(path)
    small = {"version": 1, "loop": {}, "analyzer": {}}
    store.save(small)
    monkeypatch.setattr(file_store, "MAX_FILE_BYTES", len(json.dumps(small)) + 10)
    with pytest.raises(KnowledgeTooLarge, match="over the .* byte limit a start reads; not written"):
        store.save({**small, "padding": "x" * 100})
    assert json.loads(path.read_text()) == small


def test_an_unusable_knowledge_file_that_cannot_be_moved_aside_stops_the_agent_before_it_overwrites(
    tmp_path: Path,
) -> None:
    raw = b"{not json"
    path = tmp_path / "knowledge.json"
    path.write_bytes(raw)
    for n in range(1000):
        (tmp_path / f"knowledge.json.bad-{n}").write_text("{}")
    settings = load_lab_settings(None, {})
    flat = Trace("flat", np.array([0.0, 1800.0]), np.array([30_000.0, 30_000.0]))
    with pytest.raises(KnowledgeUnrecoverable, match=r"knowledge.path: .*knowledge.json cannot be used .* moved aside"):
        Replay(flat, settings, hours=0.2, knowledge=FileKnowledgeStore(path))
    assert path.read_bytes() == raw


# ---------------------------------------------------------------------------------------------- start-up


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    yield
    structlog.reset_defaults()


@pytest.fixture
def fake_prometheus() -> Iterator[FakePrometheus]:
    fake = FakePrometheus().start()
    healthy(fake)
    try:
        yield fake
    finally:
        fake.stop()


def _config(directory: Path, prometheus: FakePrometheus, kubeconfig: Path, knowledge: Path) -> Path:
    config = directory / "perdix.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "scale_target": {"kind": "deployment", "name": "flink-taskmanager", "kubeconfig": str(kubeconfig)},
                "prometheus": {"url": prometheus.url, "timeout_s": 1},
                "knowledge": {"path": str(knowledge)},
                "telemetry": {"metrics_port": 0, "log_level": "error"},
            }
        )
    )
    return config


@pytest.mark.parametrize("case", ["a directory", "under a file"])
def test_a_knowledge_path_that_cannot_be_written_is_a_start_up_error(
    tmp_path: Path, kube_api: FakeKubeAPI, kubeconfig: Path, fake_prometheus: FakePrometheus, case: str
) -> None:
    if case == "a directory":
        knowledge = tmp_path / "knowledge"
        knowledge.mkdir()
    else:
        (tmp_path / "afile").write_text("x")
        knowledge = tmp_path / "afile" / "knowledge.json"
    result = CliRunner().invoke(
        app, ["run", "--config", str(_config(tmp_path, fake_prometheus, kubeconfig, knowledge))]
    )
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("perdix: error: knowledge.path:"), result.output
    assert "Traceback" not in result.output
    assert kube_api.scale_target_writes() == []


def test_perdix_run_exits_2_on_knowledge_it_can_neither_use_nor_move_aside(
    tmp_path: Path, kube_api: FakeKubeAPI, kubeconfig: Path, fake_prometheus: FakePrometheus
) -> None:
    knowledge = tmp_path / "state" / "knowledge.json"
    knowledge.parent.mkdir()
    knowledge.write_bytes(b"[" * 100_000)
    for n in range(1000):
        (knowledge.parent / f"knowledge.json.bad-{n}").write_text("{}")
    result = CliRunner().invoke(
        app, ["run", "--config", str(_config(tmp_path, fake_prometheus, kubeconfig, knowledge))]
    )
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[-1].startswith("perdix: error: knowledge.path:") and "move or remove it" in lines[-1], result.output
    assert "Traceback" not in result.output
    assert knowledge.read_bytes() == b"[" * 100_000
    assert kube_api.scale_target_writes() == []


def test_a_model_registry_no_filesystem_opens_is_a_start_up_error(
    tmp_path: Path, kube_api: FakeKubeAPI, kubeconfig: Path, fake_prometheus: FakePrometheus
) -> None:
    """A scheme no filesystem opens was a RegistryError traceback from the forecaster's set-up."""
    config = _config(tmp_path, fake_prometheus, kubeconfig, tmp_path / "knowledge.json")
    document = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**document, "model_registry": "nosuchproto://bucket/models"}))
    result = CliRunner().invoke(app, ["run", "--config", str(config)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("perdix: error: model_registry: nosuchproto://bucket/models: "), (
        lines
    )
    assert "unsupported location" in lines[0]
    assert kube_api.scale_target_writes() == []


def test_a_read_only_knowledge_directory_is_a_start_up_error(
    kube_api: FakeKubeAPI, fake_prometheus: FakePrometheus
) -> None:
    """Run as an unprivileged user (root writes into read-only directories), in a directory it may read."""
    with tempfile.TemporaryDirectory(prefix="perdix-ro-") as name:
        directory = Path(name)
        directory.chmod(0o755)
        kubeconfig = kube_api.write_kubeconfig(directory / "kubeconfig")
        kubeconfig.chmod(0o644)
        readonly = directory / "state"
        readonly.mkdir()
        config = _config(directory, fake_prometheus, kubeconfig, readonly / "knowledge.json")
        config.chmod(0o644)
        readonly.chmod(0o555)
        command = [str(Path(".venv/bin/perdix").resolve()), "run", "--config", str(config)]
        if os.geteuid() == 0:
            command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=directory)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("perdix: error: knowledge.path: cannot write in"), lines
    assert kube_api.scale_target_writes() == []
