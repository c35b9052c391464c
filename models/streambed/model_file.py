"""The capacity model file: StreamBed's result, read by the agent as the prior for unobserved scale-outs.

A JSON document with a schema version. Readers accept every version up to their own and reject
newer ones (a newer writer may have changed the meaning of a field) and anything malformed, with a
one-line message naming the file and the reason. Writes are atomic (temporary file, then rename).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.capacity import MAX_RECORDS_PER_S
from models.streambed.explorer import FAMILIES, Surrogate

SCHEMA_VERSION = 1
KIND = "perdix.capacity-model"
MAX_FILE_BYTES = 16 * 2**20
"""Largest capacity model file read (one holds a few kilobytes: the capacities up to 32,768 and the runs)."""


class CapacityModelError(ValueError):
    """The capacity model file is missing, unreadable, malformed or from a newer Perdix."""


@dataclass(frozen=True)
class CapacityModelFile:
    """What StreamBed learned about a job, as stored in the capacity model file."""

    job: str
    surrogate: Surrogate
    memory_mb: float
    """Memory per task slot the capacities are given for."""
    slots_per_scale_out: int
    """Task slots per unit of scale-out (per TaskManager in the agent's job)."""
    capacities: Mapping[int, float]
    """Predicted capacity (records/s) per scale-out: the agent's prior."""
    validation: Mapping[str, object]
    """Validation errors: selection rule, LOOCV and extrapolation RMSE per family."""
    target_rate: float | None = None
    task_slots_for_target: int | None = None
    """Task slots for ``target_rate`` at 110 % (the inverse query)."""
    headroom: float = 1.1
    observations: tuple[Mapping[str, Any], ...] = ()
    testbed_runs: int = 0
    extra: Mapping[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """The JSON document."""
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": KIND,
            "job": self.job,
            "surrogate": self.surrogate.to_dict(),
            "memory_mb": self.memory_mb,
            "slots_per_scale_out": self.slots_per_scale_out,
            "capacities": {str(k): float(v) for k, v in sorted(self.capacities.items())},
            "validation": dict(self.validation),
            "inverse": {
                "target_rate": self.target_rate,
                "headroom": self.headroom,
                "task_slots": self.task_slots_for_target,
            },
            "observations": [dict(o) for o in self.observations],
            "testbed_runs": self.testbed_runs,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, data: object, *, source: str = "capacity model") -> CapacityModelFile:
        """Parse and validate a document; raises CapacityModelError naming ``source`` and the reason."""

        def fail(reason: str) -> CapacityModelError:
            return CapacityModelError(f"{source}: {reason}")

        if not isinstance(data, dict):
            raise fail("not a JSON object")
        _check_header(data, fail)
        try:
            return cls._validated(data, fail)
        except KeyError as missing:
            raise fail(f"missing key {missing}") from None
        except (TypeError, ValueError) as bad:
            if isinstance(bad, CapacityModelError):
                raise
            raise fail(f"bad value ({bad})") from None

    @classmethod
    def _validated(cls, data: dict[str, Any], fail: _Fail) -> CapacityModelFile:
        """The model of a document whose header was checked; KeyError, TypeError or ValueError if malformed."""
        surrogate = _surrogate(data["surrogate"], fail)
        capacities = _capacities(data["capacities"], fail)
        slots_per_scale_out = data["slots_per_scale_out"]
        if not isinstance(slots_per_scale_out, int) or slots_per_scale_out < 1:
            raise fail(f"slots_per_scale_out must be a positive integer, got {slots_per_scale_out!r}")
        memory_mb = _finite(data["memory_mb"], "memory_mb", fail)
        if memory_mb <= 0:
            raise fail(f"memory_mb must be positive, got {memory_mb}")
        validation = data["validation"]
        if not isinstance(validation, dict):
            raise fail("validation must be an object")
        inverse = data.get("inverse") or {}
        observations = data.get("observations") or []
        if not isinstance(inverse, dict) or not isinstance(observations, list):
            raise fail("inverse must be an object and observations a list")
        target = inverse.get("target_rate")
        slots_for_target = inverse.get("task_slots")
        return cls(
            job=str(data["job"]),
            surrogate=surrogate,
            memory_mb=memory_mb,
            slots_per_scale_out=slots_per_scale_out,
            capacities=capacities,
            validation=validation,
            target_rate=None if target is None else _finite(target, "inverse.target_rate", fail),
            task_slots_for_target=None if slots_for_target is None else int(slots_for_target),
            headroom=_finite(inverse.get("headroom", 1.1), "inverse.headroom", fail),
            observations=tuple(observations),
            testbed_runs=int(data.get("testbed_runs", 0)),
            extra=data.get("extra") or {},
        )


_Fail = Callable[[str], CapacityModelError]
"""Builds the error naming the file and the reason."""


def _check_header(data: Mapping[str, object], fail: _Fail) -> None:
    """A schema version this Perdix reads, and the kind of a capacity model."""
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise fail(f"schema_version must be a positive integer, got {version!r}")
    if version > SCHEMA_VERSION:
        raise fail(f"schema_version {version} is newer than this Perdix reads ({SCHEMA_VERSION}); upgrade Perdix")
    if data.get("kind") != KIND:
        raise fail(f"kind must be {KIND!r}, got {data.get('kind')!r}")


def _surrogate(raw: Mapping[str, object], fail: _Fail) -> Surrogate:
    """The surrogate's family (one StreamBed fits) and its finite coefficients."""
    family = next((known for known in FAMILIES if known == raw["family"]), None)
    if family is None:
        raise fail(f"surrogate.family must be one of {FAMILIES}, got {raw['family']!r}")
    return Surrogate(
        family,
        _finite(raw["memory_slope"], "surrogate.memory_slope", fail),
        _finite(raw["slots_slope"], "surrogate.slots_slope", fail),
        _finite(raw["intercept"], "surrogate.intercept", fail),
    )


def _finite(value: object, key: str, fail: _Fail) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise fail(f"{key} must be a finite number, got {value!r}")
    return float(value)


def _capacities(raw: object, fail: _Fail) -> dict[int, float]:
    if not isinstance(raw, dict) or not raw:
        raise fail("capacities must be a non-empty object of scale-out -> records/s")
    capacities: dict[int, float] = {}
    for key, value in raw.items():
        try:
            scale_out = int(key)
        except (TypeError, ValueError):
            raise fail(f"capacities key {key!r} is not an integer scale-out") from None
        if scale_out < 1:
            raise fail(f"capacities key {scale_out} must be a scale-out >= 1")
        capacity = _finite(value, f"capacities[{key}]", fail)
        if not 0 <= capacity <= MAX_RECORDS_PER_S:
            raise fail(f"capacities[{key}] must be within 0..{MAX_RECORDS_PER_S:g} records/s, got {capacity:g}")
        capacities[scale_out] = capacity
    return capacities


def write_capacity_model(path: str | os.PathLike[str], model: CapacityModelFile) -> Path:
    """Write the model atomically (temporary file in the same directory, then rename)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(model.to_dict(), indent=2, sort_keys=False) + "\n"
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def read_capacity_model(path: str | os.PathLike[str]) -> CapacityModelFile:
    """Read and validate a capacity model file."""
    source = str(path)
    try:
        with Path(path).open("rb") as stream:
            data = stream.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise CapacityModelError(f"{source}: no such file") from None
    except OSError as error:
        raise CapacityModelError(f"{source}: cannot read ({error.strerror or error})") from None
    if len(data) > MAX_FILE_BYTES:
        raise CapacityModelError(f"{source}: larger than {MAX_FILE_BYTES // 2**20} MiB, not a capacity model file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CapacityModelError(f"{source}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise CapacityModelError(f"{source}: not valid JSON ({error})") from None
    except RecursionError:
        raise CapacityModelError(f"{source}: not valid JSON (nested deeper than the parser goes)") from None
    return CapacityModelFile.from_dict(data, source=source)


def load_capacity_prior(path: str | os.PathLike[str]) -> dict[int, float]:
    """The prior capacity per scale-out (records/s) from a capacity model file, for the agent."""
    return dict(read_capacity_model(path).capacities)
