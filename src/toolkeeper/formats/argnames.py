"""Argument names a provider does not take: renamed on the way out, mapped back on the way in.

Gemini takes parameter names of ASCII letters, digits and underscores (starting with a letter or
an underscore, at most 64); Anthropic takes property keys of ``[a-zA-Z0-9_.-]{1,64}``. Every other
name (``año_vehiculo``, ``first name``) is folded to ASCII (``ano_vehiculo``, ``first_name``), or,
when the fold is empty or already taken by another name of the tool, sanitized and suffixed with
a hash of the original. One table per tool and format, injective and never using a name the tool
already has, so a call's arguments are mapped back by walking them along the tool's schema: the
tool always sees its own names.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

__all__ = ["ArgumentNames", "ArgumentRule", "rename_table"]

_HASH = 8


@dataclass(frozen=True)
class ArgumentRule:
    """What a provider accepts as a property name."""

    pattern: re.Pattern[str]
    invalid: re.Pattern[str]
    max_len: int
    summary: str
    must_start: re.Pattern[str] | None = None

    def fits(self, name: str) -> bool:
        return self.pattern.fullmatch(name) is not None

    def folded(self, name: str) -> str:
        """``name`` in ASCII, characters outside the rule replaced, cut to fit."""
        ascii_only = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
        base = self.invalid.sub("_", ascii_only)
        if base and self.must_start is not None and not self.must_start.match(base):
            base = "_" + base
        return base[: self.max_len]

    def hashed(self, name: str, hash_len: int = _HASH) -> str:
        """A name for ``name`` that no other name shares: its fold, suffixed with a hash."""
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:hash_len]
        base = self.folded(name)[: self.max_len - hash_len - 1] or "arg"
        return f"{base}_{digest}"


def rename_table(schema: Mapping[str, object], rule: ArgumentRule) -> dict[str, str]:
    """Original name → wire name, for every property name ``rule`` does not take (at any depth).

    Injective, and a wire name is never a name the tool already uses, so mapping back is exact.
    """
    names = sorted(set(_property_names(schema)))
    taken = set(names)
    table: dict[str, str] = {}
    for name in (n for n in names if not rule.fits(n)):
        wire = rule.folded(name)
        hash_len = _HASH
        while not rule.fits(wire) or wire in taken:
            wire = rule.hashed(name, hash_len)
            hash_len *= 2
        taken.add(wire)
        table[name] = wire
    return table


def _property_names(node: object) -> Iterator[str]:
    if isinstance(node, list):
        for item in node:
            yield from _property_names(item)
    elif isinstance(node, Mapping):
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            yield from (str(name) for name in properties)
        for value in node.values():
            yield from _property_names(value)


class ArgumentNames:
    """The renaming of one tool's arguments in one format, and its inverse for calls."""

    def __init__(self, table: Mapping[str, str], schema: Mapping[str, object]) -> None:
        self.to_wire: dict[str, str] = dict(table)
        """Original name → the name the provider is shown."""
        self._to_name = {wire: name for name, wire in table.items()}
        self._schema = schema
        self._defs: dict[str, object] = {**_mapping(schema.get("definitions")),
                                         **_mapping(schema.get("$defs"))}

    def decode(self, arguments: dict[str, object]) -> dict[str, object]:
        """A call's arguments under the tool's own names (walked along the tool's schema, so a
        free-form value's own keys are never touched)."""
        decoded = self._value(arguments, self._schema)
        return decoded if isinstance(decoded, dict) else arguments

    def _value(self, value: object, node: object) -> object:
        branches = self._branches(node)
        if isinstance(value, dict):
            props: dict[str, object] = {}
            for branch in branches:
                props.update(_mapping(branch.get("properties")))
            if not props:
                return value
            out: dict[object, object] = {}
            for key, item in value.items():
                name = self._to_name.get(key)
                name = name if name is not None and name in props else key
                out[name] = self._value(item, props.get(name))
            return out
        if isinstance(value, list):
            items = [b["items"] for b in branches if isinstance(b.get("items"), dict)]
            if items:
                return [self._value(item, {"anyOf": items}) for item in value]
        return value

    def _branches(self, node: object, depth: int = 0) -> list[Mapping[str, object]]:
        """``node`` (references resolved) and the alternatives it is made of."""
        node = self._resolve(node)
        if not isinstance(node, dict) or depth > 8:
            return []
        found: list[Mapping[str, object]] = [node]
        for key in ("anyOf", "oneOf", "allOf"):
            options = node.get(key)
            for option in options if isinstance(options, list) else ():
                found.extend(self._branches(option, depth + 1))
        return found

    def _resolve(self, node: object) -> object:
        for _ in range(8):  # a chain of references, never a cycle walked for ever
            ref = node.get("$ref") if isinstance(node, dict) else None
            if not isinstance(ref, str) or not ref.startswith(("#/$defs/", "#/definitions/")):
                return node
            node = self._defs.get(ref.rsplit("/", 1)[-1])
        return node


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, dict) else {}
