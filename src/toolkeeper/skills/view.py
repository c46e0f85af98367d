"""The ``read_skill`` tool (a skill's text on demand). Applying a skill is
``catalog.with_skill(skill)``, a ``SkillView`` (defined with the catalog, re-exported here)."""

from __future__ import annotations

from collections.abc import Iterable

from ..core.metadata import ToolMetadata
from ..errors import UnknownToolError
from ..toolbox.catalog import SkillView
from ..tools.tool import Tool
from .skill import Skill

__all__ = ["SkillView", "read_skill_tool"]


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
        metadata=ToolMetadata(read_only_hint=True, tags=frozenset({"meta"}),
                              extra={"i18n": {"args": {"skills": listing}}}),
    )

