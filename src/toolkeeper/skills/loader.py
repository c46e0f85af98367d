"""Load skills from a folder of ``SKILL.md`` files (YAML front matter + instructions)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from ..errors import ConfigError
from ..extras import missing
from .skill import Skill

__all__ = ["SkillError", "load_skill", "load_skills"]

_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)


class SkillError(ConfigError):
    """A skill file is malformed; the message names the file and line."""


def _line_of(text: str, needle: str, default: int = 1) -> int:
    index = text.find(needle)
    return text.count("\n", 0, index) + 1 if index >= 0 else default


def _tools(value: object, where: str, what: str = "allowed-tools") -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(t for t in re.split(r"[,\s]+", value) if t)
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return tuple(value)
    raise SkillError(f"{where}: {what} must be a list of names or a comma-separated string, "
                     f"got {type(value).__name__}")


def load_skill(path: str | Path) -> Skill:
    """Read one ``SKILL.md``.

    Raises:
        SkillError: no front matter, invalid YAML, or a missing/invalid field (file and line).
    """
    file = Path(path)
    text = file.read_text(encoding="utf-8")
    match = _FRONT.match(text)
    if match is None:
        raise SkillError(f"{file}:1: no front matter; start the file with '---', the YAML "
                         "fields (name, description, allowed-tools, version) and '---'")
    try:
        import yaml
    except ImportError as exc:
        raise missing("skills", "loading a SKILL.md") from exc
    try:
        meta = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", 0) + 2
        raise SkillError(f"{file}:{line}: front matter is not valid YAML: {exc}") from exc
    if not isinstance(meta, dict):
        raise SkillError(f"{file}:2: front matter must be a mapping of fields")
    name = meta.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SkillError(f"{file}:2: front matter needs a 'name'")
    where = f"{file}:{_line_of(text, 'allowed-tools')}"
    return Skill(
        name=name.strip(),
        instructions=text[match.end():].strip(),
        description=str(meta.get("description") or ""),
        allowed_tools=_tools(meta.get("allowed-tools", meta.get("allowed_tools")), where),
        path=str(file),
        version=str(meta.get("version") or "1.0.0"),
        arguments=_tools(meta.get("arguments"), f"{file}:{_line_of(text, 'arguments')}",
                         what="arguments"),
    )


def load_skills(folder: str | Path, *, known_tools: Iterable[str] | None = None) -> list[Skill]:
    """Every ``SKILL.md`` under ``folder`` (one per skill directory), sorted by name.

    With ``known_tools``, an allowed tool that is not among them is an error naming the file
    and line. Two skills with the same name are an error naming both files.
    """
    root = Path(folder)
    if not root.is_dir():
        raise SkillError(f"{root}: not a folder of skills")
    skills: dict[str, Skill] = {}
    known = set(known_tools) if known_tools is not None else None
    for file in sorted(root.rglob("SKILL.md")):
        skill = load_skill(file)
        if skill.name in skills:
            raise SkillError(f"{file}:2: skill name '{skill.name}' is already used by "
                             f"{skills[skill.name].path}")
        if known is not None:
            _check_tools(file, skill, known)
        skills[skill.name] = skill
    return [skills[name] for name in sorted(skills)]


def _check_tools(file: Path, skill: Skill, known: set[str]) -> None:
    text = file.read_text(encoding="utf-8")
    for tool_name in skill.allowed_tools:
        if tool_name not in known:
            line = _line_of(text, tool_name, _line_of(text, "allowed-tools"))
            raise SkillError(f"{file}:{line}: skill '{skill.name}' allows unknown tool "
                             f"'{tool_name}' (known tools: {', '.join(sorted(known)) or 'none'})")
