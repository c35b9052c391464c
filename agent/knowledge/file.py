"""Knowledge in a local JSON file, replaced atomically (temp file, fsync, rename) once per loop."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from agent.json_types import JsonObject
from agent.knowledge.document import (
    KnowledgeError,
    KnowledgeTooLarge,
    KnowledgeUnrecoverable,
    encode_document,
    parse_document,
)
from agent.logging import get_logger

log = get_logger("perdix.knowledge")


class KnowledgePathError(OSError):
    """The knowledge file cannot be written where the settings put it; the message names the path."""


MAX_FILE_BYTES = 16 * 1024 * 1024
"""The largest knowledge file read: sixteen times the ConfigMap store's limit, which bounds what the agent keeps
(docs/failure-behaviour.md); a larger file is not one this Perdix wrote, and is moved aside unread."""


class FileKnowledgeStore:
    """KnowledgeStore on the local filesystem; a bad file is moved aside, never deleted."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def load(self) -> JsonObject | None:
        """The stored document, or None if there is none or it was unusable (then moved aside). Only a regular
        file of at most :data:`MAX_FILE_BYTES` is read (a FIFO, a device or a larger file is moved aside
        unread); KnowledgeUnrecoverable when an unusable file cannot be moved aside."""
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return None
        try:
            if not stat.S_ISREG(info.st_mode):
                raise KnowledgeError("not a regular file")
            if info.st_size > MAX_FILE_BYTES:
                raise KnowledgeError(f"{info.st_size} bytes, over the {MAX_FILE_BYTES} byte limit")
            with self.path.open("rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
            if len(data) > MAX_FILE_BYTES:
                raise KnowledgeError(f"over the {MAX_FILE_BYTES} byte limit")
            # Decoded inside the check: a file that is not UTF-8 is as unusable as one that is not JSON.
            return parse_document(data)
        except KnowledgeError as exc:
            aside = self._move_aside_or_stop(str(exc))
            log.warning("knowledge.unusable", path=str(self.path), reason=str(exc), moved_to=str(aside))
            return None

    def check_writable(self) -> None:
        """Raise :class:`KnowledgePathError` (one line naming the path) unless a save could write the document.

        A path that is a directory, lies under a file, or sits in a directory this process may not write
        would leave the agent running without ever keeping what it learns: that is a start-up error.
        """
        path = self.path
        if path.is_dir():
            raise KnowledgePathError(f"knowledge.path: {path} is a directory, not a file")
        parent = path.parent
        existing = parent
        while not existing.exists():
            existing = existing.parent
        if not existing.is_dir():
            raise KnowledgePathError(f"knowledge.path: {path} lies under {existing}, which is a file")
        try:
            parent.mkdir(parents=True, exist_ok=True)
            # A real write, not os.access: it answers for read-only mounts and any uid the same way.
            fd, probe = tempfile.mkstemp(prefix=f".{path.name}.probe.", dir=parent)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise KnowledgePathError(
                f"knowledge.path: cannot write in {parent} ({exc.strerror or type(exc).__name__})"
            ) from None
        if path.exists() and not os.access(path, os.R_OK):
            raise KnowledgePathError(f"knowledge.path: {path} cannot be read")

    def _move_aside(self) -> Path:
        for attempt in range(1000):
            candidate = self.path.with_name(f"{self.path.name}.bad-{attempt}")
            if not candidate.exists():
                os.replace(self.path, candidate)
                return candidate
        raise OSError(f"{self.path}: too many moved-aside knowledge files next to it")

    def _move_aside_or_stop(self, reason: str) -> Path:
        """:meth:`_move_aside`, or KnowledgeUnrecoverable naming the path when the file cannot be moved."""
        try:
            return self._move_aside()
        except OSError as exc:
            raise KnowledgeUnrecoverable(
                f"knowledge.path: {self.path} cannot be used ({reason}) nor moved aside "
                f"({exc.strerror or exc}); move or remove it"
            ) from None

    def set_aside(self, reason: str) -> str | None:
        """Move the stored file aside (it parsed but the agent could not use it); the new path, or None."""
        if not self.path.exists():
            return None
        aside = self._move_aside_or_stop(reason)
        log.warning("knowledge.unusable", path=str(self.path), reason=reason, moved_to=str(aside))
        return str(aside)

    def save(self, document: JsonObject) -> None:
        """Write the document to a temp file beside the target, fsync it, then rename over the target."""
        text = encode_document(document)
        size = len(text.encode())
        if size > MAX_FILE_BYTES:
            # Written, it would be moved aside unread at the next start: the last good file stays instead.
            raise KnowledgeTooLarge(
                f"knowledge.path: {self.path}: the document is {size} bytes, over the {MAX_FILE_BYTES} byte limit a "
                "start reads; not written",
                size_bytes=size,
                limit_bytes=MAX_FILE_BYTES,
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
