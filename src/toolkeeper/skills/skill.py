"""``Skill``: a prompt package — instructions plus the tools they may use."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Skill"]


@dataclass(frozen=True, kw_only=True)
class Skill:
    """Instructions for the system prompt and the tools they are restricted to.

    Attributes:
        name: Unique skill name.
        instructions: Text appended to the system prompt while the skill is active.
        description: Short explanation of what the skill is for.
        allowed_tools: The only tools usable while the skill is active (empty: no tools).
        path: The file the skill was loaded from, if any.
        version: Version string.
        arguments: Names a client fills in when it gets the skill as an MCP prompt: each
            ``{name}`` in the instructions is replaced by its value.
    """

    name: str
    instructions: str
    description: str = ""
    allowed_tools: tuple[str, ...] = ()
    path: str | None = None
    version: str = "1.0.0"
    arguments: tuple[str, ...] = ()

    def prompt(self) -> str:
        """The block to append to a system prompt."""
        header = f"## Skill: {self.name}"
        if self.description:
            header += f"\n{self.description}"
        return f"{header}\n\n{self.instructions.strip()}\n"
