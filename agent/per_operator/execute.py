"""Per-vertex scalers: set each job vertex's parallelism in one write, and TaskManager memory where possible.

* ``flink-rest`` (:class:`FlinkRestVertexScaler`): the adaptive scheduler's
  ``PUT /jobs/{id}/resource-requirements`` with every vertex's bounds in one body
  (``FlinkRestScaler.rescale_vertices``): an in-place restart at the new parallelism. It cannot change
  a TaskManager's memory, so memory decisions stay recommendations.
* ``flinkdeployment`` (:class:`FlinkDeploymentVertexScaler`): one JSON merge patch of the
  FlinkDeployment with ``spec.flinkConfiguration["pipeline.jobvertex-parallelism-overrides"]`` (the key
  the Flink Kubernetes operator's own autoscaler writes: ``vertexId:parallelism,...``) and
  ``spec.job.parallelism`` raised to the largest vertex parallelism, so the operator provisions enough
  slots. Memory goes through the TaskManager resources in a second patch:
  ``taskmanager.memory.managed.size`` (managed memory per slot times slots per TaskManager) and
  ``spec.taskManager.resource.memory`` grown or shrunk by the same amount, which the operator applies
  with a TaskManager restart. Every write is read back.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from kubernetes import client as k8s

from agent.execute.flink_rest import FlinkRestScaler
from agent.execute.kubernetes import MERGE_PATCH, Backoff, FatalApiError, RetriesExhausted, TargetRef
from agent.json_types import JsonObject, JsonValue, member
from agent.logging import get_logger
from agent.ports import EventSink, RescaleResult, ScalerError
from agent.settings import ScaleTargetSettings
from planner.peer_types import integer_from_json

OVERRIDES_KEY = "pipeline.jobvertex-parallelism-overrides"
"""Flink's per-vertex parallelism overrides (``vertexId:parallelism,...``), as the operator's autoscaler sets them."""
MANAGED_KEY = "taskmanager.memory.managed.size"
SLOTS_KEY = "taskmanager.numberOfTaskSlots"

T = TypeVar("T")

_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_UNIT_MB = {"": 1 / 1024**2, "b": 1 / 1024**2, "k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0**2}


def parse_memory_mb(text: JsonValue) -> float:
    """Flink or Kubernetes memory (``2048m``, ``2g``, ``1.5Gi``, ``512mb``, bytes as a number) in MiB.

    >>> parse_memory_mb("2048m"), parse_memory_mb("2Gi"), parse_memory_mb("512 mb"), parse_memory_mb(1048576)
    (2048.0, 2048.0, 512.0, 1.0)
    """
    if isinstance(text, (int, float)):
        return float(text) / 1024**2
    match = _MEMORY.match(str(text))
    if match is None:
        raise ValueError(f"not a memory size: {text!r}")
    unit = (match.group(2) or "").lower()[:1]
    return float(match.group(1)) * _UNIT_MB[unit]


@dataclass(frozen=True)
class MemoryResult:
    """What a memory write did: the managed memory per slot asked for and read back, MB."""

    requested_mb: float
    confirmed_mb: float | None
    dry_run: bool


class VertexScaler(Protocol):
    """Applies a per-vertex plan (and, where it can, TaskManager memory) to the job."""

    memory_applies: bool
    """True when :meth:`apply_memory` changes the TaskManagers' memory."""

    def rescale_vertices(self, targets: Mapping[str, int], *, reasons: tuple[str, ...], dry_run: bool) -> RescaleResult:
        """Set each named vertex (by id) to its parallelism in one write; the others keep theirs."""
        ...

    def apply_memory(
        self, managed_memory_per_slot_mb: float, *, reasons: tuple[str, ...], dry_run: bool
    ) -> MemoryResult:
        """Give every slot ``managed_memory_per_slot_mb`` of managed memory (ScalerError where it cannot)."""
        ...


class FlinkRestVertexScaler:
    """The flink-rest scaler's per-vertex write; memory is not something the REST API can change."""

    memory_applies = False

    def __init__(self, scaler: FlinkRestScaler) -> None:
        self.scaler = scaler

    def rescale_vertices(self, targets: Mapping[str, int], *, reasons: tuple[str, ...], dry_run: bool) -> RescaleResult:
        """One ``PUT /jobs/{id}/resource-requirements`` for every vertex, confirmed by read-back."""
        return self.scaler.rescale_vertices(targets, reasons=reasons, dry_run=dry_run)

    def apply_memory(
        self, managed_memory_per_slot_mb: float, *, reasons: tuple[str, ...], dry_run: bool
    ) -> MemoryResult:
        """Refuse: a TaskManager's memory changes only with a restart the REST API cannot ask for."""
        raise ScalerError("flink-rest cannot change TaskManager memory in place", kind="unsupported")


class FlinkDeploymentVertexScaler:
    """Per-vertex parallelism and TaskManager memory through a FlinkDeployment (see the module docstring)."""

    memory_applies = True

    def __init__(
        self,
        settings: ScaleTargetSettings,
        api: k8s.ApiClient,
        events: EventSink | None = None,
        *,
        backoff: Backoff | None = None,
    ) -> None:
        self.target = TargetRef.from_settings(settings)
        if self.target.kind != "flinkdeployment":
            raise ValueError(f"scale_target.kind must be flinkdeployment, not {self.target.kind!r}")
        self.settings = settings
        self.custom = k8s.CustomObjectsApi(api)
        self.events = events
        self.backoff = backoff or Backoff(max_retries=settings.max_retries)
        self.log = get_logger("perdix.execute", target=self.target.describe())

    # ------------------------------------------------------------------ API

    def _call(self, fn: Callable[[], T], verb: str) -> T:
        try:
            return self.backoff.call(fn)
        except FatalApiError as exc:
            raise ScalerError(
                f"{verb} {self.target.describe()}: {exc.failure.message}", kind=exc.failure.kind
            ) from None
        except RetriesExhausted as exc:
            raise ScalerError(
                f"{verb} {self.target.describe()}: {exc}", kind=exc.failure.kind, retryable=True
            ) from None

    def _read(self) -> JsonObject:
        t = self.target
        obj = self._call(
            lambda: self.custom.get_namespaced_custom_object(
                "flink.apache.org",
                "v1beta1",
                t.namespace,
                "flinkdeployments",
                t.name,
                _request_timeout=self.settings.request_timeout_s,
            ),
            "get",
        )
        if not isinstance(obj, dict):
            raise ScalerError(f"{t.describe()}: unexpected answer {type(obj).__name__}", kind="invalid_target")
        return obj

    def _patch(self, body: JsonObject) -> None:
        t = self.target
        self._call(
            lambda: self.custom.patch_namespaced_custom_object(
                "flink.apache.org",
                "v1beta1",
                t.namespace,
                "flinkdeployments",
                t.name,
                body,
                _request_timeout=self.settings.request_timeout_s,
                _content_type=MERGE_PATCH,
            ),
            "patch",
        )

    # ------------------------------------------------------------------ parallelism

    @staticmethod
    def overrides(obj: JsonObject) -> dict[str, int]:
        """The per-vertex overrides the FlinkDeployment holds now."""
        text = str(member(member(obj, "spec"), "flinkConfiguration").get(OVERRIDES_KEY) or "")
        out: dict[str, int] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            vertex, _, value = item.partition(":")
            if vertex and value.strip().isdigit():
                out[vertex] = int(value)
        return out

    def rescale_vertices(self, targets: Mapping[str, int], *, reasons: tuple[str, ...], dry_run: bool) -> RescaleResult:
        """Merge the targets into the overrides, raise spec.job.parallelism to the largest, read back."""
        if any(p < 1 for p in targets.values()):
            raise ScalerError(f"refusing to set a parallelism below 1: {dict(targets)}", kind="invalid_request")
        before = self._read()
        merged = {**self.overrides(before), **{str(k): int(v) for k, v in targets.items()}}
        requested = max(merged.values()) if merged else 0
        current_job = integer_from_json(member(member(before, "spec"), "job").get("parallelism") or 0)
        why = reasons[-1] if reasons else "no reason given"
        if dry_run:
            if self.events is not None and self.settings.recommendation_events:
                self.events.emit(
                    reason="RescaleRecommended",
                    message=f"dry-run: would set {OVERRIDES_KEY} to {_format(merged)}: {why}",
                )
            return RescaleResult(requested=requested, confirmed=current_job, dry_run=True)
        spec: JsonObject = {"flinkConfiguration": {OVERRIDES_KEY: _format(merged)}}
        if requested > current_job:
            spec["job"] = {"parallelism": requested}
        self._patch({"spec": spec})
        after = self._read()
        confirmed = self.overrides(after)
        ok = all(confirmed.get(k) == v for k, v in merged.items())
        if self.events is not None:
            if ok:
                self.events.emit(
                    reason="Rescaled",
                    message=f"set {OVERRIDES_KEY} of {self.target.describe()} to {_format(merged)}: {why}",
                )
            else:
                self.events.emit(
                    reason="RescaleFailed",
                    type_="Warning",
                    message=f"requested {_format(merged)}, read back {_format(confirmed)}",
                )
        return RescaleResult(
            requested=requested, confirmed=max(confirmed.values()) if ok and confirmed else None, dry_run=False
        )

    # ------------------------------------------------------------------ memory

    def apply_memory(
        self, managed_memory_per_slot_mb: float, *, reasons: tuple[str, ...], dry_run: bool
    ) -> MemoryResult:
        """Set the managed memory per TaskManager and grow or shrink its process memory by the difference."""
        obj = self._read()
        spec = member(obj, "spec")
        config = member(spec, "flinkConfiguration")
        slots = int(str(config.get(SLOTS_KEY) or 1))
        resource = member(member(spec, "taskManager"), "resource")
        if "memory" not in resource:
            raise ScalerError(
                f"{self.target.describe()} has no spec.taskManager.resource.memory", kind="invalid_target"
            )
        process_mb = parse_memory_mb(resource["memory"])
        old_managed = parse_memory_mb(config[MANAGED_KEY]) if MANAGED_KEY in config else None
        new_managed = managed_memory_per_slot_mb * slots
        if old_managed is None:
            # Flink's default is a fraction of the process memory; without an explicit size the difference is unknown,
            # so the process grows by the whole new managed memory (never starving the heap).
            new_process = process_mb + new_managed
        else:
            new_process = process_mb - old_managed + new_managed
        why = reasons[-1] if reasons else "no reason given"
        message = (
            f"managed memory {new_managed:.0f} MB per TaskManager ({managed_memory_per_slot_mb:.0f} MB per slot), "
            f"process memory {new_process:.0f} MB: {why}"
        )
        if dry_run:
            if self.events is not None and self.settings.recommendation_events:
                self.events.emit(reason="MemoryRecommended", message=f"dry-run: would set {message}")
            return MemoryResult(managed_memory_per_slot_mb, (old_managed or 0.0) / slots, dry_run=True)
        self._patch(
            {
                "spec": {
                    "flinkConfiguration": {MANAGED_KEY: f"{new_managed:.0f}m"},
                    "taskManager": {"resource": {"memory": f"{new_process:.0f}m"}},
                }
            }
        )
        after = member(member(self._read(), "spec"), "flinkConfiguration")
        confirmed = parse_memory_mb(after[MANAGED_KEY]) / slots if MANAGED_KEY in after else None
        if self.events is not None:
            self.events.emit(reason="MemoryChanged", message=f"set {message}")
        return MemoryResult(managed_memory_per_slot_mb, confirmed, dry_run=False)


def _format(overrides: Mapping[str, int]) -> str:
    """``vertexId:parallelism,...`` in a stable order."""
    return ",".join(f"{k}:{v}" for k, v in sorted(overrides.items()))
