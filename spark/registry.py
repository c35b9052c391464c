"""The writing side of the model registry: publish a version atomically and keep the newest ``keep``.

The format and the reader live in ``models.registry`` (the agent reads the registry without Spark).
"""

from __future__ import annotations

from typing import Any

from models.registry import (
    ARTIFACT_FORMAT,
    MARKER,
    METADATA,
    MODEL,
    RegistryError,
    RegistryReader,
    canonical_json,
    check_version,
    digest,
)


class ModelRegistry(RegistryReader):
    """Versioned model artifacts per job under one root: read, publish and prune."""

    def __init__(self, uri: str, *, keep: int = 5) -> None:
        if keep < 1:
            raise RegistryError(f"keep must be at least 1, got {keep}")
        super().__init__(uri)
        if self.location.exists(self.location.root) and not self.location.is_dir(self.location.root):
            # Refused before any fit: publishing into a file failed only once every job was trained.
            raise RegistryError(f"{uri}: not a directory, cannot publish models under it")
        self.keep = keep

    def publish(self, job: str, version: str, *, metadata: dict[str, Any], model: dict[str, Any]) -> str:
        """Write one version atomically (files, then the commit marker) and prune old versions.

        Re-publishing an existing version (a retried Spark task) rewrites it in place, so a retry
        never leaves two copies. Returns the version's directory.
        """
        check_version(version)
        directory = self.location.join(job, version)
        metadata_bytes = canonical_json({**metadata, "format": ARTIFACT_FORMAT, "job": job, "version": version})
        model_bytes = canonical_json(model)
        marker_path = self.location.join(job, version, MARKER)
        try:
            # Un-commit first, so a reader never pairs the old marker with new files.
            if self.location.exists(marker_path):
                self.location.fs.delete_file(marker_path)
            self.location.write_bytes_atomic(self.location.join(job, version, METADATA), metadata_bytes)
            self.location.write_bytes_atomic(self.location.join(job, version, MODEL), model_bytes)
            marker = {
                "files": {
                    METADATA: {"sha256": digest(metadata_bytes), "size": len(metadata_bytes)},
                    MODEL: {"sha256": digest(model_bytes), "size": len(model_bytes)},
                }
            }
            self.location.write_bytes_atomic(marker_path, canonical_json(marker))
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
