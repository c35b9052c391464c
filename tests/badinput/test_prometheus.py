"""A Prometheus that is not there, not Prometheus, or answers in the wrong shape: perdix run stops at start-up
with one line saying which (a name that does not resolve, a refusal, a body that is no API response), and a
round whose answer is of the wrong shape records a gap naming the query instead of failing."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.monitor.prometheus import PrometheusMonitor
from agent.settings import PrometheusSettings
from tests.badinput.conftest import assert_one_line, run_perdix
from tests.fakes.kube_api import FakeKubeAPI
from tests.fixtures.prometheus import free_port

SCALAR_ONE = {"status": "success", "data": {"resultType": "scalar", "result": [0, "1"]}}


class CannedServer:
    """Answers every GET with ``body``, or ``probe`` for the start-up check's query '1'."""

    def __init__(self, body: bytes, probe: bytes | None = None, content_type: str = "application/json") -> None:
        self.body, self.probe, self.content_type = body, probe, content_type
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                first = "query=1&" in self.path + "&" and server.probe is not None
                payload = server.probe if first and server.probe is not None else server.body
                self.send_response(200)
                self.send_header("Content-Type", server.content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        threading.Thread(target=self.http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}"

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def _json(document: Any) -> bytes:
    return json.dumps(document).encode()


def _series(result: Any) -> bytes:
    return _json({"status": "success", "data": {"resultType": "vector", "result": result}})


# (case, body of every answer, body of the '1' probe or None for the same, what the line says)
ANSWERS: list[tuple[str, bytes, bytes | None, str]] = [
    ("garbage", b"notjson", None, "answered something that is not a Prometheus API response (not JSON"),
    ("an HTML page", b"<html><body>login</body></html>", None, "not a Prometheus API response (not JSON"),
    ("an empty body", b"", None, "not a Prometheus API response (not JSON"),
    ("JSON without data", _json({"hello": "world"}), None, "not a Prometheus API response (JSON without data.result)"),
    ("a JSON list", _json([1, 2, 3]), None, "not a Prometheus API response (JSON without data.result)"),
    ("a result that is a string", _series("oops"), None, "the query '1' gave 'oops'"),
    ("a probe that is not a scalar", _series([]), None, "the query '1' gave '[]'"),
    ("a query answered with a string", _series("oops"), _json(SCALAR_ONE), "prometheus.queries."),
    ("a series without labels", _series([{"value": [0, "1"]}]), _json(SCALAR_ONE), "a series without its labels"),
    (
        "a sample that is no number",
        _series([{"metric": {}, "value": [0, "many"]}]),
        _json(SCALAR_ONE),
        'a series whose value is not a [time, "value"] pair',
    ),
]


@pytest.fixture
def kube() -> Iterator[FakeKubeAPI]:
    fake = FakeKubeAPI().start()
    fake.add_workload("deployments", "flink-taskmanager", 3)
    try:
        yield fake
    finally:
        fake.stop()


def _run(tmp_path: Path, kube: FakeKubeAPI, url: str) -> Any:
    config = tmp_path / "perdix.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "scale_target": {
                    "kind": "deployment",
                    "name": "flink-taskmanager",
                    "kubeconfig": str(kube.write_kubeconfig(tmp_path / "kubeconfig")),
                },
                "prometheus": {"url": url, "timeout_s": 2},
                "knowledge": {"path": str(tmp_path / "knowledge.json")},
                "telemetry": {"metrics_port": 0, "log_level": "error"},
            }
        )
    )
    return run_perdix("run", "--config", config, "--dry-run", cwd=tmp_path, timeout=60)


@pytest.mark.parametrize(("case", "body", "probe", "fragment"), ANSWERS, ids=[case for case, *_ in ANSWERS])
def test_a_server_that_is_not_prometheus_stops_run_in_one_line_saying_so(
    tmp_path: Path, kube: FakeKubeAPI, case: str, body: bytes, probe: bytes | None, fragment: str
) -> None:
    server = CannedServer(body, probe)
    try:
        result = _run(tmp_path, kube, server.url)
    finally:
        server.stop()
    line = assert_one_line(result, server.url, fragment)
    assert "not reachable" not in line and "JSONDecodeError" not in line
    assert kube.scale_target_writes() == []


def test_a_host_name_that_does_not_resolve_is_named_not_called_refused(tmp_path: Path, kube: FakeKubeAPI) -> None:
    result = _run(tmp_path, kube, "http://no-such-prometheus.invalid:9090")
    line = assert_one_line(result, "prometheus.url", "host name 'no-such-prometheus.invalid' does not resolve")
    assert "refused" not in line


def test_a_closed_port_is_connection_refused(tmp_path: Path, kube: FakeKubeAPI) -> None:
    result = _run(tmp_path, kube, f"http://127.0.0.1:{free_port()}")
    assert_one_line(result, "prometheus.url", "not reachable (connection refused)")


@pytest.mark.parametrize(
    ("case", "answer"),
    [
        ("a string", _series("oops")),
        ("an object", _json({"status": "success", "data": {"result": {"a": 1}}})),
        (
            "values that are not pairs",
            _json({"status": "success", "data": {"result": [{"metric": {}, "values": [1, 2]}]}}),
        ),
        (
            "a value that is no number",
            _json({"status": "success", "data": {"result": [{"metric": {}, "values": [[1, "x"]]}]}}),
        ),
        ("no data", _json({"status": "success"})),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_a_round_with_a_wrong_shape_answer_records_a_gap_naming_the_query(case: str, answer: bytes) -> None:
    """After a good start, one query's answer changes shape: the round names the gap, the others are read."""
    good = _json({"status": "success", "data": {"resultType": "matrix", "result": []}})
    server = CannedServer(good)
    bad_query = "sum(rate(perdix_badinput_workload[60s]))"

    original = server.http.RequestHandlerClass

    class Switching(original):  # type: ignore[misc,valid-type]
        def do_GET(self) -> None:
            server.body = answer if "perdix_badinput_workload" in self.path else good
            super().do_GET()

    server.http.RequestHandlerClass = Switching
    try:
        settings = PrometheusSettings(url=server.url, timeout_s=2, queries={"workload": bad_query})
        monitor = PrometheusMonitor(settings)
        now = time.time()
        observation = monitor.observe(since=now - 60, now=now)
    finally:
        server.stop()
    assert "workload" in observation.gaps, observation.gaps
    assert "not a Prometheus API response" in observation.gaps["workload"]
    assert all(
        "not a Prometheus API response" not in gap for name, gap in observation.gaps.items() if name != "workload"
    )
