"""A loopback HTTP fake of the few Kubernetes API endpoints Perdix uses, for the real ``kubernetes`` client.

It speaks apps/v1 Deployment and StatefulSet ``scale`` subresources, flink.apache.org/v1beta1
FlinkDeployments (get/patch), events.k8s.io/v1 Events and core/v1 ConfigMaps with resourceVersion
conflicts. Every request is recorded (method, path, body, status) so tests assert on the wire, and
faults (any status, Retry-After, a slow answer) can be injected per method and path.
Lives in tests/ only: the product never talks to a fake.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

WORKLOADS = {"deployments": "Deployment", "statefulsets": "StatefulSet"}

_SCALE = re.compile(r"^/apis/apps/v1/namespaces/([^/]+)/(deployments|statefulsets)/([^/]+)/scale$")
_WORKLOAD = re.compile(r"^/apis/apps/v1/namespaces/([^/]+)/(deployments|statefulsets)/([^/]+)$")
_FLINK = re.compile(r"^/apis/flink\.apache\.org/v1beta1/namespaces/([^/]+)/flinkdeployments/([^/]+)$")
_EVENTS = re.compile(r"^/apis/events\.k8s\.io/v1/namespaces/([^/]+)/events$")
_CONFIGMAPS = re.compile(r"^/api/v1/namespaces/([^/]+)/configmaps$")
_CONFIGMAP = re.compile(r"^/api/v1/namespaces/([^/]+)/configmaps/([^/]+)$")
_MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")


@dataclass
class Request:
    """One request as the fake saw it, with the status it answered."""

    method: str
    path: str
    query: str
    content_type: str | None
    body: Any
    status: int = 0

    @property
    def is_write(self) -> bool:
        """True for anything but a read."""
        return self.method not in ("GET", "HEAD")


@dataclass
class Fault:
    """An injected answer: for requests matching method and path substring, ``times`` times (None: forever)."""

    method: str | None
    path_contains: str
    status: int | None = None
    delay_s: float = 0.0
    retry_after: int | None = None
    times: int | None = 1
    apply: bool = False
    """Apply the request anyway before answering ``status`` (a gateway timeout after the write landed)."""
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        """True if this fault applies to the request and is not used up."""
        if self.times is not None and self.hits >= self.times:
            return False
        return (self.method is None or self.method == method) and self.path_contains in path


@dataclass
class _State:
    resource_version: int = 100
    workloads: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    flinkdeployments: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    configmaps: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    frozen: set[str] = field(default_factory=set)


class FakeKubeAPI:
    """The fake API server; use as a context manager or call start()/stop()."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.faults: list[Fault] = []
        self._state = _State()
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeKubeAPI:
        """Listen on a free loopback port in a background thread."""
        fake = self

        class Handler(_Handler):
            api = fake

        server = self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._thread = threading.Thread(
            target=lambda: server.serve_forever(poll_interval=0.05), name="fake-kube-api", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeKubeAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL of the fake."""
        assert self._server is not None, "fake API not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def write_kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        """A kubeconfig whose only context points at this fake (plain HTTP, a static token)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "perdix", "user": {"token": "fake-token"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "perdix", "namespace": namespace}}],
            "current-context": "fake",
        }
        path.write_text(json.dumps(config))
        return path

    # ------------------------------------------------------------------ objects

    def _next_version(self) -> str:
        self._state.resource_version += 1
        return str(self._state.resource_version)

    def add_workload(self, kind: str, name: str, replicas: int, namespace: str = "default") -> None:
        """Create a Deployment (kind ``deployments``) or StatefulSet (``statefulsets``)."""
        if kind not in WORKLOADS:
            raise ValueError(f"unknown workload kind {kind!r}")
        with self._lock:
            self._state.workloads[(namespace, kind, name)] = {
                "uid": str(uuid.uuid4()),
                "replicas": int(replicas),
                "resourceVersion": self._next_version(),
            }

    def replicas(self, kind: str, name: str, namespace: str = "default") -> int:
        """The workload's spec.replicas now."""
        with self._lock:
            return int(self._state.workloads[(namespace, kind, name)]["replicas"])

    def set_replicas(self, kind: str, name: str, replicas: int, namespace: str = "default") -> None:
        """Someone else scales the workload (not recorded as a request)."""
        with self._lock:
            obj = self._state.workloads[(namespace, kind, name)]
            obj["replicas"] = int(replicas)
            obj["resourceVersion"] = self._next_version()

    def add_flinkdeployment(self, name: str, parallelism: int, namespace: str = "default") -> None:
        """Create a FlinkDeployment with spec.job.parallelism."""
        with self._lock:
            self._state.flinkdeployments[(namespace, name)] = {
                "apiVersion": "flink.apache.org/v1beta1",
                "kind": "FlinkDeployment",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "uid": str(uuid.uuid4()),
                    "resourceVersion": self._next_version(),
                },
                "spec": {
                    "flinkVersion": "v1_18",
                    "job": {
                        "jarURI": "local:///opt/flink/job.jar",
                        "parallelism": int(parallelism),
                        "upgradeMode": "savepoint",
                    },
                    "taskManager": {"resource": {"cpu": 1, "memory": "2048m"}},
                },
                "status": {"jobStatus": {"state": "RUNNING"}},
            }

    def update_flinkdeployment_spec(self, name: str, spec: dict[str, Any], namespace: str = "default") -> None:
        """Merge ``spec`` into a FlinkDeployment's spec (top-level keys replaced), as an operator's edit would."""
        with self._lock:
            self._state.flinkdeployments[(namespace, name)]["spec"].update(copy.deepcopy(spec))

    def flinkdeployment(self, name: str, namespace: str = "default") -> dict[str, Any]:
        """A copy of the stored FlinkDeployment."""
        with self._lock:
            return copy.deepcopy(self._state.flinkdeployments[(namespace, name)])

    def freeze(self, path_contains: str) -> None:
        """Writes to matching scale targets answer 200 but change nothing (a target that ignores us)."""
        with self._lock:
            self._state.frozen.add(path_contains)

    def add_configmap(self, name: str, data: dict[str, str] | None = None, namespace: str = "default") -> None:
        """Create a ConfigMap."""
        with self._lock:
            self._state.configmaps[(namespace, name)] = self._configmap(namespace, name, data or {})

    def _configmap(self, namespace: str, name: str, data: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": str(uuid.uuid4()),
                "resourceVersion": self._next_version(),
            },
            "data": dict(data),
        }

    def configmap(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        """A copy of the stored ConfigMap, or None."""
        with self._lock:
            cm = self._state.configmaps.get((namespace, name))
            return copy.deepcopy(cm) if cm is not None else None

    def touch_configmap(self, name: str, key: str, value: str, namespace: str = "default") -> None:
        """Another writer changes the ConfigMap (bumps its resourceVersion)."""
        with self._lock:
            cm = self._state.configmaps[(namespace, name)]
            cm["data"][key] = value
            cm["metadata"]["resourceVersion"] = self._next_version()

    @property
    def events(self) -> list[dict[str, Any]]:
        """Events created so far, oldest first."""
        with self._lock:
            return copy.deepcopy(self._state.events)

    # ------------------------------------------------------------------ faults and log

    def inject(
        self,
        path_contains: str,
        *,
        method: str | None = None,
        status: int | None = None,
        delay_s: float = 0.0,
        retry_after: int | None = None,
        times: int | None = 1,
        apply: bool = False,
    ) -> Fault:
        """Answer the next ``times`` matching requests with ``status`` (after ``delay_s``); None status: only delay."""
        fault = Fault(method, path_contains, status, delay_s, retry_after, times, apply)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        """Forget every injected fault."""
        with self._lock:
            self.faults.clear()

    def log(self, *, method: str | None = None, path_contains: str = "") -> list[Request]:
        """Recorded requests, optionally filtered."""
        with self._lock:
            return [r for r in self.requests if (method is None or r.method == method) and path_contains in r.path]

    def scale_target_writes(self) -> list[Request]:
        """Every write that reached a scale target (scale subresource, workload or FlinkDeployment)."""
        return [
            r
            for r in self.log()
            if r.is_write and (_SCALE.match(r.path) or _WORKLOAD.match(r.path) or _FLINK.match(r.path))
        ]

    def summary(self) -> dict[str, int]:
        """Count of requests by 'METHOD path -> status', for reports."""
        counts: dict[str, int] = {}
        for r in self.log():
            key = f"{r.method} {r.path} -> {r.status}"
            counts[key] = counts.get(key, 0) + 1
        return counts

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(method, path):
                    fault.hits += 1
                    return fault
        return None

    # ------------------------------------------------------------------ dispatch

    def handle(
        self, method: str, path: str, content_type: str | None, body: Any
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        """Answer one request: (status, JSON body, extra headers)."""
        with self._lock:
            if m := _SCALE.match(path):
                return self._scale(method, m[1], m[2], m[3], content_type, body)
            if m := _WORKLOAD.match(path):
                return self._workload(method, m[1], m[2], m[3])
            if m := _FLINK.match(path):
                return self._flink(method, m[1], m[2], content_type, body)
            if m := _EVENTS.match(path):
                return self._events(method, m.group(1), body)
            if m := _CONFIGMAPS.match(path):
                return self._configmaps(method, m.group(1), body)
            if m := _CONFIGMAP.match(path):
                return self._configmap_one(method, m[1], m[2], body)
        return _status(404, "NotFound", f"the server could not find the requested resource ({path})")

    def _frozen(self, path: str) -> bool:
        return any(part in path for part in self._state.frozen)

    def _scale(
        self, method: str, ns: str, kind: str, name: str, content_type: str | None, body: Any
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        obj = self._state.workloads.get((ns, kind, name))
        if obj is None:
            return _status(404, "NotFound", f'{kind}.apps "{name}" not found')
        if method == "PATCH":
            try:
                patched = _apply_patch(self._scale_doc(ns, kind, name, obj), content_type, body)
                replicas = int(patched["spec"]["replicas"])
            except (KeyError, TypeError, ValueError) as exc:
                return _status(422, "Invalid", f"invalid scale patch: {exc}")
            if replicas < 0:
                return _status(422, "Invalid", "spec.replicas: must be non-negative")
            if not self._frozen(f"/{kind}/{name}/scale"):
                obj["replicas"] = replicas
                obj["resourceVersion"] = self._next_version()
        elif method == "PUT":
            if not isinstance(body, dict):
                return _status(400, "BadRequest", "body must be a Scale object")
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if rv and rv != obj["resourceVersion"]:
                return _status(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {kind}.apps "{name}": the object has been modified',
                )
            obj["replicas"] = int(body["spec"]["replicas"])
            obj["resourceVersion"] = self._next_version()
        elif method != "GET":
            return _status(405, "MethodNotAllowed", f"{method} not allowed on scale")
        return 200, self._scale_doc(ns, kind, name, obj), {}

    @staticmethod
    def _scale_doc(ns: str, kind: str, name: str, obj: dict[str, Any]) -> dict[str, Any]:
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {"name": name, "namespace": ns, "uid": obj["uid"], "resourceVersion": obj["resourceVersion"]},
            "spec": {"replicas": obj["replicas"]},
            "status": {"replicas": obj["replicas"], "selector": f"app={name}"},
        }

    def _workload(self, method: str, ns: str, kind: str, name: str) -> tuple[int, dict[str, Any], dict[str, str]]:
        obj = self._state.workloads.get((ns, kind, name))
        if obj is None:
            return _status(404, "NotFound", f'{kind}.apps "{name}" not found')
        if method != "GET":
            return _status(405, "MethodNotAllowed", "only GET is served for workloads; scale through /scale")
        return (
            200,
            {
                "kind": WORKLOADS[kind],
                "apiVersion": "apps/v1",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "uid": obj["uid"],
                    "resourceVersion": obj["resourceVersion"],
                },
                "spec": {"replicas": obj["replicas"]},
                "status": {"replicas": obj["replicas"]},
            },
            {},
        )

    def _flink(
        self, method: str, ns: str, name: str, content_type: str | None, body: Any
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        obj = self._state.flinkdeployments.get((ns, name))
        if obj is None:
            return _status(404, "NotFound", f'flinkdeployments.flink.apache.org "{name}" not found')
        if method == "PATCH":
            if content_type not in ("application/merge-patch+json", "application/json-patch+json"):
                # Custom resources do not support strategic merge patch.
                return _status(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: "
                    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml "
                    f"(got {content_type})",
                )
            try:
                patched = _apply_patch(obj, content_type, body)
                int(patched["spec"]["job"]["parallelism"])
            except (KeyError, TypeError, ValueError) as exc:
                return _status(422, "Invalid", f"invalid FlinkDeployment patch: {exc}")
            if not self._frozen(f"/flinkdeployments/{name}"):
                patched["metadata"]["resourceVersion"] = self._next_version()
                self._state.flinkdeployments[(ns, name)] = patched
                obj = patched
        elif method != "GET":
            return _status(405, "MethodNotAllowed", f"{method} not served for flinkdeployments")
        return 200, copy.deepcopy(obj), {}

    def _events(self, method: str, ns: str, body: Any) -> tuple[int, dict[str, Any], dict[str, str]]:
        if method == "GET":
            return (
                200,
                {
                    "kind": "EventList",
                    "apiVersion": "events.k8s.io/v1",
                    "items": [e for e in self._state.events if e["metadata"]["namespace"] == ns],
                },
                {},
            )
        if method != "POST":
            return _status(405, "MethodNotAllowed", f"{method} not served for events")
        problems = _event_problems(body)
        if problems:
            return _status(422, "Invalid", "Event is invalid: " + "; ".join(problems))
        event = copy.deepcopy(body)
        meta = event.setdefault("metadata", {})
        meta.setdefault("namespace", ns)
        if meta["namespace"] != ns:
            return _status(400, "BadRequest", "the namespace of the object does not match the namespace on the request")
        if any(e["metadata"]["name"] == meta["name"] and e["metadata"]["namespace"] == ns for e in self._state.events):
            return _status(409, "AlreadyExists", f'events.events.k8s.io "{meta["name"]}" already exists')
        meta["uid"] = str(uuid.uuid4())
        meta["resourceVersion"] = self._next_version()
        self._state.events.append(event)
        return 201, event, {}

    def _configmaps(self, method: str, ns: str, body: Any) -> tuple[int, dict[str, Any], dict[str, str]]:
        if method != "POST":
            return _status(405, "MethodNotAllowed", f"{method} not served for the configmap collection")
        name = ((body or {}).get("metadata") or {}).get("name")
        if not name:
            return _status(422, "Invalid", "metadata.name: Required value")
        if (ns, name) in self._state.configmaps:
            return _status(409, "AlreadyExists", f'configmaps "{name}" already exists')
        cm = self._configmap(ns, name, body.get("data") or {})
        self._state.configmaps[(ns, name)] = cm
        return 201, copy.deepcopy(cm), {}

    def _configmap_one(self, method: str, ns: str, name: str, body: Any) -> tuple[int, dict[str, Any], dict[str, str]]:
        cm = self._state.configmaps.get((ns, name))
        if cm is None:
            return _status(404, "NotFound", f'configmaps "{name}" not found')
        if method == "GET":
            return 200, copy.deepcopy(cm), {}
        if method != "PUT":
            return _status(405, "MethodNotAllowed", f"{method} not served for configmaps here")
        rv = ((body or {}).get("metadata") or {}).get("resourceVersion")
        if not rv:
            return _status(422, "Invalid", "metadata.resourceVersion: must be specified for an update")
        if rv != cm["metadata"]["resourceVersion"]:
            return _status(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on configmaps "{name}": the object has been modified; '
                "please apply your changes to the latest version and try again",
            )
        data = body.get("data") or {}
        size = sum(len(k) + len(v) for k, v in data.items())
        if size > 1024 * 1024:
            return _status(422, "Invalid", f"data: Too long: must have at most 1048576 bytes (got {size})")
        cm["data"] = dict(data)
        cm["metadata"]["resourceVersion"] = self._next_version()
        return 200, copy.deepcopy(cm), {}


def _status(code: int, reason: str, message: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    return (
        code,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        },
        {},
    )


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (strategic merge is the same for the fields used here)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def _apply_patch(doc: dict[str, Any], content_type: str | None, body: Any) -> dict[str, Any]:
    if content_type == "application/json-patch+json":
        if not isinstance(body, list):
            raise ValueError("a JSON patch must be a list of operations")
        out = copy.deepcopy(doc)
        for op in body:
            parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
            node = out
            for part in parts[:-1]:
                node = node[part]
            if op["op"] in ("replace", "add"):
                node[parts[-1]] = op["value"]
            elif op["op"] == "remove":
                del node[parts[-1]]
            else:
                raise ValueError(f"unsupported JSON patch op {op['op']!r}")
        return out
    if content_type in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
        if not isinstance(body, dict):
            raise ValueError("a merge patch must be an object")
        return _merge(doc, body)
    raise ValueError(f"unsupported patch content type {content_type!r}")


def _event_problems(body: Any) -> list[str]:
    """The validation events.k8s.io/v1 does on the fields Perdix sets."""
    if not isinstance(body, dict):
        return ["body must be an object"]
    problems = []
    meta = body.get("metadata") or {}
    if not meta.get("name"):
        problems.append("metadata.name: Required value")
    if not _MICRO_TIME.match(str(body.get("eventTime", ""))):
        problems.append(f"eventTime: Required value (RFC 3339 with microseconds, got {body.get('eventTime')!r})")
    for key in ("reportingController", "reportingInstance", "action", "reason"):
        if not body.get(key):
            problems.append(f"{key}: Required value")
    if body.get("type") not in ("Normal", "Warning"):
        problems.append(f"type: Unsupported value: {body.get('type')!r}")
    regarding = body.get("regarding") or {}
    for key in ("kind", "name", "apiVersion"):
        if not regarding.get(key):
            problems.append(f"regarding.{key}: Required value")
    if len(str(body.get("note", ""))) > 1024:
        problems.append("note: Too long: must have at most 1024 bytes")
    return problems


class _Handler(BaseHTTPRequestHandler):
    api: FakeKubeAPI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        return None

    def _serve(self) -> None:
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip() or None
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode(errors="replace")
        record = Request(self.command, split.path, split.query, content_type, body)
        with self.api._lock:
            self.api.requests.append(record)
        fault = self.api._take_fault(self.command, split.path)
        headers: dict[str, str] = {}
        if fault is not None and fault.delay_s:
            time.sleep(fault.delay_s)  # a slow API server is the point of this fault
        if fault is not None and fault.status is not None:
            if fault.apply:
                self.api.handle(self.command, split.path, content_type, body)
            reasons = {
                403: "Forbidden",
                404: "NotFound",
                409: "Conflict",
                429: "TooManyRequests",
                500: "InternalError",
                503: "ServiceUnavailable",
                504: "Timeout",
            }
            status, payload, _ = _status(fault.status, reasons.get(fault.status, "Unknown"), f"injected {fault.status}")
            if fault.retry_after is not None:
                headers["Retry-After"] = str(fault.retry_after)
        else:
            status, payload, headers = self.api.handle(self.command, split.path, content_type, body)
        record.status = status
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


@contextmanager
def running_fake() -> Iterator[FakeKubeAPI]:
    """A started fake, stopped on exit."""
    fake = FakeKubeAPI().start()
    try:
        yield fake
    finally:
        fake.stop()
