"""Built-in tools under a ``SecurityPolicy``: shell, files, search, calculator.

``default_tools(policy)`` is the minimal set a coding agent needs: shell, file_read, file_write,
file_edit, glob_search, content_search and semantic_code_search.
"""

from __future__ import annotations

from ..sandbox import SandboxReport, probe
from ..tools.tool import Tool
from .calculator import calculator_tool
from .code_search import code_search_tool
from .files import file_tools
from .policy import SecurityPolicy
from .search import search_tools
from .shell import shell_tool

__all__ = ["SandboxReport", "SecurityPolicy", "calculator_tool", "default_tools", "probe"]


def default_tools(policy: SecurityPolicy) -> list[Tool]:
    """The seven minimal tools, each bound to ``policy`` (whose workspace must exist)."""
    policy.require_workspace()
    return [shell_tool(policy), *file_tools(policy), *search_tools(policy),
            code_search_tool(policy)]
