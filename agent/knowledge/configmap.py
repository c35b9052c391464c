"""Knowledge in a Kubernetes ConfigMap: the same versioned document as the file store, one key.

Writes are read-modify-write with the ConfigMap's ``resourceVersion`` (optimistic concurrency): the
PUT carries the version last read, and the API server refuses it with 409 when anyone changed the
ConfigMap since. Perdix then re-reads and writes again (capped backoff with jitter), keeping every
other key, so a concurrent writer's keys and moved-aside documents survive. The Role needs only
``get, update`` on this one ConfigMap (the chart creates it empty).

A document that cannot be read (corrupt JSON, wrong shape, a newer schema version) is copied to a
``knowledge.bad-N.json`` key of the same ConfigMap and removed from the main key in one write; it is
never deleted, and the agent starts fresh.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from agent.execute.kubernetes import ApiFailure, Backoff, FatalApiError, RetriesExhausted
from agent.json_types import JsonObject
from agent.knowledge.document import (
    KnowledgeError,
    KnowledgeTooLarge,
    KnowledgeUnrecoverable,
    encode_document,
    parse_document,
)
from agent.logging import get_logger

KEY = "knowledge.json"
"""The ConfigMap key holding the document."""
MAX_BYTES = 1024 * 1024
"""The API server's limit on a ConfigMap's data: every key and value together."""

T = TypeVar("T")


class KnowledgeStoreError(Exception):
    """The ConfigMap could not be read or written; the message names the ConfigMap and the reason."""


class ConfigMapKnowledgeStore:
    """KnowledgeStore in one key of a ConfigMap, with resourceVersion optimistic concurrency."""

    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        name: str,
        namespace: str,
        backoff: Backoff | None = None,
        request_timeout_s: float = 10.0,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.core = k8s.CoreV1Api(api)
        self.name = name
        self.namespace = namespace
        self.backoff = backoff or Backoff()
        self.request_timeout_s = request_timeout_s
        self.on_error = on_error
        self.log = get_logger("perdix.knowledge", configmap=f"{namespace}/{name}")
        self._configmap: k8s.V1ConfigMap | None = None
        self._stale = True
        self._loaded = False
        """True once load() saw the stored document (or its absence); until then a save keeps a copy of it."""

    def _where(self) -> str:
        return f"ConfigMap {self.namespace}/{self.name}"

    def _count(self, failure: ApiFailure) -> None:
        if self.on_error is not None:
            self.on_error(failure.kind)

    def _call(self, fn: Callable[[], T], verb: str) -> T:
        try:
            return self.backoff.call(fn, on_failure=self._count)
        except FatalApiError as exc:
            hint = ""
            if exc.failure.kind == "forbidden":
                hint = f" (the Role needs verb '{verb}' on configmaps named {self.name!r})"
            raise KnowledgeStoreError(f"{self._where()}: {verb}: {exc.failure.message}{hint}") from None
        except RetriesExhausted as exc:
            raise KnowledgeStoreError(f"{self._where()}: {verb}: {exc}") from None

    def _read(self) -> k8s.V1ConfigMap | None:
        """The ConfigMap now, or None if it does not exist."""

        def get() -> k8s.V1ConfigMap | None:
            try:
                return self.core.read_namespaced_config_map(
                    self.name, self.namespace, _request_timeout=self.request_timeout_s
                )
            except ApiException as exc:
                if exc.status == 404:
                    return None
                raise

        configmap = self._call(get, "get")
        self._configmap = configmap
        self._stale = False
        return configmap

    def load(self) -> JsonObject | None:
        """The stored document, or None for a fresh start (absent, or unusable and moved aside)."""
        configmap = self._read()
        self._loaded = True
        if configmap is None:
            return None
        raw = (configmap.data or {}).get(KEY)
        if raw is None or not raw.strip():
            return None
        try:
            return parse_document(raw)
        except KnowledgeError as exc:
            aside = self._move_aside_or_stop(raw, str(exc))
            self.log.warning("knowledge.unusable", reason=str(exc), moved_to=aside)
            return None

    def set_aside(self, reason: str) -> str | None:
        """Move the stored document (it parsed but the agent could not use it) to a bad-N key; the key, or None."""
        configmap = self._read()
        raw = (configmap.data or {}).get(KEY) if configmap is not None else None
        if raw is None or not raw.strip():
            return None
        aside = self._move_aside_or_stop(raw, reason)
        self.log.warning("knowledge.unusable", reason=reason, moved_to=aside)
        return aside

    def _move_aside_or_stop(self, raw: str, reason: str) -> str:
        """:meth:`_move_aside`, or KnowledgeUnrecoverable naming the ConfigMap when the document cannot be moved."""
        try:
            return self._move_aside(raw)
        except KnowledgeStoreError as exc:
            raise KnowledgeUnrecoverable(f"{exc} (its document cannot be used: {reason}); move or remove it") from None

    def _free_key(self, data: dict[str, str], prefix: str) -> str:
        for attempt in range(1000):
            key = f"{prefix}-{attempt}.json"
            if key not in data:
                return key
        raise KnowledgeStoreError(f"{self._where()}: too many moved-aside documents in it")

    def _move_aside(self, raw: str) -> str:
        """Copy the main key to a free bad-N key and drop the main key, in one conditional write."""
        moved_to: list[str] = []

        def write() -> None:
            if self._stale or self._configmap is None:
                self._read()
            configmap = self._configmap
            assert configmap is not None
            data = dict(configmap.data or {})
            current = data.pop(KEY, None)
            key = self._free_key(data, "knowledge.bad")
            data[key] = current if current is not None else raw
            self._replace(configmap, data)
            moved_to[:] = [key]

        self._call(write, "update")
        return moved_to[0]

    def _replace(self, configmap: k8s.V1ConfigMap, data: dict[str, str]) -> None:
        """PUT the ConfigMap with ``data`` at the resourceVersion last read (409 if it moved on)."""
        body = k8s.V1ConfigMap(
            api_version="v1",
            kind="ConfigMap",
            metadata=k8s.V1ObjectMeta(
                name=self.name,
                namespace=self.namespace,
                resource_version=configmap.metadata.resource_version if configmap.metadata else None,
                labels=configmap.metadata.labels if configmap.metadata else None,
                annotations=configmap.metadata.annotations if configmap.metadata else None,
            ),
            data=data,
            binary_data=configmap.binary_data,
        )
        try:
            self._configmap = self.core.replace_namespaced_config_map(
                self.name, self.namespace, body, _request_timeout=self.request_timeout_s
            )
        except ApiException as exc:
            if exc.status == 409:
                # Someone wrote since our read: re-read before the retry, keep their keys, write ours.
                self._stale = True
                self.log.warning("knowledge.conflict", detail="ConfigMap changed since it was read; re-reading")
            raise

    def _too_large(self, size: int, reason: str) -> KnowledgeTooLarge:
        return KnowledgeTooLarge(
            f"{self._where()}: {reason} {size} bytes, over the {MAX_BYTES} byte ConfigMap limit; "
            "the last document written stays",
            size_bytes=size,
            limit_bytes=MAX_BYTES,
        )

    def save(self, document: JsonObject) -> None:
        """Write the document to the main key, keeping every other key; retried on conflicts.

        A write the API server would refuse for size raises :class:`KnowledgeTooLarge` before any
        request, so the ConfigMap keeps the last document that fitted.
        """
        text = encode_document(document)
        if len(text.encode()) > MAX_BYTES:
            raise self._too_large(len(text.encode()), "the knowledge document is")

        def write() -> None:
            if self._stale or self._configmap is None:
                if self._read() is None:
                    self._create(text)
                    return
            configmap = self._configmap
            assert configmap is not None
            data = dict(configmap.data or {})
            previous = data.get(KEY)
            if not self._loaded and previous and previous != text:
                # load() never saw this document (it failed): keep a copy rather than overwrite it.
                data[self._free_key(data, "knowledge.aside")] = previous
            data[KEY] = text
            total = sum(len(key.encode()) + len(value.encode()) for key, value in data.items())
            if total > MAX_BYTES:
                # Moved-aside documents share the ConfigMap's budget with the live one.
                raise self._too_large(total, "the ConfigMap with this document would hold")
            self._replace(configmap, data)

        self._call(write, "update")
        self._loaded = True

    def _create(self, text: str) -> None:
        body = k8s.V1ConfigMap(
            api_version="v1",
            kind="ConfigMap",
            metadata=k8s.V1ObjectMeta(
                name=self.name, namespace=self.namespace, labels={"app.kubernetes.io/component": "knowledge"}
            ),
            data={KEY: text},
        )
        try:
            self._configmap = self.core.create_namespaced_config_map(
                self.namespace, body, _request_timeout=self.request_timeout_s
            )
        except ApiException as exc:
            if exc.status == 409:  # created by someone else meanwhile: read it and update instead
                self._stale = True
            elif exc.status == 403:
                raise KnowledgeStoreError(
                    f"{self._where()} does not exist and may not be created (403): create it empty "
                    "(the Helm chart does) or grant verb 'create' on configmaps"
                ) from None
            raise
        self._stale = False
