"""``perdix run``: the production daemon — Prometheus monitor, Kubernetes (or Flink REST) executor, one
round per ``loop_interval_s`` on an APScheduler interval job, /metrics /healthz /readyz, graceful stop.

Start-up checks fail fast with one line (the CLI exits 2): a scale target kind the daemon cannot drive,
a kubeconfig or in-cluster config that cannot be loaded, an API server or Prometheus that does not
answer, a query Prometheus rejects, a knowledge file that cannot be written, a telemetry port already
taken. After start nothing is fatal: an outage is a round without data (no rescale, /readyz turns not
ready after N such rounds).

On SIGTERM or SIGINT the scheduler stops taking new rounds, the running round finishes (its requests
are bounded by their timeouts; a rescale waiting for its confirmation stops waiting and is recorded as
pending, for the next start to confirm), the knowledge is flushed once more, and the probe server stops:
well within Kubernetes' default grace period of 30 s.
"""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import FrameType
from typing import TYPE_CHECKING, Protocol

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from agent.clock import Clock, WallClock
from agent.knowledge.document import KnowledgeUnrecoverable
from agent.logging import get_logger
from agent.loop import Agent, Planning
from agent.ports import EventSink, InterruptibleScaler, KnowledgeStore, MetricSource, MonitorError, Scaler
from agent.settings import ConfigError, Settings
from agent.telemetry import Telemetry, TelemetryServer

if TYPE_CHECKING:
    from kubernetes import client as k8s

    from agent.execute.kubernetes import KubernetesScaler

KUBERNETES_KINDS = ("deployment", "statefulset", "flinkdeployment")


class StartupError(Exception):
    """The daemon cannot start; the message is the one line the CLI prints before exit 2."""


class Closeable(Protocol):
    """A client the daemon closes when it stops."""

    def close(self) -> None:
        """Release the client's connections."""
        ...


@dataclass
class Parts:
    """The collaborators of one daemon, built and checked from the settings."""

    scaler: Scaler
    monitor: MetricSource
    knowledge: KnowledgeStore
    events: EventSink | None
    telemetry: Telemetry
    closers: list[Closeable] = field(default_factory=list)
    api: k8s.ApiClient | None = None
    """The Kubernetes API client, when a target or the knowledge store needs one (the per-operator path writes
    a FlinkDeployment through it)."""


def _kube_client(settings: Settings) -> k8s.ApiClient:
    from agent.execute.kubernetes import KubeConfigError, api_client

    try:
        return api_client(settings.scale_target)
    except KubeConfigError as exc:
        raise StartupError(str(exc)) from None


def _check_api_server(scaler: KubernetesScaler) -> None:
    """Unreachable or unauthenticated API server: exit. 403/404: reported once (by the probe) and kept running."""
    failure = scaler.probe()
    if failure is None:
        return
    if failure.kind in ("unreachable", "timeout"):
        raise StartupError(
            f"scale_target: the Kubernetes API server at {scaler.api_host} does not answer ({failure.message})"
        )
    if failure.kind == "unauthorized":
        raise StartupError(f"scale_target: the Kubernetes API server refused the credentials ({failure.message})")


def build_parts(settings: Settings, *, clock: Clock, telemetry: Telemetry | None = None) -> Parts:
    """Build and check monitor, scaler, events and knowledge store; StartupError with one line if any cannot work."""
    kind = settings.scale_target.kind
    if kind not in KUBERNETES_KINDS and kind != "flink-rest":
        raise StartupError(
            f"scale_target.kind: {kind!r} cannot be run as a daemon; use deployment, statefulset, flinkdeployment "
            "or flink-rest (the simulated job runs with `perdix simulate`)"
        )
    telemetry = telemetry or Telemetry(not_ready_after_failed_loops=settings.telemetry.not_ready_after_failed_loops)
    api: k8s.ApiClient | None = None
    if kind in KUBERNETES_KINDS or settings.knowledge.store == "configmap":
        api = _kube_client(settings)
    if api is not None and kind in KUBERNETES_KINDS:
        scaler, events = _kubernetes_scaler(settings, api, clock=clock, telemetry=telemetry)
    else:
        scaler, events = _flink_rest_scaler(settings, clock=clock), None
    monitor = _prometheus_monitor(settings, telemetry)
    knowledge = _knowledge_store(settings, api)
    return Parts(
        scaler=scaler,
        monitor=monitor,
        knowledge=knowledge,
        events=events,
        telemetry=telemetry,
        closers=[api] if api is not None else [],
        api=api,
    )


def _kubernetes_scaler(
    settings: Settings, api: k8s.ApiClient, *, clock: Clock, telemetry: Telemetry
) -> tuple[Scaler, EventSink]:
    """The scaler of a Deployment, StatefulSet or FlinkDeployment and the sink of its Events, the API server
    checked."""
    from agent.execute.kubernetes import KubernetesEventSink, KubernetesScaler, TargetRef

    events = KubernetesEventSink(
        api,
        TargetRef.from_settings(settings.scale_target),
        clock=clock,
        request_timeout_s=settings.scale_target.request_timeout_s,
    )
    scaler = KubernetesScaler(settings.scale_target, api, events, on_error=telemetry.executor_error)
    _check_api_server(scaler)
    return scaler, events


def _flink_rest_scaler(settings: Settings, *, clock: Clock) -> Scaler:
    """The scaler of a job on a session cluster, through Flink's REST API (which must answer)."""
    from agent.execute.flink_rest import FlinkRestScaler, unreachable_reason

    reason = unreachable_reason(settings.scale_target)
    if reason is not None:
        raise StartupError(reason)
    return FlinkRestScaler(settings.scale_target, clock=clock)


def _prometheus_monitor(settings: Settings, telemetry: Telemetry) -> MetricSource:
    """The Prometheus monitor, once Prometheus answers and accepts every query."""
    from agent.monitor.prometheus import PrometheusMonitor, check_prometheus

    try:
        check_prometheus(settings.prometheus, skip=settings.skipped_queries)
    except (MonitorError, ConfigError) as exc:
        raise StartupError(str(exc)) from None
    return PrometheusMonitor(settings.prometheus, on_error=telemetry.monitor_error, skip=settings.skipped_queries)


def _knowledge_store(settings: Settings, api: k8s.ApiClient | None) -> KnowledgeStore:
    """The ConfigMap store (through ``api``, built whenever that store is chosen) or the file store, checked
    writable."""
    if api is not None and settings.knowledge.store == "configmap":
        from agent.execute.kubernetes import Backoff
        from agent.knowledge.configmap import ConfigMapKnowledgeStore

        return ConfigMapKnowledgeStore(
            api,
            name=settings.knowledge.configmap,
            namespace=settings.scale_target.namespace,
            backoff=Backoff(max_retries=settings.scale_target.max_retries),
            request_timeout_s=settings.scale_target.request_timeout_s,
        )
    from agent.knowledge.file import FileKnowledgeStore, KnowledgePathError

    knowledge = FileKnowledgeStore(settings.knowledge.path)
    try:
        knowledge.check_writable()
    except KnowledgePathError as exc:
        raise StartupError(str(exc)) from None
    return knowledge


class Daemon:
    """The agent on a wall-clock schedule with its probe server; start(), then stop() from a signal."""

    def __init__(self, settings: Settings, *, clock: Clock | None = None, parts: Parts | None = None) -> None:
        self.settings = settings
        self.clock = clock or WallClock()
        self.parts = parts or build_parts(settings, clock=self.clock)
        self.log = get_logger("perdix.daemon")
        try:
            self.agent = Agent(
                settings=settings,
                clock=self.clock,
                monitor=self.parts.monitor,
                scaler=self.parts.scaler,
                knowledge=self.parts.knowledge,
                events=self.parts.events,
                telemetry=self.parts.telemetry,
                planning=self._planning(),
            )
        except (KnowledgeUnrecoverable, ConfigError) as exc:
            self._close_parts()
            raise StartupError(str(exc)) from None
        self.server: TelemetryServer | None = None
        self.scheduler = BackgroundScheduler(
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None}
        )
        self._stopped = threading.Event()
        self._started = False
        """Set once start() has bound the server and scheduled the rounds: a daemon that never started ran no round,
        so stop() has nothing to flush (a knowledge file written by a start that failed is a half-applied start)."""
        self.rounds = 0

    def _planning(self) -> Planning | None:
        """The per-vertex plan and execute steps when the policy plans per job vertex on this target
        (agent/per_operator); None: the whole-job ones."""
        if not self.settings.per_operator:
            return None
        from agent.per_operator import build_planning

        parts = self.parts
        return build_planning(
            self.settings,
            clock=self.clock,
            scaler=parts.scaler,
            api=parts.api,
            events=parts.events,
            telemetry=parts.telemetry,
        )

    def _round(self) -> None:
        # Agent.round never raises; a round that overruns the interval makes the scheduler skip one.
        self.agent.round()
        self.rounds += 1

    def start(self) -> None:
        """Bind the probe server and schedule the rounds, the first one now."""
        port = self.settings.telemetry.metrics_port
        if port:
            try:
                self.server = TelemetryServer(self.parts.telemetry, self.settings.telemetry.metrics_host, port).start()
            except OSError as exc:
                host = self.settings.telemetry.metrics_host
                raise StartupError(
                    f"telemetry.metrics_port: cannot listen on {host}:{port}: {exc.strerror or exc}"
                ) from None
        interval = self.settings.loop_interval_s
        self.scheduler.add_job(
            self._round,
            IntervalTrigger(seconds=interval),
            id="perdix-round",
            next_run_time=datetime.now().astimezone() + timedelta(milliseconds=10),
        )
        self.scheduler.start()
        self._started = True
        self.log.info(
            "daemon.started",
            loop_interval_s=interval,
            scale_target=f"{self.settings.scale_target.kind}/{self.settings.scale_target.name}",
            dry_run=self.settings.dry_run,
            prometheus=self.settings.prometheus.url,
            metrics=self.server.url if self.server else None,
        )

    def stop(self) -> None:
        """Finish the running round, flush the knowledge, stop serving (idempotent); after a start that failed,
        only release what was opened."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        if isinstance(self.parts.scaler, InterruptibleScaler):
            # A round waiting for a rescale's confirmation (up to two minutes) or retrying a failed request would
            # outlast Kubernetes' grace period: it stops waiting (the rescale is recorded as pending and confirmed
            # at the next start) and retrying.
            self.parts.scaler.interrupt()
        try:
            self.scheduler.shutdown(wait=True)
        except Exception:  # not started
            pass
        flushed = False
        if self._started:
            try:
                self.parts.knowledge.save(self.agent.document())
                flushed = True
            except Exception as exc:
                self.log.error("knowledge.flush_failed", error=f"{type(exc).__name__}: {exc}")
        if self.server is not None:
            self.server.stop()
        self._close_parts()
        if self._started:
            self.log.info("daemon.stopped", rounds=self.rounds, knowledge_flushed=flushed)

    def _close_parts(self) -> None:
        """Close what the parts opened (the Kubernetes client), whatever each close raises."""
        for closer in self.parts.closers:
            try:
                closer.close()
            except Exception:
                pass

    def run_until_signal(self) -> None:
        """Start, block until SIGTERM/SIGINT, then stop gracefully."""
        stop = threading.Event()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            self.log.info("daemon.signal", signal=signal.Signals(signum).name)
            stop.set()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.start()
            stop.wait()
        finally:
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
