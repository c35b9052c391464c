"""The agent's own telemetry: Prometheus metrics of every round, and /metrics, /healthz, /readyz.

Metrics live on an injectable ``CollectorRegistry`` (tests build a fresh one and read samples back).
The loop hands each finished round to :meth:`Telemetry.record_round`; the adapters report their
failed requests through :meth:`Telemetry.monitor_error` / :meth:`Telemetry.executor_error`.

Readiness: not ready until a round has completed with usable data; then not ready again after
``not_ready_after_failed_loops`` consecutive rounds without data (Prometheus down, empty series),
ready again with the next round that has data. /healthz only says the process serves requests.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Self

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from agent.logging import get_logger

if TYPE_CHECKING:
    from agent.loop import RoundResult

LOOP_BUCKETS_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Telemetry:
    """The agent's metrics and readiness state."""

    def __init__(self, registry: CollectorRegistry | None = None, *, not_ready_after_failed_loops: int = 3) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.not_ready_after = not_ready_after_failed_loops
        self._register_round_metrics(self.registry)
        self._register_job_gauges(self.registry)
        self._register_failure_counters(self.registry)
        self.ready_gauge = Gauge("perdix_ready", "1 when /readyz answers ready.", registry=self.registry)
        self._lock = threading.Lock()
        self._had_data = False
        self._rounds_without_data = 0
        self._reason = "no round has completed with data yet"
        self.log = get_logger("perdix.telemetry")
        for gauge in (
            self.parallelism_current,
            self.parallelism_recommended,
            self.capacity,
            self.workload_rate,
            self.consumer_lag,
            self.forecast_peak,
            self.recovery_predicted,
            self.recovery_measured,
            self.knowledge_bytes,
        ):
            gauge.set(math.nan)
        self.ready_gauge.set(0)

    def _register_round_metrics(self, registry: CollectorRegistry) -> None:
        """What each round did: its duration and outcome, the decision, the scale-out and the rescales."""
        self.loop_duration = Histogram(
            "perdix_loop_duration_seconds", "Wall time of one MAPE-K round.", buckets=LOOP_BUCKETS_S, registry=registry
        )
        self.rounds = Counter(
            "perdix_rounds", "Rounds run, by outcome (acted on data or skipped).", ["outcome"], registry=registry
        )
        self.round_failures = Counter(
            "perdix_round_failures", "Rounds ended early by a failing step.", ["step"], registry=registry
        )
        self.decisions = Counter(
            "perdix_decisions",
            "Decisions by reason code (grace, recovering, scale-out, stabilized, ...).",
            ["code"],
            registry=registry,
        )
        self.parallelism_current = Gauge("perdix_parallelism_current", "Scale-out the job runs at.", registry=registry)
        self.parallelism_recommended = Gauge(
            "perdix_parallelism_recommended",
            "Scale-out the planner chose this round (also in dry-run).",
            registry=registry,
        )
        self.rescales = Counter("perdix_rescales", "Rescales applied and confirmed by read-back.", registry=registry)
        self.recommendations = Counter(
            "perdix_rescale_recommendations",
            "Rounds whose decision changes the scale-out (applied or dry-run).",
            registry=registry,
        )

    def _register_job_gauges(self, registry: CollectorRegistry) -> None:
        """What the models make of the job: capacity, workload, lag, forecast and recovery times."""
        self.capacity = Gauge(
            "perdix_capacity", "Estimated capacity at the current scale-out, records/s.", registry=registry
        )
        self.workload_rate = Gauge(
            "perdix_workload_rate", "Mean workload of the last round, records/s.", registry=registry
        )
        self.consumer_lag = Gauge("perdix_consumer_lag", "Newest consumer lag, records.", registry=registry)
        self.forecast_peak = Gauge(
            "perdix_forecast_peak", "Peak of the workload forecast, records/s.", registry=registry
        )
        self.recovery_predicted = Gauge(
            "perdix_recovery_predicted_seconds",
            "Predicted recovery time after a failure at the current scale-out.",
            registry=registry,
        )
        self.recovery_measured = Gauge(
            "perdix_recovery_measured_seconds",
            "Most recent measured recovery time (rescale or failure).",
            registry=registry,
        )

    def _register_failure_counters(self, registry: CollectorRegistry) -> None:
        """What went wrong: the adapters' failed requests, the knowledge writes, refused states, safeguards."""
        self.monitor_errors = Counter("perdix_monitor_errors", "Monitor problems by kind.", ["kind"], registry=registry)
        self.executor_errors = Counter(
            "perdix_executor_errors", "Failed scale-target API requests by kind.", ["kind"], registry=registry
        )
        self.knowledge_bytes = Gauge(
            "perdix_knowledge_bytes",
            "Size of the knowledge document the last round wrote or tried to write.",
            registry=registry,
        )
        self.knowledge_failures = Counter(
            "perdix_knowledge_save_failures",
            "Knowledge writes that failed, by kind (too_large: over the store's limit, the last document stays; "
            "store; encode).",
            ["kind"],
            registry=registry,
        )
        self.states_refused = Counter(
            "perdix_states_refused",
            "Stored states refused as untrusted input that does not fit its schema, by source (knowledge: the "
            "document at start, moved aside; registry: a model artifact, skipped while the running model stays) "
            "and kind.",
            ["source", "kind"],
            registry=registry,
        )
        self.safeguard_findings = Counter(
            "perdix_safeguard_findings",
            "Decisions a safeguard vetoed or limited, by reason code (memory-pressure, blocked-period, "
            "ineffective-scale-out, quota, stabilized, ...) and verdict (vetoed, limited); counted every round, "
            "reported as Events at most once per interval.",
            ["code", "verdict"],
            registry=registry,
        )

    # ------------------------------------------------------------------ adapters

    def monitor_error(self, kind: str) -> None:
        """Count one monitor problem (unreachable, timeout, empty, stale, wrong_shape, ...)."""
        self.monitor_errors.labels(kind=kind).inc()

    def executor_error(self, kind: str) -> None:
        """Count one failed scale-target request (conflict, throttled, forbidden, ...)."""
        self.executor_errors.labels(kind=kind).inc()

    def state_refused(self, source: str, kind: str) -> None:
        """Count one refused stored state (``knowledge`` or ``registry``)."""
        self.states_refused.labels(source=source, kind=kind).inc()

    # ------------------------------------------------------------------ the loop

    def record_round(self, result: RoundResult) -> None:
        """Update every metric and the readiness from one finished round."""
        self.loop_duration.observe(result.latency_ms / 1000.0)
        outcome = result.outcome
        if outcome.step is not None:
            self.round_failures.labels(step=outcome.step).inc()
        observation, analysis, decision = result.observation, result.analysis, result.decision
        has_data = observation is not None and observation.usable and analysis is not None
        self.rounds.labels(outcome="data" if has_data else "no_data").inc()
        for finding in result.findings:
            self.safeguard_findings.labels(code=finding.code.value, verdict=finding.verdict.value).inc()

        current = analysis.parallelism if analysis is not None else None
        self.parallelism_current.set(_num(current))
        if analysis is not None:
            self.workload_rate.set(_num(analysis.workload_avg))
            self.consumer_lag.set(_num(analysis.consumer_lag))
            self.capacity.set(_num(analysis.capacities.get(current) if current is not None else None))
            peak = float(max(analysis.forecast)) if analysis.forecast is not None and len(analysis.forecast) else None
            self.forecast_peak.set(_num(peak))
            self.recovery_predicted.set(_num(analysis.recovery_times.get(current) if current is not None else None))
            for recovery in analysis.recoveries:
                self.recovery_measured.set(_num(recovery.measured_s))
            for kind in analysis.refused_artifacts:
                self.state_refused("registry", kind)
        else:
            for gauge in (
                self.workload_rate,
                self.consumer_lag,
                self.capacity,
                self.forecast_peak,
                self.recovery_predicted,
            ):
                gauge.set(math.nan)
        if decision is not None:
            self.decisions.labels(code=decision.code.value).inc()
            self.parallelism_recommended.set(decision.target_parallelism)
            if current is not None and decision.rescales_from(current):
                self.recommendations.inc()
        else:
            self.parallelism_recommended.set(math.nan)
        if result.rescaled_to is not None:
            self.rescales.inc()
        if result.knowledge is not None:
            self.knowledge_bytes.set(_num(result.knowledge.size_bytes))
            if result.knowledge.failure is not None:
                self.knowledge_failures.labels(kind=result.knowledge.failure).inc()
        self.update_readiness(has_data, outcome.message)

    def update_readiness(self, has_data: bool, skipped: str | None) -> None:
        """Count a round with data (ready from now on) or without (``skipped``: why; not ready after
        ``not_ready_after_failed_loops`` in a row); a change of readiness is logged once."""
        with self._lock:
            was_ready = self._ready_locked()
            if has_data:
                self._had_data = True
                self._rounds_without_data = 0
                self._reason = ""
            else:
                self._rounds_without_data += 1
                self._reason = f"{self._rounds_without_data} round(s) without data; last: {skipped or 'no usable data'}"
            ready = self._ready_locked()
        self.ready_gauge.set(1 if ready else 0)
        if ready != was_ready:  # one line per state change, not per round
            if ready:
                self.log.info("readiness.ready")
            else:
                self.log.warning("readiness.not_ready", reason=self._reason)

    def _ready_locked(self) -> bool:
        return self._had_data and self._rounds_without_data < self.not_ready_after

    def readiness(self) -> tuple[bool, str]:
        """(ready, reason) for /readyz."""
        with self._lock:
            ready = self._ready_locked()
            if ready:
                return True, "ready"
            if not self._had_data:
                return False, "not ready: " + (
                    self._reason if self._rounds_without_data else "no round has completed with data yet"
                )
            return False, "not ready: " + self._reason

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


def _num(value: float | int | None) -> float:
    """A gauge value; unknown is NaN (never zero: zero would read as a real measurement)."""
    if value is None:
        return math.nan
    value = float(value)
    return value if math.isfinite(value) else math.nan


Route = Callable[[], tuple[int, bytes, str]]
"""A GET endpoint: returns (status, body, content type)."""

TEXT = "text/plain; charset=utf-8"


class EndpointServer:
    """Fixed GET (and HEAD) paths served on a background thread; ``port=0`` picks a free port.

    Shared by the agent's probes and /metrics and by the simulator exporter: a scrape or a probe
    every few seconds is not worth a log line, so requests are not logged.
    """

    def __init__(self, routes: Mapping[str, Route], host: str, port: int, *, name: str) -> None:
        self.routes = dict(routes)
        self.host = host
        self.port = port
        self.name = name
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        """Bind and serve; raises OSError if the address is taken."""
        routes = self.routes
        missing = f"not found: try {', '.join(routes)}\n".encode()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return None

            def do_GET(self) -> None:
                route = routes.get(self.path.split("?", 1)[0])
                status, body, content_type = route() if route is not None else (404, missing, TEXT)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_HEAD = do_GET

        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        server = self._server
        self._thread = threading.Thread(
            target=lambda: server.serve_forever(poll_interval=0.1), name=self.name, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def _healthz() -> tuple[int, bytes, str]:
    return 200, b"ok\n", TEXT


class TelemetryServer(EndpointServer):
    """/metrics, /healthz and /readyz of the agent on a background thread; ``port=0`` picks a free port."""

    def __init__(self, telemetry: Telemetry, host: str = "0.0.0.0", port: int = 9249) -> None:
        self.telemetry = telemetry

        def readyz() -> tuple[int, bytes, str]:
            ready, reason = telemetry.readiness()
            return (200 if ready else 503), (reason + "\n").encode(), TEXT

        routes: dict[str, Route] = {
            "/metrics": lambda: (200, telemetry.exposition(), CONTENT_TYPE_LATEST),
            "/healthz": _healthz,
            "/readyz": readyz,
        }
        super().__init__(routes, host, port, name="perdix-telemetry")

    @property
    def url(self) -> str:
        """Base URL (loopback when bound to all interfaces)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"
