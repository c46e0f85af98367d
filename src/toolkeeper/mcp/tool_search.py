"""``serve --tool-search``: fewer tools in the model's context.

``tools/list`` offers ``tool_search`` and the tools the client has loaded, not the whole
catalog: a gateway of 500 tools costs its model the declarations of a few. The search is the
catalog's own (``search_keys``: BM25 over names, descriptions and tags, fuzzy names, boosts);
the tools it finds are loaded for the client that searched — listed from then on, and that
client told (``notifications/tools/list_changed``) — and their declarations are in the result
too, for a client that does not list again.

Loading changes what is listed, never what may run: a call of a tool not loaded yet is
answered like any other call (the door's policy, approval and the caller's scopes decide), as
a model that knows a name from an earlier conversation may make it. The search is a tool like
the others: one pass through the door, audited, refused where policy refuses it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio.to_thread

from ..core.context import Caller, ToolContext
from ..core.json import JsonObject
from ..core.metadata import ToolMetadata
from ..core.risk import ToolRisk
from ..errors import UsageError
from ..toolbox.catalog import CatalogBase
from ..toolbox.deferred import TOOL_SEARCH
from ..toolbox.toolbox import Toolbox
from ..tools.tool import Tool
from .exported import Exported

__all__ = ["MAX_FOUND", "TOOL_SEARCH", "ToolSearch"]

MAX_FOUND = 20
"""The most tools one search loads, whatever ``limit`` the model asks for."""


class ToolSearch:
    """The search tool of one MCP face and the tools each client loaded with it.

    ``catalog``: the door's toolbox, to which the search tool is added (a name already taken
    is refused); ``exported``: the face's MCP export (the wire names and declarations a
    client sees); ``tell``: told the client's name when it loaded tools, to announce the
    change to it. The loaded sets live in this process, by client name (a token's name;
    ``stdio`` over stdio): two connections of one token share theirs."""

    def __init__(self, catalog: CatalogBase, exported: Exported,
                 tell: Callable[[str], Awaitable[None]], *, limit: int = 5) -> None:
        if not isinstance(catalog, Toolbox):
            raise UsageError("tool search adds its tool to the door's catalog, which must be a "
                             f"Toolbox (got {type(catalog).__name__})")
        if catalog.entry(TOOL_SEARCH) is not None:
            raise UsageError(f"a tool named {TOOL_SEARCH!r} is already served, and tool search "
                             "adds its own under that name: rename that tool, or serve "
                             "without --tool-search")
        self.exported, self.tell, self.limit = exported, tell, limit
        self.catalog: Toolbox = catalog
        self.loaded: dict[str, set[str]] = {}
        self.tool = Tool.from_function(
            self.search, name=TOOL_SEARCH, risk=ToolRisk.SAFE,
            metadata=ToolMetadata(tags=frozenset({"meta"}), read_only_hint=True,
                                  category="system"))
        catalog.add(self.tool)

    async def search(self, query: str, ctx: ToolContext, limit: int | None = None
                     ) -> JsonObject:
        """Find tools by what they do and load them: the tools found are listed from now on
        and can be called by the names returned. Only a few tools are listed until you
        search; search again with other words when none fits.

        Args:
            query: What you need a tool for, in plain words (e.g. "open a pull request").
            limit: How many tools to load at most (default 5, at most 20).
        """
        caller = ctx.caller
        wanted = min(max(limit or self.limit, 1), MAX_FOUND)
        # an export and a search (a model's forward pass with semantic search) are CPU work:
        # in a worker thread, never on the event loop where other clients are answered
        declared, found = await anyio.to_thread.run_sync(self._find, query, wanted, caller)
        mine = self.loaded.setdefault(caller.client, set())
        new = [key for key in found if key not in mine]
        mine.update(found)
        if new:  # the client's list changed: it is told, and lists again
            await self.tell(caller.client)
        return {"tools": [declared[key] for key in found],
                "note": "These tools are loaded: call them by these names." if found else
                f"No tool matches {query!r}; search again with other words (what the tool "
                "does, or part of its name)."}

    def _find(self, query: str, limit: int, caller: Caller
              ) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """(the offered tools' MCP declarations by catalog name, the names of those that
        ``query`` finds which ``caller`` may use, best first)."""
        exported = self.exported.of()
        declared = {exported.names.name(str(d["name"])): dict(d) for d in exported.declarations}
        hits = self.catalog.search_keys(
            query, limit=limit,
            allowed=lambda key: key in declared and key != TOOL_SEARCH and caller.may_use(key))
        return declared, [key for key, _, _ in hits]

    def shown(self, client: str, name: str) -> bool:
        """Whether ``client``'s ``tools/list`` shows the tool ``name``: the search tool, and
        what it loaded."""
        return name == TOOL_SEARCH or name in self.loaded.get(client, ())

    def narrow(self, client: str, declarations: list[dict[str, Any]], names: list[str]
               ) -> tuple[list[dict[str, Any]], list[str]]:
        """A listing (declarations and their wire names, in name order) as ``client`` sees it
        under tool search."""
        table = self.exported.current.names
        kept = [i for i, wire in enumerate(names)
                if wire in table and self.shown(client, table.name(wire))]
        return [declarations[i] for i in kept], [names[i] for i in kept]
