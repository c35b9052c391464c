"""A real Prometheus server on loopback, scraping the lab's Flink cluster (or any exporter), and its HTTP API.

Prometheus is the Debian package the project's setup installs (scripts/install-system-deps.sh). Each
server gets a free port and a TSDB in a working directory of the caller's; it is started with its
own session and stopped by its pid (SIGTERM, then SIGKILL), also when this process dies first.
Nothing here sleeps blindly: readiness and the first samples are polled with a deadline.

The capacity planner's testbed reads PromQL through :class:`PrometheusClient` (the :class:`PromQL`
protocol), from a server started here next to a local cluster or the one the user names for an
existing testbed cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

from lab.flink.cluster import FlinkLabError, _die_with_parent, free_port, poll

PROMETHEUS_BINARY = "prometheus"


Sample = tuple[float, float]
"""(Unix time s, value) of one point of a range query."""


class PrometheusError(FlinkLabError):
    """Prometheus is missing, does not answer, or rejected a query (one line, naming the server)."""


class PrometheusNotInstalled(PrometheusError):
    """The prometheus binary is not on PATH."""


class PrometheusExited(PrometheusError):
    """The Prometheus process exited."""


class QueryRejected(PrometheusError):
    """Prometheus answered a query with an error (the message carries its reason)."""


def http_get(url: str, timeout_s: float = 2.0) -> tuple[int, str]:
    """Status and body of a GET; (0, reason) when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except (urllib.error.URLError, OSError) as exc:
        return 0, str(exc)


def prometheus_binary() -> str:
    """Path of the prometheus binary; PrometheusNotInstalled when the system deps are missing."""
    path = shutil.which(PROMETHEUS_BINARY) or ("/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None)
    if path is None:
        raise PrometheusNotInstalled(
            "prometheus is not installed: run `make system-deps` (scripts/install-system-deps.sh)"
        )
    return path


class PrometheusServer:
    """One Prometheus process scraping ``targets`` every ``scrape_interval``; restartable on the same port and data."""

    def __init__(
        self, workdir: Path, targets: list[str], *, scrape_interval: str = "1s", port: int | None = None
    ) -> None:
        self.workdir = workdir
        self.targets = targets
        self.scrape_interval = scrape_interval
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.config = workdir / "prometheus.yml"
        self.data = workdir / "data"
        self.log_path = workdir / "prometheus.log"

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL."""
        return f"http://127.0.0.1:{self.port}"

    def binary(self) -> str:
        """The prometheus executable (a hook for the tests, which fail rather than raise when it is missing)."""
        return prometheus_binary()

    def write_config(self) -> None:
        """The scrape config: one job, the given loopback targets."""
        config = {
            "global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.scrape_interval},
            "scrape_configs": [{"job_name": "perdix-test", "static_configs": [{"targets": self.targets}]}],
        }
        self.config.write_text(json.dumps(config))  # JSON is YAML

    def start(self, ready_timeout_s: float = 20.0) -> Self:
        """Start the process and wait until /-/ready answers 200 (a start that fails stops the process)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.write_config()
        self.data.mkdir(parents=True, exist_ok=True)
        binary = self.binary()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    binary,
                    f"--config.file={self.config}",
                    f"--storage.tsdb.path={self.data}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                # Before exec no thread of ours runs in the child: the fork-and-threads hazard does not apply.
                start_new_session=True,
                preexec_fn=_die_with_parent,  # noqa: PLW1509
            )

        def ready() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise PrometheusExited(f"prometheus exited with {self.process.returncode}: {self.log_tail()}")
            return http_get(f"{self.url}/-/ready", timeout_s=1.0)[0] == 200

        try:
            poll(ready, timeout_s=ready_timeout_s, interval_s=0.1, what="prometheus /-/ready")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the process by pid (SIGTERM, then SIGKILL after 10 s)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def log_tail(self, lines: int = 20) -> str:
        """Last lines of the server's log, for failure messages."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # ------------------------------------------------------------------ the HTTP API

    def query(self, promql: str) -> list[dict[str, Any]]:
        """Instant query result now (empty on any error)."""
        status, body = http_get(f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        if status != 200:
            return []
        return list(json.loads(body)["data"]["result"])

    def query_at(self, promql: str, at: float) -> list[dict[str, Any]]:
        """An instant query at ``at`` (Unix seconds); QueryRejected with Prometheus' reason on an error."""
        params = urllib.parse.urlencode({"query": promql, "time": at})
        status, body = http_get(f"{self.url}/api/v1/query?{params}", timeout_s=10.0)
        if status != 200:
            raise QueryRejected(f"Prometheus answered {status} to {promql}: {body[:300]}")
        return list(json.loads(body)["data"]["result"])

    def query_range(self, promql: str, start: float, end: float, step: float = 1.0) -> list[dict[str, Any]]:
        """A range query's series; QueryRejected with Prometheus' reason on an error.

        Prometheus answers at most 11,000 points per series, so a long range is read in chunks.
        """
        chunk = 10_000 * step
        merged: dict[str, dict[str, Any]] = {}
        at = start
        while at <= end:
            upto = min(end, at + chunk - step)
            params = urllib.parse.urlencode({"query": promql, "start": at, "end": upto, "step": step})
            status, body = http_get(f"{self.url}/api/v1/query_range?{params}", timeout_s=30.0)
            if status != 200:
                raise QueryRejected(f"Prometheus answered {status} to {promql}: {body[:300]}")
            for series in json.loads(body)["data"]["result"]:
                key = json.dumps(series.get("metric", {}), sort_keys=True)
                kept = merged.setdefault(key, {"metric": series.get("metric", {}), "values": []})
                kept["values"].extend(series.get("values", []))
            at = upto + step
        return list(merged.values())

    def wait_for(self, promql: str, timeout_s: float = 20.0) -> list[dict[str, Any]]:
        """Poll until the instant query returns at least one series."""
        return poll(lambda: self.query(promql), timeout_s=timeout_s, interval_s=0.2, what=f"a sample of {promql}")

    def version(self) -> str:
        """The server's version from its build info."""
        status, body = http_get(f"{self.url}/api/v1/status/buildinfo")
        return json.loads(body)["data"]["version"] if status == 200 else "unknown"

    @property
    def client(self) -> PrometheusClient:
        """A query client of this server."""
        return PrometheusClient(self.url)

    def wait_scraping(self, timeout_s: float = 30.0) -> None:
        """Poll until every target is up in the server's own view (its first scrapes landed)."""
        client = self.client

        def scraping() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise PrometheusExited(f"prometheus exited with {self.process.returncode}: {self.log_tail()}")
            try:
                up = client.instant("count(up == 1)")
            except PrometheusError:
                return False
            return bool(up) and up[0][1] >= len(self.targets)

        poll(scraping, timeout_s=timeout_s, interval_s=0.3, what=f"Prometheus scraping {len(self.targets)} targets")


class PromQL(Protocol):
    """What the testbed asks of a Prometheus: instant and range queries (the client below, or a test fake)."""

    @property
    def url(self) -> str: ...

    def instant(self, query: str, at: float | None = None) -> list[tuple[dict[str, str], float]]:
        """An instant query's series as (labels, value)."""
        ...

    def range(
        self, query: str, start: float, end: float, step_s: float = 1.0
    ) -> list[tuple[dict[str, str], list[Sample]]]:
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

    def range(
        self, query: str, start: float, end: float, step_s: float = 1.0
    ) -> list[tuple[dict[str, str], list[Sample]]]:
        """A range query's series as (labels, [(time, value), ...])."""
        data = self._get(
            "/api/v1/query_range", {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": step_s}
        )
        return [
            (dict(r["metric"]), [(float(t), float(v)) for t, v in r["values"]]) for r in (data or {}).get("result", [])
        ]


def wait_for_samples(client: PromQL, query: str, *, timeout_s: float, what: str) -> None:
    """Poll until ``query`` returns a series (the scrape caught up); PrometheusError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not client.instant(query):
        if time.monotonic() >= deadline:
            raise PrometheusError(
                f"Prometheus {client.url} has no {what} after {timeout_s:g} s: does it scrape the cluster?"
            )
        time.sleep(0.3)  # polling interval, bounded by the deadline
