"""A tool of an upstream MCP server, as an ordinary tool of the catalog: the invoker governs it
like any other (the one door), and its callable relays the call — with the calling client's
progress token, and registered with the relay while it waits, so what the upstream says or asks
meanwhile reaches that client."""

from typing import Any

from ..core.context import ToolContext
from ..core.metadata import ToolMetadata
from ..core.results import ToolResult
from ..core.risk import ToolRisk
from ..formats.mcp import tool_result_from_mcp
from ..tools.base import BaseTool
from .relay import InFlight, Relay, current_client
from .untrusted import scrubbed
from .upstream import Upstream, UpstreamError

__all__ = ["RemoteTool"]


class RemoteTool(BaseTool):
    """Tool ``remote`` of ``upstream``, served as ``name`` (``SERVER-remote``)."""

    def __init__(self, upstream: Upstream, relay: Relay, *, name: str, remote: str,
                 declaration: dict[str, Any], risk: ToolRisk) -> None:
        config = upstream.config
        annotations = declaration.get("annotations") or {}
        metadata = ToolMetadata(
            title=declaration.get("title") or annotations.get("title"), source="mcp",
            tags=frozenset({"mcp"}), timeout=config.call_timeout_s,
            read_only_hint=annotations.get("readOnlyHint"),
            destructive_hint=annotations.get("destructiveHint"),
            idempotent_hint=annotations.get("idempotentHint"),
            open_world_hint=annotations.get("openWorldHint"),
            extra={"mcp_server": config.name, "mcp_tool": remote})
        super().__init__(name, str(declaration.get("description") or ""),
                         declaration.get("inputSchema") or {"type": "object"},
                         metadata=metadata, namespace=config.name, risk=risk,
                         hitl_mode=config.hitl_mode,
                         output_schema=declaration.get("outputSchema"))
        self.__dict__["_relayed"] = (upstream, relay, remote)

    # BaseTool's contract (arguments as keywords, the context found by its type); the context's
    # name is one no upstream's argument takes.
    async def execute(self, _toolkeeper_ctx: ToolContext,  # type: ignore[override]
                      **arguments: Any) -> ToolResult:
        ctx = _toolkeeper_ctx
        upstream, relay, remote = self.__dict__["_relayed"]
        link = current_client()
        waiting = InFlight(call_id=ctx.call_id, session_id=ctx.session_id or "",
                           tool=self.name, link=link)

        async def progress(done: float, total: float | None, message: str | None) -> None:
            await ctx.report_progress(done, total, message)

        # no progress asked of the upstream when nobody hears it (the call may then take the
        # lean path: nothing but its answer to wait for)
        heard = ctx.progress_sink is not None and (link is None or link.hears_progress)
        try:
            with relay.relaying(upstream.name, waiting):
                result = await upstream.call(remote, arguments, progress if heard else None)
        except UpstreamError as exc:
            return ToolResult.error(str(exc), code="upstream_unavailable")
        # its text with lone surrogates replaced: what an upstream says is untrusted
        return tool_result_from_mcp(scrubbed(result.model_dump(by_alias=True,
                                                               exclude_none=True)))
