"""JSON values as types: what a call's arguments, a structured result and a wire declaration
are made of. ``JsonObject`` is what a function returns or a record holds; a function that only
reads a JSON object takes ``Mapping[str, object]`` (any dict fits it)."""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["JsonObject", "JsonValue"]

JsonValue: TypeAlias = "str | int | float | bool | list[JsonValue] | dict[str, JsonValue] | None"
"""A value ``json.loads`` can return."""

JsonObject: TypeAlias = "dict[str, JsonValue]"
"""A JSON object."""
