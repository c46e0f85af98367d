"""Applying a skill: a view restricted to its allowed tools, and the ``read_skill`` tool."""

from __future__ import annotations

from collections.abc import Iterable

from ..core.metadata import ToolMetadata
from ..errors import UnknownToolError
from ..toolbox.catalog import CatalogBase, register_view
from ..toolbox.entry import CatalogEntry
from ..toolbox.views import View
from ..tools.tool import Tool
from .skill import Skill

__all__ = ["SkillView", "read_skill_tool"]


class SkillView(View):
    """Only the skill's allowed tools; a call to any other is refused naming the skill."""

    def __init__(self, inner: CatalogBase, skill: Skill) -> None:
        super().__init__(inner)
        self.skill = skill
        self._allowed = frozenset(skill.allowed_tools)

    def show(self, entry: CatalogEntry) -> CatalogEntry | None:
        names = {entry.name, entry.tool.name, *entry.aliases}
        return entry if names & self._allowed else None

    @property
    def instructions(self) -> str:
        """What to append to the system prompt while the skill is active."""
        return self.skill.prompt()

    def unknown(self, name: str) -> UnknownToolError:
        allowed = ", ".join(sorted(self._allowed)) or "no tools"
        if self.inner.get(name) is not None:
            return UnknownToolError(
                f"tool '{name}' is not available while skill '{self.skill.name}' is active "
                f"(it allows: {allowed})", tool_name=name, details={"skill": self.skill.name})
        return UnknownToolError(f"unknown tool '{name}' (skill '{self.skill.name}' allows: "
                                f"{allowed})", tool_name=name)


def read_skill_tool(skills: Iterable[Skill]) -> Tool:
    """A ``read_skill`` tool returning a skill's full text on demand (the "compact" mode)."""
    by_name = {s.name: s for s in skills}
    listing = "; ".join(f"{s.name}: {s.description}" for s in by_name.values())

    def read_skill(name: str) -> str:
        skill = by_name.get(name)
        if skill is None:
            raise UnknownToolError(f"no skill named '{name}'; available: {', '.join(by_name)}")
        return skill.prompt()

    return Tool(
        name="read_skill",
        description=f"Read the full instructions of a skill before using it. Skills: {listing}",
        parameters={"type": "object", "properties": {"name": {
            "type": "string", "enum": sorted(by_name), "description": "The skill to read."}},
            "required": ["name"]},
        callable=read_skill,
        metadata=ToolMetadata(read_only_hint=True, tags=frozenset({"meta"})),
    )


register_view("with_skill", SkillView)
