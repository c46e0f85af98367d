"""The registry's namespaces as toolregistry keeps them: tools keyed by their qualified names,
the separator, prefixing with the registry's name, merging registries, and the cached set of
namespaces in use (``_sub_registries``)."""

from __future__ import annotations

from typing import Literal

from ...tools.naming import normalize_tool_name
from .tool import Tool

__all__ = ["Namespaces"]

NameSeparator = Literal["-", "."]


class Namespaces:
    """The tools and their namespaces; ``ToolRegistry`` builds on it."""

    name: str

    def __init__(self, name_sep: NameSeparator = "-") -> None:
        if name_sep not in ("-", "."):
            raise ValueError("name_sep must be '-' or '.'")
        self._tools: dict[str, Tool] = {}
        self._sub_registries: set[str] = set()
        self._disabled: dict[str, str] = {}
        self._name_sep: NameSeparator = name_sep

    @property
    def name_sep(self) -> NameSeparator:
        """The separator between a namespace and a method name (``-`` or ``.``)."""
        return self._name_sep

    @name_sep.setter
    def name_sep(self, value: NameSeparator) -> None:
        """Re-key every namespaced tool with the new separator (disabled ones stay disabled).

        Raises:
            ValueError: any other separator, or two tools that would then share a name.
        """
        if value not in ("-", "."):
            raise ValueError("name_sep must be '-' or '.'")
        rekeyed: dict[str, Tool] = {}
        renamed: dict[str, str] = {}
        for old, tool in self._tools.items():
            new = tool.requalify(tool.namespace, value) if tool.namespace else tool
            if new.name in rekeyed:
                raise ValueError(f"Cannot change name_sep: {tool.name!r} would collide with an "
                                 f"existing tool at {new.name!r}.")
            rekeyed[new.name] = new
            renamed[old] = new.name
        self._rekey(renamed)
        self._tools = rekeyed
        self._name_sep = value

    def _rekey(self, renamed: dict[str, str]) -> None:
        """Carry the disabled state of tools whose names changed."""
        for old, new in renamed.items():
            if old != new and old in self._disabled:
                self._disabled[new] = self._disabled.pop(old)

    def _update_sub_registries(self) -> None:
        """Recompute the namespaces in use (a tool's namespace, else its name's prefix)."""
        found: set[str] = set()
        for tool in self._tools.values():
            prefix = tool.namespace or (tool.name.split(self._name_sep, 1)[0]
                                        if self._name_sep in tool.name else None)
            if prefix:
                found.add(prefix)
        self._sub_registries = found

    def _prefix_tools_namespace(self, force: bool = False) -> None:
        """Put every tool into the registry's namespace (``force``: even those in another)."""
        renamed: dict[str, str] = {}
        tools: dict[str, Tool] = {}
        for old, tool in self._tools.items():
            updated = tool.update_namespace(self.name, force=force, sep=self._name_sep)
            tools[updated.name] = updated
            renamed[old] = updated.name
        self._tools = tools
        self._rekey(renamed)

    def merge(self, other: object, keep_existing: bool = False,
              force_namespace: bool = False) -> None:
        """Bring another registry's tools in, each namespaced by its registry's name.

        Raises:
            TypeError: ``other`` is not a registry.
            ValueError: two of its tools would get one name here.
        """
        if not isinstance(other, Namespaces):
            raise TypeError("Can only merge with another ToolRegistry instance.")
        self._prefix_tools_namespace()
        other._prefix_tools_namespace()
        incoming: dict[str, Tool] = {}
        for name, tool in other._tools.items():
            converted = tool.requalify(tool.namespace, self._name_sep) if tool.namespace else tool
            if converted.name in incoming:
                raise ValueError(f"Merge would collapse {name!r} and another tool into "
                                 f"{converted.name!r}; rename one of them first.")
            incoming[converted.name] = converted
            if name in other._disabled:
                self._disabled[converted.name] = other._disabled[name]
        for name, tool in incoming.items():
            if not (keep_existing and name in self._tools):
                self._tools[name] = tool
        if force_namespace:
            self._prefix_tools_namespace(force=True)
        self._update_sub_registries()

    def reduce_namespace(self) -> None:
        """Drop the namespace of every tool when all of them share one."""
        self._update_sub_registries()
        if len(self._sub_registries) != 1:
            return
        tools: dict[str, Tool] = {}
        renamed: dict[str, str] = {}
        for old, tool in self._tools.items():
            flat = tool.requalify(None, self._name_sep)
            tools[flat.name] = flat
            renamed[old] = flat.name
        self._rekey(renamed)
        self._tools = tools
        self._sub_registries = set()

    def _namespace_of(self, namespace: str | None) -> str | None:
        """A namespace as registration uses it (normalized, and remembered as in use)."""
        if not namespace:
            return None
        normalized = normalize_tool_name(namespace)
        self._sub_registries.add(normalized)
        return normalized
