"""The shape of JSON as the agent reads and writes it (knowledge documents, REST bodies, ConfigMap data)."""

from __future__ import annotations

from typing import TypeAlias

JsonValue: TypeAlias = "str | int | float | bool | None | list[JsonValue] | dict[str, JsonValue]"
"""A value JSON can hold."""
JsonObject: TypeAlias = "dict[str, JsonValue]"
"""A JSON object."""
