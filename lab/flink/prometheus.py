"""Prometheus for the lab's Flink testbed: a loopback server next to a local cluster, and a small query client.

The capacity planner reads the trace job's backlog and read rate through PromQL, from a Prometheus
that scrapes every process of the cluster each second: either one it starts here (the Debian
``prometheus`` package that ``make test`` installs) next to a local cluster, or the one the user
names for an existing testbed cluster. The server is started with a free port and its own TSDB in a
working directory of the caller's, waited for with a deadline, and stopped by its pid.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

from lab.flink.cluster import FlinkLabError, free_port, poll

Sample = tuple[float, float]
"""(Unix time s, value) of one point of a range query."""


class PrometheusError(FlinkLabError):
    """Prometheus is missing, does not answer, or rejected a query (one line, naming the server)."""


class PromQL(Protocol):
    """What the testbed asks of a Prometheus: instant and range queries (the client below, or a test fake)."""

    @property
    def url(self) -> str: ...

    def instant(self, query: str, at: float | None = None) -> list[tuple[dict[str, str], float]]:
        """An instant query's series as (labels, value)."""
        ...

    def range(self, query: str, start: float, end: float, step_s: float = 1.0) -> list[tuple[dict[str, str], list[Sample]]]:
        """A range query's series as (labels, [(time, value), ...])."""
        ...


@dataclass(frozen=True)
class PrometheusClient:
    """PromQL over the HTTP API of one server."""

    url: str
    timeout_s: float = 10.0

    def _get(self, path: str, params: dict[str, Any]) -> Any:
        address = f"{self.url.rstrip('/')}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(address, timeout=self.timeout_s) as response:
                body = json.loads(response.read().decode())
        except urllib.error.HTTPError as exc:
            try:
                reason = json.loads(exc.read().decode(errors="replace")).get("error", f"HTTP {exc.code}")
            except ValueError:
                reason = f"HTTP {exc.code}"
            raise PrometheusError(f"Prometheus {self.url} rejected {params.get('query', path)!r}: {reason}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise PrometheusError(f"Prometheus {self.url} does not answer: {getattr(exc, 'reason', exc)}") from None
        if not isinstance(body, dict) or body.get("status") != "success":
            raise PrometheusError(f"Prometheus {self.url}: unexpected answer to {params.get('query', path)!r}")
        return body.get("data")

    def check(self) -> str:
        """The server's version; PrometheusError when nothing (or no Prometheus) answers."""
        data = self._get("/api/v1/status/buildinfo", {})
        return str((data or {}).get("version", "unknown"))

    def instant(self, query: str, at: float | None = None) -> list[tuple[dict[str, str], float]]:
        """An instant query's series as (labels, value)."""
        params: dict[str, Any] = {"query": query}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self._get("/api/v1/query", params)
        return [(dict(r["metric"]), float(r["value"][1])) for r in (data or {}).get("result", [])]

    def range(self, query: str, start: float, end: float, step_s: float = 1.0) -> list[tuple[dict[str, str], list[Sample]]]:
        """A range query's series as (labels, [(time, value), ...])."""
        data = self._get(
            "/api/v1/query_range", {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": step_s}
        )
        return [
            (dict(r["metric"]), [(float(t), float(v)) for t, v in r["values"]]) for r in (data or {}).get("result", [])
        ]


def prometheus_binary() -> str:
    """Path of the prometheus binary; PrometheusError when it is not installed."""
    found = shutil.which("prometheus") or ("/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None)
    if found is None:
        raise PrometheusError(
            "prometheus not found on PATH: install the Debian package prometheus (make system-deps), "
            "or give --prometheus URL of a server that scrapes the cluster"
        )
    return found


@dataclass
class LocalPrometheus:
    """A Prometheus process on loopback scraping ``targets`` every ``scrape_interval_s``."""

    workdir: Path
    targets: list[str]
    scrape_interval_s: float = 1.0
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def client(self) -> PrometheusClient:
        """A query client of this server."""
        return PrometheusClient(self.url)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.stop()

    def start(self, timeout_s: float = 30.0) -> Self:
        """Start the server and return once it scrapes every target; stops it again if that fails."""
        binary = prometheus_binary()
        self.workdir.mkdir(parents=True, exist_ok=True)
        interval = f"{self.scrape_interval_s:g}s"
        config = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [{"job_name": "flink", "static_configs": [{"targets": self.targets}]}],
        }
        config_path = self.workdir / "prometheus.yml"
        config_path.write_text(json.dumps(config))  # JSON is YAML
        log = (self.workdir / "prometheus.log").open("ab")
        try:
            self.process = subprocess.Popen(
                [binary, f"--config.file={config_path}", f"--storage.tsdb.path={self.workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        finally:
            log.close()
        try:
            client = self.client

            def scraping() -> bool:
                if self.process is not None and self.process.poll() is not None:
                    raise PrometheusError(f"prometheus exited with {self.process.returncode}: {self.log_tail()}")
                try:
                    up = client.instant("count(up == 1)")
                except PrometheusError:
                    return False
                return bool(up) and up[0][1] >= len(self.targets)

            poll(scraping, timeout_s=timeout_s, interval_s=0.3, what=f"Prometheus scraping {len(self.targets)} targets")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the process by its pid: SIGTERM, then SIGKILL after 10 s."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of the server's log, for error messages."""
        try:
            text = (self.workdir / "prometheus.log").read_text(errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])


def wait_for_samples(client: PromQL, query: str, *, timeout_s: float, what: str) -> None:
    """Poll until ``query`` returns a series (the scrape caught up); PrometheusError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not client.instant(query):
        if time.monotonic() >= deadline:
            raise PrometheusError(f"Prometheus {client.url} has no {what} after {timeout_s:g} s: does it scrape the cluster?")
        time.sleep(0.3)  # polling interval, bounded by the deadline
