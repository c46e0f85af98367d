"""Upstream tool names that cannot be served: one whose name on some provider's wire could be
another tool's (names that do not fit a wire are sanitised and suffixed with a hash, so an
upstream that also lists the sanitised forms makes every export of the catalog fail), and one
with the qualified name of a tool that is already there (it would replace it)."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from ..formats.names import name_rule, wire_name

__all__ = ["WIRE_FORMATS", "shadowing", "wire_clashes"]

WIRE_FORMATS = ("mcp", "openai-chat", "openai-responses", "anthropic", "gemini")
"""The formats whose name rules an upstream's tool names must survive."""


def wire_clashes(names: Collection[str], others: Iterable[str]) -> dict[str, str]:
    """Each of ``names`` whose name on a wire (either form a wire table may give it) could be
    that of another tool (of ``names`` or ``others``), with the reason. Order-independent: every
    name of a colliding group is named, not the last one listed."""
    others = [n for n in others if n not in names]
    clashes: dict[str, str] = {}
    for api_format in WIRE_FORMATS:
        if name_rule(api_format) is None:
            continue
        owners: dict[str, set[str]] = {}
        for name in [*others, *names]:
            for wire in {wire_name(name, api_format), wire_name(name, api_format, hash_len=16)}:
                owners.setdefault(wire, set()).add(name)
        for wire, group in owners.items():
            if len(group) < 2:
                continue
            for name in sorted(group & set(names)):
                if name not in clashes:
                    also = ", ".join(f"'{n}'" for n in sorted(group - {name}))
                    clashes[name] = (f"its wire name in {api_format} ('{wire}') is also that of "
                                     f"{also}; the upstream must rename one of them")
    return clashes


def shadowing(names: Iterable[str], local: Collection[str]) -> dict[str, str]:
    """Each of ``names`` that is already the name of a tool not from this upstream."""
    return {name: ("a local tool already has this name; the local tool stays, so the "
                   "upstream's is not served (rename the local tool or the server)")
            for name in names if name in local}
