"""``ToolRegistry``: the catalog under the name toolregistry programs import, with that
library's registry surface (``register``, ``list_tools``, ``get_schemas``, ``execute_tool``,
``execute_tool_calls``), offering ``toolcall_reason`` by default.

The default is this class's own: a ``Toolbox``, ``export`` and ``Tool.get_schema`` leave the
argument out unless a tool (or the caller) asks for it, so the declarations every other user
sends do not change.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..core.json import JsonObject
from ..core.spec import ToolLike
from ..formats import export
from ..tools.tool import Tool
from .search import SearchOptions
from .toolbox import OnConflict, Toolbox

__all__ = ["ToolRegistry"]


class ToolRegistry(Toolbox):
    """The catalog under toolregistry's name: a ``Toolbox`` whose ``get_schemas`` adds the
    ``toolcall_reason`` argument ("why you chose this tool") unless told not to.

    Which value applies to a tool: its own ``metadata.think_augment`` when set, else the
    ``think_augment`` given to ``get_schemas``, else the registry's (``True`` unless built with
    ``think_augment=False`` or turned off with ``disable_think_augment``). The argument is
    stripped from a call's arguments before the tool runs.
    """

    def __init__(
        self, tools: Iterable[object] = (), *, think_augment: bool = True,
        on_conflict: OnConflict = "replace", search: SearchOptions | None = None,
    ) -> None:
        super().__init__(tools, on_conflict=on_conflict, search=search)
        self.think_augment = think_augment

    def enable_think_augment(self) -> None:
        """Offer ``toolcall_reason`` on every tool that does not say otherwise."""
        self.think_augment = True

    def disable_think_augment(self) -> None:
        """Offer ``toolcall_reason`` only on tools whose metadata asks for it."""
        self.think_augment = False

    def list_tools(self) -> list[str]:
        """The names of the enabled tools, in order."""
        return self.names()

    def get_schemas(self, api_format: str = "openai-chat", think_augment: bool | None = None,
                    *, strict: bool = False) -> list[JsonObject]:
        """Declarations of the offered tools in ``api_format``, with ``toolcall_reason`` as the
        class docstring says."""
        default = self.think_augment if think_augment is None else think_augment
        tools = [_thinking(tool, default) for tool in self.offered()]
        return export(tools, api_format, strict=strict).declarations


def _thinking(tool: ToolLike, default: bool) -> ToolLike:
    """``tool`` with ``default`` as its think_augment when it sets none itself."""
    if not isinstance(tool, Tool) or tool.metadata.think_augment is not None or not default:
        return tool
    return tool.replace(metadata=tool.metadata.model_copy(update={"think_augment": True}))
