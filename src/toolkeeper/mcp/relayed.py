"""The gateway's resources and prompts as handlers of the SDK's low-level ``Server``: what an MCP
server of ours answers for ``toolkeeper://mcp/…`` resources and upstream prompts.

Each handler answers from the gateway's sources alone; a server that serves resources and
prompts of its own merges the listings and routes a read, get, subscription or completion here
when ``sources.serves_resource(uri)`` / ``sources.serves_prompt(name)`` says so. A URI or prompt
the gateway does not serve, or holds, is a protocol error with the source's code and reason; an
upstream that fails is an internal error saying which and why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..gateway.sources import (
    RESOURCE_NOT_FOUND,
    CompletionSource,
    NotServed,
    PromptSource,
    ResourceSource,
)
from ..gateway.upstream import UpstreamError
from .offer_handlers import not_found_code
from .relay_link import SdkClientLink

if TYPE_CHECKING:
    import mcp_types as types

__all__ = ["RelayedHandlers"]

T = TypeVar("T")
INTERNAL_ERROR = -32603


class Sources(ResourceSource, PromptSource, CompletionSource, Protocol):
    """What the handlers need: the gateway's ``sources`` is all three."""


async def _answered(send: Awaitable[T]) -> T:
    """A source's answer, its refusals as MCP errors."""
    from mcp.shared.exceptions import MCPError

    try:
        return await send
    except NotServed as exc:
        raise MCPError(code=exc.code, message=str(exc)) from exc
    except UpstreamError as exc:
        raise MCPError(code=INTERNAL_ERROR, message=str(exc)) from exc


class RelayedHandlers:
    """``on_list_resources``, ``on_read_resource``, … of the gateway's sources; ``client_of``
    names the client of a request (whose link a subscription keeps)."""

    def __init__(self, sources: Sources, client_of: Callable[[Any], str]) -> None:
        self.sources = sources
        self.client_of = client_of

    def handlers(self) -> dict[str, Any]:
        """The keyword arguments of ``Server(...)`` these handlers fill."""
        return {"on_list_resources": self.list_resources,
                "on_list_resource_templates": self.list_resource_templates,
                "on_read_resource": self.read_resource,
                "on_subscribe_resource": self.subscribe,
                "on_unsubscribe_resource": self.unsubscribe,
                "on_list_prompts": self.list_prompts, "on_get_prompt": self.get_prompt,
                "on_completion": self.complete}

    async def list_resources(self, _ctx: object, _params: object) -> types.ListResourcesResult:
        import mcp_types as types

        return types.ListResourcesResult(resources=await self.sources.list_resources())

    async def list_resource_templates(self, _ctx: object, _params: object
                                      ) -> types.ListResourceTemplatesResult:
        import mcp_types as types

        return types.ListResourceTemplatesResult(
            resource_templates=await self.sources.list_resource_templates())

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult:
        from mcp.shared.exceptions import MCPError

        uri = str(params.uri)
        try:
            return await _answered(self.sources.read_resource(uri))
        except MCPError as exc:  # not there: the code the session's revision says
            if exc.code != RESOURCE_NOT_FOUND:
                raise
            raise MCPError(code=not_found_code(ctx), message=exc.message,
                           data={"uri": uri}) from exc

    async def subscribe(self, ctx: Any, params: Any) -> types.EmptyResult:
        import mcp_types as types

        link = SdkClientLink(ctx, self.client_of(ctx))
        await _answered(self.sources.subscribe(str(params.uri), link))
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Any, params: Any) -> types.EmptyResult:
        import mcp_types as types

        link = SdkClientLink(ctx, self.client_of(ctx))
        await _answered(self.sources.unsubscribe(str(params.uri), link))
        return types.EmptyResult()

    async def list_prompts(self, _ctx: object, _params: object) -> types.ListPromptsResult:
        import mcp_types as types

        return types.ListPromptsResult(prompts=await self.sources.list_prompts())

    async def get_prompt(self, _ctx: object, params: types.GetPromptRequestParams
                         ) -> types.GetPromptResult:
        return await _answered(self.sources.get_prompt(params.name, params.arguments))

    async def complete(self, _ctx: object, params: types.CompleteRequestParams
                       ) -> types.CompleteResult:
        import mcp_types as types

        found = await _answered(self.sources.complete(params.ref, params.argument,
                                                      params.context))
        return types.CompleteResult(completion=found or types.Completion(values=[]))
