"""The knowledge document: what the agent has learned, as one versioned JSON object.

Shared by every store (file, ConfigMap) so they validate it the same way: the version, then every field
(:mod:`agent.knowledge.schema`). A document that fails either is moved aside by the store, never overwritten.
"""

from __future__ import annotations

import json

from agent.json_types import JsonObject
from agent.knowledge.schema import validate_document

SCHEMA_VERSION = 1


class KnowledgeError(ValueError):
    """A stored document that cannot be used (corrupt, wrong shape, or from a newer Perdix)."""


class KnowledgeUnrecoverable(Exception):
    """A stored document the agent cannot use and could not set aside: a fresh start would overwrite it at the first
    save, so the agent does not start. The message names where the document is and why."""


def parse_document(raw: bytes | str) -> JsonObject:
    """The stored bytes (or text) as a checked document (:func:`check_document`); KnowledgeError for anything else:
    not UTF-8, not JSON, nested deeper than the parser goes, or not a document this Perdix reads."""
    try:
        document = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise KnowledgeError(f"not a JSON document: {str(exc)[:200]}") from None
    return check_document(document)


def check_document(document: object) -> JsonObject:
    """Return the document if this Perdix can read it, every field checked against the schema
    (:mod:`agent.knowledge.schema`); raise KnowledgeError naming why not (the first field that does not fit)."""
    if not isinstance(document, dict):
        raise KnowledgeError(f"expected a JSON object, found {type(document).__name__}")
    version = document.get("version")
    if not isinstance(version, int):
        raise KnowledgeError("missing or non-integer 'version'")
    if version > SCHEMA_VERSION:
        raise KnowledgeError(f"version {version} is newer than this Perdix understands ({SCHEMA_VERSION})")
    if version < 1:
        raise KnowledgeError(f"invalid version {version}")
    try:
        validate_document(document)
    except ValueError as exc:
        raise KnowledgeError(f"a field does not fit: {exc}") from None
    except RecursionError:
        raise KnowledgeError("a field does not fit: nested deeper than any document this Perdix writes") from None
    return document


class KnowledgeTooLarge(ValueError):
    """A document over the store's size limit: it was not written, and the last one written stays."""

    def __init__(self, message: str, *, size_bytes: int, limit_bytes: int) -> None:
        super().__init__(message)
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes


def encode_document(document: JsonObject) -> str:
    """The document as every store writes it: compact JSON, no NaN (raises ValueError on one)."""
    return json.dumps(document, separators=(",", ":"), allow_nan=False)
