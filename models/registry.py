"""The model registry's format and its reader: versioned forecaster artifacts per job on a path or any URI.

Layout::

    <root>/<job>/<version>/metadata.json   what was fitted, on which data, how well it back-tested
    <root>/<job>/<version>/model.json      the forecaster state (Forecaster.to_dict plus its kind)
    <root>/<job>/<version>/_COMMITTED      written last: sha256 and size of the two files above

Publishing writes the two files, then the marker; readers only ever see versions with a marker, so
a crashed or half-copied publish is invisible (object stores have no atomic directory rename, a
marker works everywhere). A marker whose checksums do not match the files marks a corrupt artifact:
:meth:`RegistryReader.load` raises :class:`CorruptArtifact` and callers skip that version.

The checksums catch damage, not intent: whoever may write the registry's bucket can write matching
ones. So an artifact is untrusted input all the same: plain JSON, its model state validated against
the forecasters' schemas (``models.forecast.states``) and built once before :meth:`RegistryReader.load`
returns it; a state that does not fit is a :class:`CorruptArtifact` too. Nothing in it is executed.

Versions are strings that sort in time order (``v20261123T081800123Z``); the newest is the largest.
The Spark retraining writes the registry (``spark.registry.ModelRegistry``, which keeps the newest
``keep`` versions); the agent reads it with :class:`RegistryReader`, without Spark or a JVM.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from models.forecast.seasonal import SeasonalForecaster
from models.storage import Location, StorageError, open_location

MARKER = "_COMMITTED"
METADATA = "metadata.json"
MODEL = "model.json"
VERSION_PATTERN = re.compile(r"^v\d{8}T\d{9}Z(?:-[0-9a-z]+)?$")
ARTIFACT_FORMAT = 1
"""Bumped when the artifact layout changes incompatibly."""


class RegistryError(OSError):
    """The registry cannot be read or written; the message names the location."""


class CorruptArtifact(RegistryError):
    """A committed version whose files are missing, unreadable or do not match the marker's checksums."""


def version_at(moment: datetime) -> str:
    """The version string of an artifact published at ``moment`` (sortable, millisecond resolution)."""
    moment = moment.astimezone(UTC)
    return moment.strftime("v%Y%m%dT%H%M%S") + f"{moment.microsecond // 1000:03d}Z"


def published_at(version: str) -> datetime | None:
    """When ``version`` was published (:func:`version_at`'s form, a real date and time), or None if it is no
    version: ``v99999999T999999999Z`` matches the pattern and names no time."""
    if not VERSION_PATTERN.match(version):
        return None
    try:
        return datetime.strptime(version[1:19], "%Y%m%dT%H%M%S%f").replace(tzinfo=UTC)
    except ValueError:
        return None


def check_version(version: str) -> str:
    """Return ``version`` if it is well formed, else raise :class:`RegistryError`."""
    if published_at(version) is None:
        raise RegistryError(f"malformed model version {version!r} (expected like v20261123T081800123Z)")
    return version


FUTURE_SLACK = timedelta(days=1)
"""How far ahead of this clock a version may be dated (clocks differ); a version dated later was published by no
retraining yet, and, newer than any to come, it would stop hot reload for good."""


def digest(data: bytes) -> str:
    """The sha256 hex digest the commit marker records for a file."""
    return hashlib.sha256(data).hexdigest()


def canonical_json(document: dict[str, Any]) -> bytes:
    """The bytes an artifact file holds: sorted keys, no whitespace, no NaN."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


@dataclass(frozen=True)
class Artifact:
    """One loaded version: its metadata and the forecaster state."""

    job: str
    version: str
    metadata: dict[str, Any]
    model: dict[str, Any]


def _current(name: str) -> bool:
    """``name`` is a version (:func:`published_at`) dated no later than :data:`FUTURE_SLACK` from now."""
    published = published_at(name)
    return published is not None and published <= datetime.now(UTC) + FUTURE_SLACK


class RegistryReader:
    """Reads versioned model artifacts per job under one root (local path or URI)."""

    def __init__(self, uri: str) -> None:
        try:
            self.location: Location = open_location(uri)
        except StorageError as exc:
            raise RegistryError(str(exc)) from None
        self.uri = uri

    def jobs(self) -> list[str]:
        """Jobs that have at least one directory in the registry."""
        return [name for name in self.location.list_dirs(self.location.root) if not name.startswith(".")]

    def versions(self, job: str) -> list[str]:
        """Committed versions of ``job``, oldest first."""
        job_dir = self.location.join(job)
        return [
            name
            for name in self.location.list_dirs(job_dir)
            if _current(name) and self.location.exists(self.location.join(job, name, MARKER))
        ]

    def latest(self, job: str) -> str | None:
        """The newest committed version of ``job``, or None."""
        versions = self.versions(job)
        return versions[-1] if versions else None

    def _marker(self, job: str, version: str) -> dict[str, Any]:
        path = self.location.join(job, version, MARKER)
        try:
            marker = json.loads(self.location.read_bytes(path))
        except (OSError, ValueError, RecursionError) as exc:
            raise CorruptArtifact(f"{path}: unreadable commit marker ({exc})") from None
        if not isinstance(marker, dict) or not isinstance(marker.get("files"), dict):
            raise CorruptArtifact(f"{path}: commit marker lacks the file checksums")
        return marker

    def _checked(self, job: str, version: str, name: str, marker: dict[str, Any]) -> dict[str, Any]:
        path = self.location.join(job, version, name)
        expected = marker["files"].get(name)
        try:
            data = self.location.read_bytes(path)
        except OSError as exc:
            raise CorruptArtifact(f"{path}: unreadable ({exc})") from None
        if (
            not isinstance(expected, dict)
            or expected.get("sha256") != digest(data)
            or expected.get("size") != len(data)
        ):
            raise CorruptArtifact(f"{path}: checksum does not match the commit marker")
        try:
            document = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise CorruptArtifact(f"{path}: not JSON ({exc})") from None
        if not isinstance(document, dict):
            raise CorruptArtifact(f"{path}: expected a JSON object")
        return document

    def metadata(self, job: str, version: str) -> dict[str, Any]:
        """The checked metadata of one version (cheap: the model itself is not read)."""
        marker = self._marker(job, version)
        return self._checked(job, version, METADATA, marker)

    def load(self, job: str, version: str | None = None) -> Artifact:
        """Load and verify a version (default: the newest); raises :class:`CorruptArtifact` if it is damaged."""
        version = version or self.latest(job)
        if version is None:
            raise RegistryError(f"{self.location.join(job)}: no committed model for job {job!r}")
        marker = self._marker(job, version)
        metadata = self._checked(job, version, METADATA, marker)
        model = self._checked(job, version, MODEL, marker)
        if metadata.get("format") != ARTIFACT_FORMAT:
            raise CorruptArtifact(
                f"{self.location.join(job, version)}: artifact format {metadata.get('format')!r}, "
                f"this Perdix reads {ARTIFACT_FORMAT}"
            )
        _check_metadata(self.location.join(job, version, METADATA), metadata)
        try:
            # Built once here and thrown away: a state that does not build is refused before anyone adopts it.
            SeasonalForecaster.from_dict(model)
        except (ValueError, TypeError, KeyError) as exc:
            raise CorruptArtifact(f"{self.location.join(job, version, MODEL)}: model state refused ({exc})") from None
        return Artifact(job=job, version=version, metadata=metadata, model=model)


def _check_metadata(path: str, metadata: dict[str, Any]) -> None:
    """The metadata fields a reader acts on have their shape: ``backtest`` and ``data`` are objects."""
    for key in ("backtest", "data"):
        if key in metadata and not isinstance(metadata[key], dict):
            raise CorruptArtifact(f"{path}: {key!r} must be a JSON object, found {type(metadata[key]).__name__}")
    wape = metadata.get("backtest", {}).get("wape")
    if wape is not None and (isinstance(wape, bool) or not isinstance(wape, int | float)):
        raise CorruptArtifact(f"{path}: backtest.wape must be a number or null, found {type(wape).__name__}")
