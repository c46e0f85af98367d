"""Our MCP server's side of the gateway's relay: a ``RelayLink`` made from the SDK's request
context (what the gateway needs of the client that sent a request) and a ``ClientHub`` of the
clients seen so far (what concerns them all).

The server runs each ``tools/call`` inside ``calling_client(SdkClientLink(ctx, client))``: a
relayed tool call then reports the upstream's log lines and asks its sampling and elicitation
requests on that very request, which on Streamable HTTP rides the request's own response stream.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..gateway.relay import Asked

if TYPE_CHECKING:
    import mcp_types as types

__all__ = ["SdkClientLink", "SessionHub"]


@contextmanager
def _current() -> Iterator[None]:
    """Logging is deprecated in the 2026-07-28 revision and current before it: the SDK's
    warning about it is not news to an operator."""
    from mcp.shared.exceptions import MCPDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


class SdkClientLink:
    """A ``RelayLink`` over one request of the SDK's low-level server (``ctx``)."""

    def __init__(self, ctx: Any, client: str) -> None:
        self.ctx = ctx
        self._client = client

    @property
    def client(self) -> str:
        return self._client

    def can(self, asked: Asked) -> bool:
        import mcp_types as types

        session = self.ctx.session
        wanted = (types.ClientCapabilities(sampling=types.SamplingCapability())
                  if asked == "sampling"
                  else types.ClientCapabilities(elicitation=types.ElicitationCapability()))
        return bool(session.can_send_request and session.check_client_capability(wanted))

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        # The SDK's own gate: on a 2026-07-28 session only a request that opted in hears logs.
        with _current():
            await self.ctx.session.send_log_message(level, data, logger,
                                                    related_request_id=self.ctx.request_id)

    async def forward_sampling(self, params: types.CreateMessageRequestParams) -> Any:
        import mcp_types as types

        result = (types.CreateMessageResultWithTools if params.tools
                  else types.CreateMessageResult)
        return await self._send(types.CreateMessageRequest(params=params), result)

    async def forward_elicitation(self, params: types.ElicitRequestParams) -> Any:
        import mcp_types as types

        return await self._send(types.ElicitRequest(params=params), types.ElicitResult)

    async def _send(self, request: Any, result: Any) -> Any:
        from mcp.shared.message import ServerMessageMetadata

        return await self.ctx.session.send_request(
            request, result, metadata=ServerMessageMetadata(related_request_id=self.ctx.request_id))

    async def resource_updated(self, uri: str) -> None:
        await self.ctx.session.send_resource_updated(uri)


class SessionHub:
    """Every client connection seen by ``remember`` (stdio and stateful HTTP keep theirs):
    what concerns them all goes to each on its own channel."""

    def __init__(self) -> None:
        self._kept: dict[str, Any] = {}
        self.bus: Any = None
        """The server's ``subscriptions/listen`` bus: 2026-07-28 clients hear changes there."""

    def remember(self, ctx: Any, client: str) -> None:
        """Keep the connection of a request's client (the last one per client)."""
        session = getattr(ctx, "session", None)
        if session is not None:
            self._kept[client] = session

    async def _each(self, send: Any) -> None:
        for client, session in list(self._kept.items()):
            try:
                await send(session)
            except Exception:  # that connection is closed: forget it
                self._kept.pop(client, None)

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        with _current():
            await self._each(lambda session: session.send_log_message(level, data, logger))

    async def resources_changed(self) -> None:
        import mcp_types as types
        from mcp.shared.subscriptions import ResourcesListChanged

        if self.bus is not None:
            await self.bus.publish(ResourcesListChanged())
        await self._each(lambda session: session.send_notification(
            types.ResourceListChangedNotification()))

    async def prompts_changed(self) -> None:
        import mcp_types as types
        from mcp.shared.subscriptions import PromptsListChanged

        if self.bus is not None:
            await self.bus.publish(PromptsListChanged())
        await self._each(lambda session: session.send_notification(
            types.PromptListChangedNotification()))
