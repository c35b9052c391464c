"""The knowledge document: what the agent has learned, as one versioned JSON object.

Shared by every store (file, ConfigMap) so they validate it the same way.
"""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION = 1


class KnowledgeError(ValueError):
    """A stored document that cannot be used (corrupt, wrong shape, or from a newer Perdix)."""


def check_document(document: Any) -> dict[str, Any]:
    """Return the document if this Perdix can read it; raise KnowledgeError saying why not."""
    if not isinstance(document, dict):
        raise KnowledgeError(f"expected a JSON object, found {type(document).__name__}")
    version = document.get("version")
    if not isinstance(version, int):
        raise KnowledgeError("missing or non-integer 'version'")
    if version > SCHEMA_VERSION:
        raise KnowledgeError(f"version {version} is newer than this Perdix understands ({SCHEMA_VERSION})")
    if version < 1:
        raise KnowledgeError(f"invalid version {version}")
    return document
