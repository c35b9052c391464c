"""A loopback fake of the Prometheus HTTP API (query and query_range) with canned answers per query.

For the cases a real Prometheus cannot be made to produce on demand in a test (a partial series, a
5xx on one query, a slow answer); the happy path and staleness run against the real server.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

Value = Callable[[float], float | None]
"""A series as a function of time; None means no sample at that time."""


@dataclass
class Canned:
    """The answer to one query: series (labels, value function), or an HTTP error, optionally slow."""

    series: list[tuple[dict[str, str], Value]] = field(default_factory=list)
    status: int = 200
    error: str = ""
    delay_s: float = 0.0


class FakePrometheus:
    """Answers /api/v1/query_range and /api/v1/query from ``answers`` (by exact query string)."""

    def __init__(self) -> None:
        self.answers: dict[str, Canned] = {}
        self.otherwise = Canned()
        """The answer to a query not in ``answers``: an unknown metric's (no series), unless set."""
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> FakePrometheus:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                split = urlsplit(self.path)
                params = {k: v[0] for k, v in parse_qs(split.query).items()}
                fake.requests.append((split.path, params))
                status, payload, delay = fake.answer(split.path, params)
                if delay:
                    time.sleep(delay)  # the slow-Prometheus case
                body = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        server = self._server
        threading.Thread(target=lambda: server.serve_forever(poll_interval=0.05), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def answer(self, path: str, params: dict[str, str]) -> tuple[int, dict[str, Any], float]:
        query = params.get("query", "")
        if path == "/api/v1/query" and query == "1":
            return 200, {"status": "success", "data": {"resultType": "scalar", "result": [0, "1"]}}, 0.0
        canned = self.answers.get(query, self.otherwise)
        if canned.status != 200:
            return canned.status, {"status": "error", "errorType": "bad_data", "error": canned.error}, canned.delay_s
        if path == "/api/v1/query":
            return 200, {"status": "success", "data": {"resultType": "vector", "result": []}}, canned.delay_s
        start, end, step = float(params["start"]), float(params["end"]), float(params["step"])
        result = []
        for labels, value in canned.series:
            points = []
            t = start
            while t <= end + 1e-9:
                v = value(t)
                if v is not None:
                    text = "NaN" if isinstance(v, float) and math.isnan(v) else repr(float(v))
                    points.append([t, text])
                t += step
            if points:
                result.append({"metric": labels, "values": points})
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}, canned.delay_s
