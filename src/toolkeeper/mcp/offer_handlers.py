"""The MCP face's handlers of what a server offers besides tools: prompts, resources,
completion and the log level (``MCPFace`` inherits them; each MCP method a named method)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.context import CALLER_KEY, Caller, ToolContext
from ..errors import ToolkeeperError
from .client_link import InputWanted, Levels, MCPClientLink, answers_of, next_round
from .prompts import PromptNotFound, Prompts
from .resources import ResourceNotFound, Resources

if TYPE_CHECKING:
    import mcp_types as types

    from ..invoke.session import InvokerSession

__all__ = ["MISSING_CAPABILITY", "NO_WAY_BACK", "RESOURCE_NOT_FOUND", "STDIO", "STDIO_CLIENT",
           "OfferHandlers", "caller_of", "client_of", "not_found_code"]

STDIO_CLIENT = "stdio"
"""The client of a server without an HTTP layer naming one: the process that launched it."""
STDIO = Caller(client=STDIO_CLIENT, channel="mcp", via="none")
"""The caller of a server without an HTTP layer naming one: the process that launched it."""


class OfferHandlers:
    """Prompts, resources, completion, logging level: what ``MCPFace`` serves beside tools."""

    prompts: Prompts
    resources: Resources
    levels: Levels
    subscribed: dict[str, set[str]]

    def session_for(self, ctx: Any) -> InvokerSession:
        raise NotImplementedError

    async def list_prompts(self, _ctx: object, _params: object) -> types.ListPromptsResult:
        import mcp_types as types

        return types.ListPromptsResult.model_validate({"prompts": self.prompts.listing()})

    async def get_prompt(self, ctx: Any, params: types.GetPromptRequestParams
                         ) -> types.GetPromptResult | types.InputRequiredResult:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        answers = answers_of(params) if str(getattr(ctx, "protocol_version", "")) >= "2026" \
            else {}
        link = MCPClientLink(ctx, client=client_of(ctx), levels=self.levels, audit=None,
                             call_id="", tool=f"prompt {params.name}", session_id="",
                             answers=answers)
        asking = ToolContext(tool_name=params.name, caller=caller_of(ctx), client=link)
        try:
            found = await self.prompts.get(params.name, params.arguments or {}, asking)
        except InputWanted:
            return next_round(link.asked, answers)
        except (PromptNotFound, ToolkeeperError) as exc:
            if link.unreachable:
                raise MCPError(code=NO_WAY_BACK, message=link.unreachable) from exc
            if link.missing:
                raise MCPError(code=MISSING_CAPABILITY, message=str(exc),
                               data={"requiredCapabilities": link.missing}) from exc
            raise MCPError(code=-32602, message=str(exc).strip("'\"")) from exc
        return types.GetPromptResult.model_validate(found)

    async def list_resources(self, ctx: Any, _params: object) -> types.ListResourcesResult:
        import mcp_types as types

        listed = self.resources.listing(self.session_for(ctx).artifacts)
        return types.ListResourcesResult.model_validate({"resources": listed})

    async def list_resource_templates(self, _ctx: object, _params: object
                                      ) -> types.ListResourceTemplatesResult:
        import mcp_types as types

        listed = self.resources.template_listing()
        return types.ListResourceTemplatesResult.model_validate({"resourceTemplates": listed})

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        uri = str(params.uri)
        try:
            content = await self.resources.read(uri, self.session_for(ctx).artifacts)
        except ResourceNotFound as exc:
            raise MCPError(code=not_found_code(ctx), message=f"no resource {uri!r}: list "
                           "them with resources/list", data={"uri": uri}) from exc
        return types.ReadResourceResult.model_validate({"contents": [content]})

    async def subscribe(self, ctx: Any, params: Any) -> types.EmptyResult:
        import mcp_types as types

        self.subscribed.setdefault(client_of(ctx), set()).add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Any, params: Any) -> types.EmptyResult:
        import mcp_types as types

        self.subscribed.get(client_of(ctx), set()).discard(str(params.uri))
        return types.EmptyResult()

    async def complete(self, _ctx: object, params: types.CompleteRequestParams
                       ) -> types.CompleteResult:
        import mcp_types as types

        ref, argument = params.ref, params.argument
        if getattr(ref, "type", "") == "ref/prompt":
            values = self.prompts.complete(str(getattr(ref, "name", "")), argument.name,
                                           argument.value)
        else:
            values = self.resources.complete(str(getattr(ref, "uri", "")), argument.name,
                                             argument.value)
        return types.CompleteResult(completion=types.Completion(
            values=values, total=len(values), has_more=False))

    async def set_level(self, ctx: Any, params: Any) -> types.EmptyResult:
        import mcp_types as types

        self.levels.set(client_of(ctx), params.level)
        return types.EmptyResult()


RESOURCE_NOT_FOUND = -32002
"""MCP's error code for a resource that is not there (or not this client's), up to the
2025-11-25 revision; from 2026-07-28 on it is invalid params (``not_found_code``)."""
INVALID_PARAMS = -32602
MISSING_CAPABILITY = -32021
"""MCP's error code for a request that needs a capability the client did not declare."""
NO_WAY_BACK = -32600
"""JSON-RPC's invalid request: one that needs to ask the client on a connection that cannot
carry a request back to it (the SDK's ``NoBackChannelError`` answers the same)."""


def caller_of(ctx: Any) -> Caller:
    request = getattr(ctx, "request", None)
    found = getattr(request, "scope", {}).get("state", {}).get(CALLER_KEY)
    return found if isinstance(found, Caller) else STDIO


def client_of(ctx: Any) -> str:
    return caller_of(ctx).client


def not_found_code(ctx: Any) -> int:
    """The code answering a read of a resource that is not there, as the revision the session
    negotiated says: -32602 (invalid params) from 2026-07-28 on, -32002 before."""
    modern = str(getattr(ctx, "protocol_version", "")) >= "2026"
    return INVALID_PARAMS if modern else RESOURCE_NOT_FOUND
