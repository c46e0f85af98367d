"""JSON values as types: what a call's arguments, a structured result and a wire declaration
are made of. ``JsonObject`` is what a function returns or a record holds; a function that only
reads a JSON object takes ``Mapping[str, object]`` (any dict fits it).

Both are real type aliases (``TypeAliasType``), not strings: a tool whose function returns
``JsonObject`` has its output schema built by pydantic from the annotation, and a string alias
reached pydantic as an unresolvable forward reference (the server failed to start)."""

from __future__ import annotations

from typing import cast

from typing_extensions import TypeAliasType

__all__ = ["JsonObject", "JsonValue", "as_json"]

JsonValue = TypeAliasType(
    "JsonValue", "str | int | float | bool | list[JsonValue] | dict[str, JsonValue] | None")
"""A value ``json.loads`` can return."""

JsonObject = TypeAliasType("JsonObject", "dict[str, JsonValue]")
"""A JSON object."""


def as_json(value: dict[str, object]) -> JsonObject:
    """``value`` typed as the JSON object it travels as: a call's arguments and a result's
    structured content are JSON by contract (decoded from JSON, or encoded with ``dump_json``
    when sent), so a wire message may carry them as they are."""
    return cast(JsonObject, value)
