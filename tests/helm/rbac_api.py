"""A loopback Kubernetes API that authorizes every request against one rendered Role (test fake).

It answers the few endpoints Perdix's adapters use (scale subresources, FlinkDeployments, Events,
ConfigMaps), holds the objects the chart rendered, and applies Kubernetes RBAC semantics to each
request: the request's verb, API group, resource (with subresource), name and namespace must match a
rule of the Role, and a rule with resourceNames never matches a request without a name (`create`).
Everything it saw is in ``requests``, with the RBAC attributes and whether it was allowed.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True)
class Request:
    """One request with its RBAC attributes."""

    method: str
    path: str
    verb: str
    group: str
    resource: str  # "resource" or "resource/subresource"
    name: str
    namespace: str
    allowed: bool


def attributes(method: str, path: str) -> tuple[str, str, str, str, str]:
    """(verb, group, resource, name, namespace) of a namespaced API request path."""
    parts = [part for part in path.split("?")[0].split("/") if part]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"]:
        group, rest = parts[1], parts[3:]
    else:
        raise ValueError(f"not a resource path: {path}")
    if len(rest) < 2 or rest[0] != "namespaces":
        raise ValueError(f"not a namespaced path: {path}")
    namespace, rest = rest[1], rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    verb = VERBS[method]
    if verb == "get" and not name:
        verb = "list"
    return verb, group, resource, name, namespace


def allows(role: dict[str, Any], verb: str, group: str, resource: str, name: str, namespace: str) -> bool:
    """Whether the Role grants the request (Kubernetes RBAC rule matching, no wildcards needed)."""
    if namespace != role["metadata"]["namespace"]:
        return False
    for rule in role["rules"]:
        names = rule.get("resourceNames") or []
        if (
            group in rule["apiGroups"]
            and resource in rule["resources"]
            and verb in rule["verbs"]
            and (not names or (name and name in names))
        ):
            return True
    return False


class RbacAPI:
    """The fake API server; ``objects`` maps (group, resource, namespace, name) to the stored object."""

    def __init__(self, role: dict[str, Any]) -> None:
        self.role = role
        self.objects: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.requests: list[Request] = []
        self._version = 100
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> RbacAPI:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()

    def put(self, group: str, resource: str, obj: dict[str, Any]) -> None:
        """Store an object as the chart (or the operator) created it."""
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{meta['name']}")
        meta["resourceVersion"] = self._next_version()
        self.objects[(group, resource, meta["namespace"], meta["name"])] = obj

    def denied(self) -> list[Request]:
        """Requests the Role did not allow."""
        return [request for request in self.requests if not request.allowed]

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    # ------------------------------------------------------------------ HTTP

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet test server
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _status(self, code: int, reason: str, message: str) -> None:
                self._send(
                    code,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "reason": reason,
                        "message": message,
                        "code": code,
                    },
                )

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                try:
                    verb, group, resource, name, namespace = attributes(self.command, self.path)
                except (ValueError, KeyError) as exc:
                    self._status(404, "NotFound", str(exc))
                    return
                allowed = allows(api.role, verb, group, resource, name, namespace)
                with api._lock:
                    api.requests.append(
                        Request(self.command, self.path, verb, group, resource, name, namespace, allowed)
                    )
                if not allowed:
                    what = f"{resource} {name!r}" if name else resource
                    self._status(
                        403,
                        "Forbidden",
                        f'{what} is forbidden: cannot {verb} resource "{resource}" '
                        f'in API group "{group}" in the namespace "{namespace}"',
                    )
                    return
                with api._lock:
                    api._serve(self, verb, group, resource, name, namespace, body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        return Handler

    def _serve(self, http: Any, verb: str, group: str, resource: str, name: str, namespace: str, body: Any) -> None:
        base, _, sub = resource.partition("/")
        if base == "events" and verb == "create":
            body.setdefault("metadata", {})["resourceVersion"] = self._next_version()
            self.events.append(body)
            http._send(201, body)
            return
        if base == "configmaps" and verb == "create":
            key = (group, base, namespace, body["metadata"]["name"])
            if key in self.objects:
                http._status(409, "AlreadyExists", "configmap exists")
                return
            self.put(group, base, body)
            http._send(201, body)
            return
        obj = self.objects.get((group, base, namespace, name))
        if obj is None:
            http._status(404, "NotFound", f"{resource} {name!r} not found")
            return
        if verb == "update":
            if body["metadata"].get("resourceVersion") != obj["metadata"]["resourceVersion"]:
                http._status(409, "Conflict", "the object has been modified")
                return
            body["metadata"]["uid"] = obj["metadata"]["uid"]
            self.put(group, base, body)
            obj = body
        elif verb == "patch":
            if sub == "scale":
                obj["spec"]["replicas"] = body["spec"]["replicas"]
            else:
                merge_patch(obj, body)
            obj["metadata"]["resourceVersion"] = self._next_version()
        elif verb != "get":
            http._status(405, "MethodNotAllowed", verb)
            return
        http._send(200, scale_of(obj) if sub == "scale" else obj)


def merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """RFC 7386 JSON merge patch, in place."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = value


def scale_of(obj: dict[str, Any]) -> dict[str, Any]:
    """The autoscaling/v1 Scale view of a Deployment or StatefulSet."""
    meta = obj["metadata"]
    return {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion")},
        "spec": {"replicas": obj["spec"]["replicas"]},
        "status": {"replicas": obj["spec"]["replicas"]},
    }
