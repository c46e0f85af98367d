"""Skills: prompt packages that restrict the tools (``SKILL.md`` folders)."""

from .loader import SkillError, load_skill, load_skills
from .skill import Skill
from .view import SkillView, read_skill_tool

__all__ = ["Skill", "SkillError", "SkillView", "load_skill", "load_skills", "read_skill_tool"]
