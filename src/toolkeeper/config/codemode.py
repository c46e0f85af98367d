"""``[codemode]`` of ``toolkeeper.toml``: whether ``serve`` offers ``tool_chain`` and how."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CodeModeSection"]


class CodeModeSection(BaseModel):
    """``[codemode]``: offer ``tool_chain``, a tool that runs a model-written Python script in
    the OS sandbox, every call of which goes through the same door as a direct call."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    tools: list[str] | None = None
    """The tools a script may call (default: every served tool but hosted ones)."""
    workspace: Literal["none", "read", "write"] = "none"
    """Whether scripts see ``security.workspace``: not at all, read-only, or read-write."""
    warm: int | None = Field(default=None, ge=0, le=16)
    """Sandboxes kept started ahead of runs (each serves one run, a start of a few
    milliseconds instead of tens); default 1, but 0 with ``workspace = "write"`` (a script's
    copy-on-write view of the workspace is made when its sandbox starts)."""
    max_tool_calls: int = Field(default=50, ge=0)
    total_timeout_s: float = Field(default=120.0, gt=0, le=3600)
    max_runs: int = Field(default=8, ge=1, le=1024)
    """Scripts run at once (in each ``serve`` process); one more waits up to 30 s for a
    place, then is refused."""
    max_runs_per_client: int = Field(default=4, ge=1, le=1024)
    """Of those, how many one client may have running."""

    @property
    def warm_sandboxes(self) -> int:
        """``warm`` with its default resolved."""
        return self.warm if self.warm is not None else int(self.workspace != "write")
