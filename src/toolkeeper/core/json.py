"""JSON values as types: what a call's arguments, a structured result and a wire declaration
are made of. ``JsonObject`` is what a function returns or a record holds; a function that only
reads a JSON object takes ``Mapping[str, object]`` (any dict fits it).

Both are real type aliases (``TypeAliasType``), not strings: a tool whose function returns
``JsonObject`` has its output schema built by pydantic from the annotation, and a string alias
reached pydantic as an unresolvable forward reference (the server failed to start)."""

from __future__ import annotations

from typing_extensions import TypeAliasType

__all__ = ["JsonObject", "JsonValue"]

JsonValue = TypeAliasType(
    "JsonValue", "str | int | float | bool | list[JsonValue] | dict[str, JsonValue] | None")
"""A value ``json.loads`` can return."""

JsonObject = TypeAliasType("JsonObject", "dict[str, JsonValue]")
"""A JSON object."""
