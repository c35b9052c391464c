"""Knowledge in a local JSON file, replaced atomically (temp file, fsync, rename) once per loop."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from agent.knowledge.document import KnowledgeError, check_document, encode_document
from agent.logging import get_logger

log = get_logger("perdix.knowledge")


class FileKnowledgeStore:
    """KnowledgeStore on the local filesystem; a bad file is moved aside, never deleted."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def load(self) -> dict[str, Any] | None:
        """The stored document, or None if there is none or it was unusable (then moved aside)."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        try:
            return check_document(json.loads(text))
        except (json.JSONDecodeError, UnicodeDecodeError, KnowledgeError) as exc:
            aside = self._move_aside()
            log.warning("knowledge.unusable", path=str(self.path), reason=str(exc), moved_to=str(aside))
            return None

    def _move_aside(self) -> Path:
        for attempt in range(1000):
            candidate = self.path.with_name(f"{self.path.name}.bad-{attempt}")
            if not candidate.exists():
                os.replace(self.path, candidate)
                return candidate
        raise OSError(f"{self.path}: too many moved-aside knowledge files next to it")

    def set_aside(self, reason: str) -> str | None:
        """Move the stored file aside (it parsed but the agent could not use it); the new path, or None."""
        if not self.path.exists():
            return None
        aside = self._move_aside()
        log.warning("knowledge.unusable", path=str(self.path), reason=reason, moved_to=str(aside))
        return str(aside)

    def save(self, document: dict[str, Any]) -> None:
        """Write the document to a temp file beside the target, fsync it, then rename over the target."""
        text = encode_document(document)
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
