"""The model registry: versioned forecaster artifacts per job on a local path or any Hadoop-compatible URI.

Layout::

    <root>/<job>/<version>/metadata.json   what was fitted, on which data, how well it back-tested
    <root>/<job>/<version>/model.json      the forecaster state (Forecaster.to_dict plus its kind)
    <root>/<job>/<version>/_COMMITTED      written last: sha256 and size of the two files above

Publishing writes the two files, then the marker; readers only ever see versions with a marker, so
a crashed or half-copied publish is invisible (object stores have no atomic directory rename, a
marker works everywhere). A marker whose checksums do not match the files marks a corrupt artifact:
:meth:`ModelRegistry.load` raises :class:`CorruptArtifact` and callers skip that version.

Versions are strings that sort in time order (``v20261123T081800123Z``); the newest is the largest.
Only the newest ``keep`` committed versions survive a publish. This module imports no Spark, so the
agent can read the registry without a JVM.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from spark.fs import Location, StorageError, open_location

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


def check_version(version: str) -> str:
    """Return ``version`` if it is well formed, else raise :class:`RegistryError`."""
    if not VERSION_PATTERN.match(version):
        raise RegistryError(f"malformed model version {version!r} (expected like v20261123T081800123Z)")
    return version


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _dumps(document: dict[str, Any]) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


@dataclass(frozen=True)
class Artifact:
    """One loaded version: its metadata and the forecaster state."""

    job: str
    version: str
    metadata: dict[str, Any]
    model: dict[str, Any]


class ModelRegistry:
    """Versioned model artifacts per job under one root (local path or URI)."""

    def __init__(self, uri: str, *, keep: int = 5) -> None:
        if keep < 1:
            raise RegistryError(f"keep must be at least 1, got {keep}")
        try:
            self.location: Location = open_location(uri)
        except StorageError as exc:
            raise RegistryError(str(exc)) from None
        self.uri = uri
        self.keep = keep

    # ------------------------------------------------------------------ reading

    def jobs(self) -> list[str]:
        """Jobs that have at least one directory in the registry."""
        return [name for name in self.location.list_dirs(self.location.root) if not name.startswith(".")]

    def versions(self, job: str) -> list[str]:
        """Committed versions of ``job``, oldest first."""
        job_dir = self.location.join(job)
        return [
            name
            for name in self.location.list_dirs(job_dir)
            if VERSION_PATTERN.match(name) and self.location.exists(self.location.join(job, name, MARKER))
        ]

    def latest(self, job: str) -> str | None:
        """The newest committed version of ``job``, or None."""
        versions = self.versions(job)
        return versions[-1] if versions else None

    def _marker(self, job: str, version: str) -> dict[str, Any]:
        path = self.location.join(job, version, MARKER)
        try:
            marker = json.loads(self.location.read_bytes(path))
        except (OSError, ValueError) as exc:
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
        if not isinstance(expected, dict) or expected.get("sha256") != _digest(data) or expected.get("size") != len(data):
            raise CorruptArtifact(f"{path}: checksum does not match the commit marker")
        try:
            document = json.loads(data)
        except ValueError as exc:
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
        return Artifact(job=job, version=version, metadata=metadata, model=model)

    # ------------------------------------------------------------------ writing

    def publish(self, job: str, version: str, *, metadata: dict[str, Any], model: dict[str, Any]) -> str:
        """Write one version atomically (files, then the commit marker) and prune old versions.

        Re-publishing an existing version (a retried Spark task) rewrites it in place, so a retry
        never leaves two copies. Returns the version's directory.
        """
        check_version(version)
        directory = self.location.join(job, version)
        metadata_bytes = _dumps({**metadata, "format": ARTIFACT_FORMAT, "job": job, "version": version})
        model_bytes = _dumps(model)
        marker_path = self.location.join(job, version, MARKER)
        try:
            # Un-commit first, so a reader never pairs the old marker with new files.
            if self.location.exists(marker_path):
                self.location.fs.delete_file(marker_path)
            self.location.write_bytes_atomic(self.location.join(job, version, METADATA), metadata_bytes)
            self.location.write_bytes_atomic(self.location.join(job, version, MODEL), model_bytes)
            marker = {
                "files": {
                    METADATA: {"sha256": _digest(metadata_bytes), "size": len(metadata_bytes)},
                    MODEL: {"sha256": _digest(model_bytes), "size": len(model_bytes)},
                }
            }
            self.location.write_bytes_atomic(marker_path, _dumps(marker))
        except OSError as exc:
            raise RegistryError(f"{directory}: cannot publish ({exc})") from None
        self.prune(job)
        return directory

    def prune(self, job: str) -> list[str]:
        """Delete all but the newest ``keep`` committed versions and any uncommitted leftovers older than them."""
        committed = self.versions(job)
        kept = committed[-self.keep :]
        oldest_kept = kept[0] if kept else None
        removed = []
        for name in self.location.list_dirs(self.location.join(job)):
            if name in kept:
                continue
            stale_uncommitted = name not in committed and oldest_kept is not None and name < oldest_kept
            if name in committed or stale_uncommitted:
                self.location.delete_dir(self.location.join(job, name))
                removed.append(name)
        return removed
