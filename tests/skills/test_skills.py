"""Skills load from SKILL.md folders, restrict the tools, and report bad files with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper import Tool, UnknownToolError
from toolkeeper.skills import Skill, SkillError, load_skill, load_skills, read_skill_tool
from toolkeeper.toolbox import Toolbox

GOOD = """---
name: release-notes
description: Write release notes from merged changes
allowed-tools: git_log, file_write
version: 2.1.0
---
# Release notes

Read the log since the last tag, then write NOTES.md.
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


def toolbox() -> Toolbox:
    return Toolbox([Tool.from_function(lambda: "log", name="git_log", description="Git log"),
                    Tool.from_function(lambda: "ok", name="file_write", description="Write"),
                    Tool.from_function(lambda: "rm", name="shell", description="Run a command")])


def test_a_skill_file_loads_with_its_fields(tmp_path: Path) -> None:
    skill = load_skill(write(tmp_path, "notes", GOOD))
    assert skill == Skill(name="release-notes", description="Write release notes from merged changes",
                          allowed_tools=("git_log", "file_write"), version="2.1.0",
                          instructions="# Release notes\n\nRead the log since the last tag, then "
                          "write NOTES.md.", path=str(tmp_path / "notes" / "SKILL.md"))


def test_applying_a_skill_restricts_the_tools_and_refuses_others_naming_it(tmp_path: Path) -> None:
    write(tmp_path, "notes", GOOD)
    (skill,) = load_skills(tmp_path, known_tools=toolbox().names())
    view = toolbox().with_skill(skill)
    assert view.names() == ["git_log", "file_write"]
    assert view.execute_tool("git_log") == "log"
    with pytest.raises(UnknownToolError, match="not available while skill 'release-notes' is "
                                               "active"):
        view.execute_tool("shell")
    assert view.instructions.startswith("## Skill: release-notes")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# no front matter\n", r"SKILL.md:1: no front matter"),
        ("---\nname: [unclosed\n---\nbody", r"SKILL.md:\d+: front matter is not valid YAML"),
        ("---\ndescription: nameless\n---\nbody", r"SKILL.md:2: front matter needs a 'name'"),
        ("---\nname: x\nallowed-tools: 5\n---\nbody", r"SKILL.md:3: allowed-tools must be a list"),
    ],
)
def test_bad_skill_files_name_the_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    write(tmp_path, "bad", text)
    with pytest.raises(SkillError, match=message):
        load_skills(tmp_path)


def test_unknown_allowed_tools_and_duplicate_names_are_errors(tmp_path: Path) -> None:
    write(tmp_path, "a", GOOD.replace("file_write", "file_delete"))
    with pytest.raises(SkillError, match=r"a/SKILL.md:4: skill 'release-notes' allows unknown "
                                         r"tool 'file_delete'"):
        load_skills(tmp_path, known_tools=toolbox().names())
    other = tmp_path / "other"
    other.mkdir()
    write(other, "one", GOOD)
    write(other, "two", GOOD)
    with pytest.raises(SkillError, match="is already used by"):
        load_skills(other)


def test_read_skill_returns_the_full_text_on_demand(tmp_path: Path) -> None:
    skill = load_skill(write(tmp_path, "notes", GOOD))
    reader = read_skill_tool([skill])
    assert reader.parameters["properties"]["name"]["enum"] == ["release-notes"]
    assert "Read the log since the last tag" in str(reader.run_raw({"name": "release-notes"}))
    with pytest.warns(DeprecationWarning, match="run_raw"):
        assert "must be one of 'release-notes', got 'nope'" in str(reader.run({"name": "nope"}))
