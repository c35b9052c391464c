"""The shape of JSON as the agent reads and writes it (knowledge documents, REST bodies, ConfigMap data).

A number read from JSON goes through ``planner.peer_types.integer_from_json`` / ``number_from_json``, the readers
the peers' stored state uses too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

JsonValue: TypeAlias = "str | int | float | bool | None | list[JsonValue] | dict[str, JsonValue]"
"""A value JSON can hold."""
JsonObject: TypeAlias = "dict[str, JsonValue]"
"""A JSON object."""


def _object(value: JsonValue, where: str = "") -> JsonObject:
    """``value`` if it is a JSON object; TypeError naming ``where`` (a key, or nothing) when it is another value."""
    if not isinstance(value, dict):
        raise TypeError(f"{where}expected a JSON object, found {type(value).__name__}")
    return value


def member(obj: Mapping[str, JsonValue], key: str) -> JsonObject:
    """The object under ``key`` (an empty one when absent, null or empty); TypeError when it holds another value."""
    return _object(obj.get(key) or {}, f"{key!r}: ")


def as_object(value: JsonValue) -> JsonObject:
    """``value`` as a JSON object (an empty one for null or an empty value); TypeError when it is another value."""
    return _object(value or {})


def objects(value: JsonValue) -> list[JsonObject]:
    """The items of a JSON list of objects; TypeError when ``value`` is not a list or an item not an object."""
    items: list[JsonObject] = []
    for item in as_list(value):
        if not isinstance(item, dict):
            raise TypeError(f"expected a JSON object in the list, found {type(item).__name__}")
        items.append(item)
    return items


def as_str(value: JsonValue) -> str | None:
    """``str(value)``, or None for null."""
    return None if value is None else str(value)


def object_at(obj: Mapping[str, JsonValue], key: str) -> JsonObject:
    """The object under ``key``: KeyError when absent, TypeError when it holds another value."""
    return _object(obj[key], f"{key!r}: ")


def as_list(value: JsonValue) -> list[JsonValue]:
    """``value`` as a JSON list; TypeError when it is another value."""
    if not isinstance(value, list):
        raise TypeError(f"expected a JSON list, found {type(value).__name__}")
    return value


def optional_int(value: JsonValue) -> int | None:
    """``value`` when it is an integer, None for null; TypeError for another value."""
    if value is None or isinstance(value, int):
        return value
    raise TypeError(f"expected an integer, found {type(value).__name__}")
