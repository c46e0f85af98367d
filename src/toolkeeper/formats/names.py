"""Wire names: a reversible, collision-safe mapping between tool names and provider names.

A name that already fits a provider's rules is sent unchanged. Every other name is sanitized and
suffixed with a short hash of the original, so two different names never meet on the wire; the
``WireNames`` table maps calls back — and, for the tools whose argument names a provider does not
take (``argnames.py``), their arguments too. Names are never recovered by splitting strings.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import UnknownToolError, WireFormatError
from .argnames import ArgumentNames

__all__ = ["NameRule", "WireNames", "name_rule", "wire_name"]


@dataclass(frozen=True)
class NameRule:
    """What a provider accepts as a tool name."""

    pattern: re.Pattern[str]
    invalid: re.Pattern[str]
    max_len: int
    must_start: re.Pattern[str] | None = None


_RULES = {
    "openai-chat": NameRule(re.compile(r"[a-zA-Z0-9_-]{1,64}"), re.compile(r"[^a-zA-Z0-9_-]"), 64),
    "openai-responses": NameRule(
        re.compile(r"[a-zA-Z0-9_-]{1,64}"), re.compile(r"[^a-zA-Z0-9_-]"), 64
    ),
    "anthropic": NameRule(re.compile(r"[a-zA-Z0-9_-]{1,128}"), re.compile(r"[^a-zA-Z0-9_-]"), 128),
    "gemini": NameRule(
        re.compile(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}"), re.compile(r"[^a-zA-Z0-9_.:-]"), 64,
        must_start=re.compile(r"[a-zA-Z_]"),
    ),
    "mcp": NameRule(re.compile(r"[A-Za-z0-9_.-]{1,128}"), re.compile(r"[^A-Za-z0-9_.-]"), 128),
}


def name_rule(api_format: str) -> NameRule | None:
    """The name rule of a format (``None``: any name goes, as in the native format)."""
    return _RULES.get(api_format)


def wire_name(name: str, api_format: str, *, hash_len: int = 8) -> str:
    """The name a tool has on the wire of ``api_format`` (deterministic)."""
    rule = _RULES.get(api_format)
    if rule is None or rule.pattern.fullmatch(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:hash_len]
    base = rule.invalid.sub("_", name)
    if rule.must_start is not None and not rule.must_start.match(base):
        base = "t_" + base
    base = base[: rule.max_len - hash_len - 1]
    return f"{base}_{digest}"


class WireNames:
    """The two-way table of one set of tools in one wire format, and which provider item types
    (``computer_call``…) are calls of which provider-defined tool."""

    def __init__(self, names: Iterable[str], api_format: str) -> None:
        self.api_format = api_format
        self._to_wire: dict[str, str] = {}
        self._to_name: dict[str, str] = {}
        self.call_types: dict[str, tuple[str, ...]] = {}
        """Item type → the names of the tools that declared it (in ``call_types``)."""
        self.arguments: dict[str, ArgumentNames] = {}
        """Tool name → how its arguments were renamed, for the tools that had names this
        format does not take."""
        for name in names:
            self.add(name)

    def route(self, call_type: str, name: str) -> None:
        """Items of ``call_type`` in a response are calls of the tool ``name``."""
        known = self.call_types.get(call_type, ())
        if name not in known:
            self.call_types[call_type] = (*known, name)

    def add(self, name: str) -> str:
        """Register a tool name; returns its wire name."""
        if name in self._to_wire:
            return self._to_wire[name]
        wire = wire_name(name, self.api_format)
        if wire in self._to_name and self._to_name[wire] != name:
            wire = wire_name(name, self.api_format, hash_len=16)
            if wire in self._to_name:
                raise WireFormatError(
                    f"tools '{name}' and '{self._to_name[wire]}' share the wire name '{wire}' in "
                    f"{self.api_format}; rename one of them"
                )
        self._to_wire[name] = wire
        self._to_name[wire] = name
        return wire

    def wire(self, name: str) -> str:
        """The wire name of a registered tool name."""
        return self._to_wire.get(name) or self.add(name)

    def name(self, wire: str) -> str:
        """The tool name a wire name stands for.

        Raises:
            UnknownToolError: the provider named a tool that was not offered (with close names).
        """
        found = self._to_name.get(wire)
        if found is not None:
            return found
        close = difflib.get_close_matches(wire, list(self._to_name), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        offered = ", ".join(sorted(self._to_name)[:20]) or "none"
        raise UnknownToolError(
            f"unknown tool '{wire}'{hint} Available tools: {offered}.", tool_name=wire
        )

    def decode(self, name: str, arguments: dict[str, object]) -> dict[str, object]:
        """A call's arguments under the tool's own names."""
        renamed = self.arguments.get(name)
        return renamed.decode(arguments) if renamed is not None else arguments

    def __contains__(self, wire: object) -> bool:
        return wire in self._to_name

    def __len__(self) -> int:
        return len(self._to_wire)
