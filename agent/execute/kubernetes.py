"""The Kubernetes executor: rescales the job through the API server and leaves an Event for each rescale.

What is written, per ``scale_target.kind``:
- ``deployment`` / ``statefulset`` (Flink reactive mode): ``spec.replicas`` of the TaskManager workload,
  through its ``scale`` subresource (``PATCH .../deployments/NAME/scale``, JSON merge patch), so the
  Role needs only ``get, patch`` on ``deployments/scale`` (or ``statefulsets/scale``) for that name.
- ``flinkdeployment`` (Flink Kubernetes operator): ``spec.job.parallelism`` of the FlinkDeployment
  (JSON merge patch; custom resources take no strategic merge). The operator then redeploys the job;
  Perdix treats that parallelism as the scale-out (one task slot per TaskManager).

Every write is read back: only the value the API server returns on a fresh GET counts as confirmed.
409/429/5xx, timeouts and unreachable servers are retried with capped exponential backoff and jitter
(the write is idempotent: it sets a value, it does not add to one). 403/404 are not retried: they are
logged once, with the permission or object that is missing, and raised as ScalerError. Dry-run never
writes the scale target; it leaves a ``RescaleRecommended`` Event instead.
"""

from __future__ import annotations

import random
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TypeVar

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from agent.clock import Clock, WallClock
from agent.logging import get_logger
from agent.ports import EventSink, RescaleResult, ScalerError
from agent.settings import ScaleTargetSettings
from planner.safeguards import SlotResources

T = TypeVar("T")

REPORTING_CONTROLLER = "perdix.io/autoscaler"
MERGE_PATCH = "application/merge-patch+json"
NOTE_LIMIT = 1024
"""events.k8s.io/v1 rejects a note longer than 1 KiB."""

_RETRYABLE_STATUS = {409: "conflict", 429: "throttled"}


class KubeConfigError(Exception):
    """The Kubernetes client cannot be configured (no kubeconfig, no in-cluster service account)."""


def api_client(target: ScaleTargetSettings) -> k8s.ApiClient:
    """An ApiClient from ``target.kubeconfig`` or, when unset, the in-cluster service account.

    The client's own urllib3 retries are switched off: the adapters retry with their own capped
    backoff, and a hidden second retry layer would multiply the attempts.
    """
    configuration = k8s.Configuration()
    try:
        if target.kubeconfig:
            k8s_config.load_kube_config(config_file=target.kubeconfig, client_configuration=configuration)
        else:
            k8s_config.load_incluster_config(client_configuration=configuration)
    except yaml.YAMLError as exc:
        raise KubeConfigError(
            f"scale_target.kubeconfig ({target.kubeconfig}): not valid YAML: {_one_line(exc)}"
        ) from None
    except (TypeError, AttributeError, KeyError) as exc:  # YAML, but not a kubeconfig's mapping
        if not target.kubeconfig:
            raise KubeConfigError(f"in-cluster config: {_one_line(exc)}") from None
        raise KubeConfigError(
            f"scale_target.kubeconfig ({target.kubeconfig}): not a kubeconfig ({type(exc).__name__}: {_one_line(exc)})"
        ) from None
    except (k8s_config.ConfigException, OSError, ValueError) as exc:
        where = (
            f"scale_target.kubeconfig ({target.kubeconfig})"
            if target.kubeconfig
            else "in-cluster config (set scale_target.kubeconfig outside a cluster)"
        )
        raise KubeConfigError(f"{where}: {_one_line(exc)}") from None
    configuration.retries = 0
    return k8s.ApiClient(configuration)


def _one_line(exc: BaseException) -> str:
    """An exception's message on one line (its type where it has none), at most 300 characters."""
    return (" ".join(str(exc).split()) or type(exc).__name__)[:300]


# ---------------------------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class ApiFailure:
    """One failed API call, classified."""

    kind: str
    """conflict, throttled, server_error, timeout, unreachable, forbidden, not_found, unauthorized, rejected."""
    status: int | None
    message: str
    retry_after_s: float | None = None

    @property
    def retryable(self) -> bool:
        """True for failures that may pass on their own."""
        return self.kind in ("conflict", "throttled", "server_error", "timeout", "unreachable")


def classify(exc: BaseException) -> ApiFailure | None:
    """Turn a client exception into an ApiFailure; None if it is not an API/transport failure."""
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        message = _status_message(exc)
        retry_after = _retry_after(exc)
        if status in _RETRYABLE_STATUS:
            return ApiFailure(_RETRYABLE_STATUS[status], status, message, retry_after)
        if status >= 500:
            return ApiFailure("server_error", status, message, retry_after)
        if status == 403:
            return ApiFailure("forbidden", status, message)
        if status == 404:
            return ApiFailure("not_found", status, message)
        if status == 401:
            return ApiFailure("unauthorized", status, message)
        if status == 0:
            return ApiFailure("unreachable", None, message)
        return ApiFailure("rejected", status, message)
    if isinstance(exc, (urllib3.exceptions.TimeoutError, TimeoutError)):
        return ApiFailure("timeout", None, f"timed out: {exc}")
    if isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError)):
        return ApiFailure("unreachable", None, f"API server unreachable: {type(exc).__name__}")
    return None


def _status_message(exc: ApiException) -> str:
    import json

    try:
        body = json.loads(exc.body) if exc.body else {}
    except (TypeError, ValueError):
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    return f"{exc.status} {exc.reason}: {message}" if message else f"{exc.status} {exc.reason}"


def _retry_after(exc: ApiException) -> float | None:
    headers = exc.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


@dataclass
class Backoff:
    """Capped exponential backoff with jitter; ``sleep`` and ``rng`` are injectable so tests run instantly."""

    max_retries: int = 4
    base_s: float = 0.5
    cap_s: float = 8.0
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random | None = None
    stop: Callable[[], bool] | None = None
    """True once the caller is stopping: a failure is not retried (the daemon must exit within its grace period)."""

    def delay(self, attempt: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait before retry ``attempt`` (0-based): uniform in [d/2, d], d = min(cap, base·2^attempt).

        The jitter spreads the retries of many agents (or many pods of one) hitting the same API server;
        a server's Retry-After is honoured, still capped.
        """
        ceiling = min(self.cap_s, self.base_s * (2**attempt))
        rng = self.rng or random
        delay = rng.uniform(ceiling / 2, ceiling)
        if retry_after_s is not None:
            delay = max(delay, min(self.cap_s, retry_after_s))
        return delay

    def call(self, fn: Callable[[], T], *, on_failure: Callable[[ApiFailure], None] | None = None) -> T:
        """Run ``fn``, retrying retryable failures; raise ``RetriesExhausted`` or ``FatalApiError``."""
        attempt = 0
        while True:
            try:
                return fn()
            except Exception as exc:
                failure = classify(exc)
                if failure is None:
                    raise
                if on_failure is not None:
                    on_failure(failure)
                if not failure.retryable:
                    raise FatalApiError(failure) from exc
                if attempt >= self.max_retries or (self.stop is not None and self.stop()):
                    raise RetriesExhausted(failure, attempt + 1) from exc
                self.sleep(self.delay(attempt, failure.retry_after_s))
                if self.stop is not None and self.stop():
                    raise RetriesExhausted(failure, attempt + 1) from exc
                attempt += 1


class FatalApiError(Exception):
    """A failure that retrying cannot fix (403, 404, 401, 4xx)."""

    def __init__(self, failure: ApiFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class RetriesExhausted(Exception):
    """A retryable failure that persisted through every retry."""

    def __init__(self, failure: ApiFailure, attempts: int) -> None:
        super().__init__(f"{failure.message} (after {attempts} attempts)")
        self.failure = failure
        self.attempts = attempts


# ---------------------------------------------------------------------------------------------- target


@dataclass(frozen=True)
class TargetRef:
    """The scale target as the API knows it."""

    kind: str
    """Settings kind: deployment, statefulset or flinkdeployment."""
    name: str
    namespace: str

    @property
    def api_version(self) -> str:
        """apiVersion of the object (for Event.regarding)."""
        return "flink.apache.org/v1beta1" if self.kind == "flinkdeployment" else "apps/v1"

    @property
    def object_kind(self) -> str:
        """Kind of the object (for Event.regarding)."""
        return {"deployment": "Deployment", "statefulset": "StatefulSet", "flinkdeployment": "FlinkDeployment"}[
            self.kind
        ]

    @property
    def resource(self) -> str:
        """The RBAC resource Perdix reads and writes: the scale subresource, or the custom resource."""
        return "flinkdeployments.flink.apache.org" if self.kind == "flinkdeployment" else f"{self.kind}s/scale (apps)"

    @property
    def field(self) -> str:
        """The field a rescale sets."""
        return "spec.job.parallelism" if self.kind == "flinkdeployment" else "spec.replicas"

    def describe(self) -> str:
        """kind/name in namespace, for messages."""
        return f"{self.object_kind}/{self.name} in namespace {self.namespace}"

    @classmethod
    def from_settings(cls, target: ScaleTargetSettings) -> TargetRef:
        """The reference of a Kubernetes scale target; a clear error for kinds that are not one."""
        if target.kind not in ("deployment", "statefulset", "flinkdeployment"):
            raise ValueError(
                f"scale_target.kind: {target.kind!r} is not a Kubernetes scale target "
                "(use deployment, statefulset or flinkdeployment)"
            )
        return cls(target.kind, target.name, target.namespace)


# ---------------------------------------------------------------------------------------------- events


class KubernetesEventSink:
    """EventSink writing events.k8s.io/v1 Events about the scale target; failures are logged, never raised."""

    def __init__(
        self,
        api: k8s.ApiClient,
        target: TargetRef,
        *,
        clock: Clock | None = None,
        reporting_instance: str | None = None,
        request_timeout_s: float = 10.0,
    ) -> None:
        self.events = k8s.EventsV1Api(api)
        self.target = target
        self.clock = clock or WallClock()
        self.instance = (reporting_instance or f"perdix-{socket.gethostname()}")[:128]
        self.request_timeout_s = request_timeout_s
        self.log = get_logger("perdix.events")
        self._seq = 0
        self._failing: str | None = None
        self.uid: str | None = None
        """UID of the scale target, set by the scaler once it has read the object."""

    def emit(self, *, reason: str, message: str, type_: str = "Normal") -> None:
        """Create one Event regarding the scale target (one attempt: Events are best effort)."""
        now = self.clock.now()
        self._seq += 1
        body = self._event(now, reason=reason, message=message, type_=type_)
        try:
            self.events.create_namespaced_event(self.target.namespace, body, _request_timeout=self.request_timeout_s)
        except Exception as exc:
            self._failed(reason, exc)
            return
        if self._failing is not None:
            self.log.info("event.recovered")
            self._failing = None

    def _event(self, now: float, *, reason: str, message: str, type_: str) -> k8s.EventsV1Event:
        """The events.k8s.io/v1 Event of this emit, regarding the scale target (with its UID once known)."""
        stamp = datetime.fromtimestamp(now, tz=UTC)
        if stamp.microsecond == 0:
            # The client serializes with isoformat(), which drops a zero fraction, and the API server
            # parses eventTime as RFC 3339 with exactly six fraction digits: keep the fraction non-zero.
            stamp = stamp.replace(microsecond=1)
        regarding: dict[str, str] = {
            "apiVersion": self.target.api_version,
            "kind": self.target.object_kind,
            "name": self.target.name,
            "namespace": self.target.namespace,
        }
        if self.uid:
            regarding["uid"] = self.uid
        body = k8s.EventsV1Event.from_dict(
            {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {
                    # Unique per emit: the object's name plus the time in ns and a sequence (like client-go).
                    "name": f"{self.target.name}.{int(now * 1e9):x}.{self._seq}",
                    "namespace": self.target.namespace,
                },
                "eventTime": stamp,
                "reportingController": REPORTING_CONTROLLER,
                "reportingInstance": self.instance,
                "action": _ACTIONS.get(reason, reason),
                "reason": reason,
                "type": type_,
                "note": message[:NOTE_LIMIT],
                "regarding": regarding,
            }
        )
        assert body is not None  # from_dict returns None only for None input
        return body

    def _failed(self, reason: str, exc: Exception) -> None:
        """Log a failed emit, once per change of the failure's kind (not once per event)."""
        failure = classify(exc)
        why = failure.kind if failure else type(exc).__name__
        if self._failing == why:
            return
        detail = failure.message if failure else str(exc)
        if failure is not None and failure.kind == "forbidden":
            detail += (
                " (the Role needs verb 'create' on events.k8s.io/events in namespace " + self.target.namespace + ")"
            )
        self.log.warning("event.failed", reason=reason, kind=why, error=detail)
        self._failing = why


_ACTIONS = {"Rescaled": "Rescale", "RescaleRecommended": "Recommend", "RescaleFailed": "Rescale"}


# ---------------------------------------------------------------------------------------------- scaler


_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_MEMORY_UNITS = {
    "": 1,
    "b": 1,
    "bytes": 1,
    "k": 2**10,
    "kb": 2**10,
    "ki": 2**10,
    "m": 2**20,
    "mb": 2**20,
    "mi": 2**20,
    "g": 2**30,
    "gb": 2**30,
    "gi": 2**30,
    "t": 2**40,
    "tb": 2**40,
    "ti": 2**40,
}


def memory_mb(value: object) -> float | None:
    """A FlinkDeployment's memory size in MB: Flink's syntax (``2048m``, ``2g``: binary units) or a Kubernetes
    quantity (``2Gi``); None when absent or unreadable."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        size = float(value)
    elif isinstance(value, str) and (match := _MEMORY.match(value)) and match.group(2).lower() in _MEMORY_UNITS:
        size = float(match.group(1)) * _MEMORY_UNITS[match.group(2).lower()]
    else:
        return None
    return size / 2**20 if 0 < size < 2**60 else None


class KubernetesScaler:
    """Scaler over a Deployment/StatefulSet scale subresource or a FlinkDeployment (see the module doc)."""

    def __init__(
        self,
        settings: ScaleTargetSettings,
        api: k8s.ApiClient,
        event_sink: EventSink | None = None,
        *,
        backoff: Backoff | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.target = TargetRef.from_settings(settings)
        self.settings = settings
        self.apps = k8s.AppsV1Api(api)
        self.custom = k8s.CustomObjectsApi(api)
        self.events = event_sink
        self.backoff = backoff or Backoff(max_retries=settings.max_retries)
        self.on_error = on_error
        self.log = get_logger("perdix.execute", target=self.target.describe())
        self._reported: set[str] = set()
        self._stopping = threading.Event()
        """Set by :meth:`interrupt`: failed requests are no longer retried."""

    def interrupt(self) -> None:
        """Stop retrying failed requests (the daemon is stopping): a round in a rescale ends with its current
        request instead of the retries' backoff, so the daemon exits within Kubernetes' grace period."""
        self._stopping.set()

    # ------------------------------------------------------------------ API calls

    def _timeout(self) -> float:
        return self.settings.request_timeout_s

    def _read(self) -> int:
        t = self.target
        if t.kind == "flinkdeployment":
            obj = self.custom.get_namespaced_custom_object(
                "flink.apache.org", "v1beta1", t.namespace, "flinkdeployments", t.name, _request_timeout=self._timeout()
            )
            if not isinstance(obj, dict):
                raise ScalerError(f"{t.describe()}: unexpected answer {type(obj).__name__}", kind="invalid_target")
            self._remember_uid((obj.get("metadata") or {}).get("uid"))
            try:
                return int(obj["spec"]["job"]["parallelism"])
            except (KeyError, TypeError, ValueError):
                raise ScalerError(
                    f"{t.describe()} has no integer spec.job.parallelism", kind="invalid_target"
                ) from None
        read = (
            self.apps.read_namespaced_deployment_scale
            if t.kind == "deployment"
            else self.apps.read_namespaced_stateful_set_scale
        )
        scale = read(t.name, t.namespace, _request_timeout=self._timeout())
        self._remember_uid(scale.metadata.uid if scale.metadata else None)
        replicas = scale.spec.replicas if scale.spec else None
        if replicas is None:
            raise ScalerError(f"{t.describe()}: scale has no spec.replicas", kind="invalid_target")
        return int(replicas)

    def _write(self, value: int) -> None:
        t = self.target
        if t.kind == "flinkdeployment":
            self.custom.patch_namespaced_custom_object(
                "flink.apache.org",
                "v1beta1",
                t.namespace,
                "flinkdeployments",
                t.name,
                {"spec": {"job": {"parallelism": value}}},
                _request_timeout=self._timeout(),
                _content_type=MERGE_PATCH,
            )
            return
        patch = (
            self.apps.patch_namespaced_deployment_scale
            if t.kind == "deployment"
            else self.apps.patch_namespaced_stateful_set_scale
        )
        patch(
            t.name,
            t.namespace,
            {"spec": {"replicas": value}},
            _request_timeout=self._timeout(),
            _content_type=MERGE_PATCH,
        )

    def _remember_uid(self, uid: str | None) -> None:
        if uid and isinstance(self.events, KubernetesEventSink):
            self.events.uid = uid

    def _count(self, failure: ApiFailure) -> None:
        if self.on_error is not None:
            self.on_error(failure.kind)

    def _missing(self, failure: ApiFailure, verb: str) -> str:
        """What is missing, in words an operator can act on."""
        t = self.target
        if failure.kind == "forbidden":
            return (
                f"forbidden: the service account may not '{verb}' {t.resource} named {t.name!r} in namespace "
                f"{t.namespace!r}; the Role needs verbs [get, patch] on it ({failure.message})"
            )
        if failure.kind == "not_found":
            return f"not found: {t.describe()} does not exist ({failure.message})"
        return f"{failure.kind}: {verb} {t.describe()} failed: {failure.message}"

    def _fatal(self, failure: ApiFailure, verb: str) -> ScalerError:
        """Report a non-retryable failure once (log line and Warning Event) and build the error to raise."""
        message = self._missing(failure, verb)
        key = f"{failure.kind}:{verb}"
        if key not in self._reported:
            self._reported.add(key)
            self.log.error("scale_target.unusable", kind=failure.kind, verb=verb, error=message)
            if self.events is not None:
                self.events.emit(reason="RescaleFailed", message=message, type_="Warning")
        return ScalerError(message, kind=failure.kind, retryable=False)

    def _call(self, fn: Callable[[], T], verb: str) -> T:
        try:
            return replace(self.backoff, stop=self._stopping.is_set).call(fn, on_failure=self._count)
        except FatalApiError as exc:
            raise self._fatal(exc.failure, verb) from None
        except RetriesExhausted as exc:
            raise ScalerError(
                f"{verb} {self.target.describe()}: {exc}", kind=exc.failure.kind, retryable=True
            ) from None

    # ------------------------------------------------------------------ the Scaler port

    def slot_resources(self) -> SlotResources | None:
        """CPU and TaskManager memory per slot of a FlinkDeployment (``spec.taskManager.resource`` over
        ``taskmanager.numberOfTaskSlots``), for the quotas; None for a Deployment or StatefulSet, whose slots per
        TaskManager live in a Flink configuration Perdix does not read. ScalerError when it cannot be read."""
        t = self.target
        if t.kind != "flinkdeployment":
            return None

        def read() -> object:
            return self.custom.get_namespaced_custom_object(
                "flink.apache.org", "v1beta1", t.namespace, "flinkdeployments", t.name, _request_timeout=self._timeout()
            )

        try:  # tried once, within the request timeout: the round must not wait on retries for a bound
            answer = read()
        except Exception as exc:
            raise ScalerError(f"{t.describe()}: its resources cannot be read: {exc}", kind="unreadable") from None
        spec = (answer if isinstance(answer, dict) else {}).get("spec") or {}
        resource = (spec.get("taskManager") or {}).get("resource") or {}
        try:
            slots = int((spec.get("flinkConfiguration") or {}).get("taskmanager.numberOfTaskSlots", 1))
        except (TypeError, ValueError):
            raise ScalerError(
                f"{t.describe()}: taskmanager.numberOfTaskSlots is not a whole number", kind="invalid_target"
            ) from None
        if slots < 1:
            raise ScalerError(f"{t.describe()}: taskmanager.numberOfTaskSlots below 1", kind="invalid_target")
        cpu = resource.get("cpu")
        cpu_per_slot = float(cpu) / slots if isinstance(cpu, (int, float)) and 0 < cpu < 1e6 else None
        memory = memory_mb(resource.get("memory"))
        memory_per_slot = memory / slots if memory is not None else None
        if cpu_per_slot is None and memory_per_slot is None:
            return None
        return SlotResources(cpu=cpu_per_slot, memory_mb=memory_per_slot)

    @property
    def api_host(self) -> str:
        """The address of the API server this scaler talks to."""
        return str(self.apps.api_client.configuration.host)

    def probe(self) -> ApiFailure | None:
        """Read the target once, without retries (the daemon's start-up check): None when it answered, else the
        failure. A missing permission or object is reported once (log line and Warning Event), as a rescale
        would report it: the operator may fix it while the agent runs. Unauthorized is left to the caller."""
        try:
            Backoff(max_retries=0).call(self._read)
        except RetriesExhausted as exc:
            return exc.failure
        except FatalApiError as exc:
            if exc.failure.kind != "unauthorized":
                self._fatal(exc.failure, "get")
            return exc.failure
        return None

    def parallelism_now(self) -> int | None:
        """The target's scale-out now, read once without retries (the round's cross-check); None if unread."""
        try:
            return Backoff(max_retries=0).call(self._read, on_failure=self._count)
        except (FatalApiError, RetriesExhausted, ScalerError):
            return None

    def current_parallelism(self) -> int | None:
        """The target's ``spec.replicas`` (or ``spec.job.parallelism``) now; None if it cannot be read."""
        try:
            value = self._call(self._read, "get")
        except ScalerError as exc:
            if exc.retryable:
                self.log.warning("scale_target.read_failed", kind=exc.kind, error=str(exc))
            return None
        self._reported.discard("forbidden:get")
        self._reported.discard("not_found:get")
        return value

    def rescale(self, target: int, *, reasons: tuple[str, ...], dry_run: bool) -> RescaleResult:
        """Set the target to ``target`` and read it back; in dry-run only leave a RescaleRecommended Event."""
        if target < 0:
            raise ScalerError(f"refusing to scale {self.target.describe()} to {target}", kind="invalid_request")
        why = reasons[-1] if reasons else "no reason given"
        if dry_run:
            current = self.current_parallelism()  # a read only: dry-run never writes the scale target
            if self.settings.recommendation_events and self.events is not None:
                self.events.emit(
                    reason="RescaleRecommended",
                    message=f"dry-run: would set {self.target.field} of {self.target.describe()} "
                    f"from {current if current is not None else '?'} to {target}: {why}",
                )
            return RescaleResult(requested=target, confirmed=current, dry_run=True)

        before = self._call(self._read, "get")
        try:
            self._call(lambda: self._write(target), "patch")
        except ScalerError as exc:
            if not exc.retryable:
                raise
            # A timed-out write may still have landed: only a read-back tells. If it did, it counts.
            landed = self.current_parallelism()
            if landed != target:
                self.log.error("rescale.write_failed", kind=exc.kind, error=str(exc), target=target, read_back=landed)
                raise
        self._reported.discard("forbidden:patch")
        self._reported.discard("not_found:patch")
        confirmed = self.current_parallelism()
        if self.events is not None:
            if confirmed == target:
                self.events.emit(
                    reason="Rescaled",
                    message=f"set {self.target.field} of {self.target.describe()} from {before} to {target}: {why}",
                )
            else:
                self.events.emit(
                    reason="RescaleFailed",
                    type_="Warning",
                    message=f"requested {self.target.field}={target} on {self.target.describe()}, "
                    f"read back {confirmed if confirmed is not None else 'nothing'}",
                )
        return RescaleResult(requested=target, confirmed=confirmed, dry_run=False)
