"""Our MCP server's side of the gateway's relay: a ``RelayLink`` made from the SDK's request
context (what the gateway needs of the client that sent a request). What concerns every client
goes through the gateway's own hub (``gateway.relay.ClientSessions``), which the server hands
each client's connection.

The server runs each ``tools/call`` inside ``calling_client(SdkClientLink(ctx, client))``: a
relayed tool call then reports the upstream's log lines and asks its sampling and elicitation
requests on that very request, which on Streamable HTTP rides the request's own response stream.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import mcp_types as types
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.message import ServerMessageMetadata

from ..gateway.relay import Asked, ClientSessions
from .wire import Ctx

__all__ = ["SdkClientLink", "SessionHub"]


@contextmanager
def _current() -> Iterator[None]:
    """Logging is deprecated in the 2026-07-28 revision and current before it: the SDK's
    warning about it is not news to an operator."""

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


class SdkClientLink:
    """A ``RelayLink`` over one request of the SDK's low-level server (``ctx``)."""

    def __init__(self, ctx: Ctx, client: str) -> None:
        self.ctx = ctx
        self._client = client

    @property
    def client(self) -> str:
        return self._client

    @property
    def hears_progress(self) -> bool:
        return (self.ctx.meta or {}).get("progress_token") is not None

    def can(self, asked: Asked) -> bool:

        session = self.ctx.session
        wanted = (types.ClientCapabilities(sampling=types.SamplingCapability())
                  if asked == "sampling"
                  else types.ClientCapabilities(elicitation=types.ElicitationCapability()))
        return bool(session.can_send_request and session.check_client_capability(wanted))

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        # The SDK's own gate: on a 2026-07-28 session only a request that opted in hears logs.
        with _current():
            await self.ctx.session.send_log_message(cast("types.LoggingLevel", level), data,
                                                    logger,
                                                    related_request_id=self.ctx.request_id)

    async def forward_sampling(self, params: types.CreateMessageRequestParams) -> Any:

        result = (types.CreateMessageResultWithTools if params.tools
                  else types.CreateMessageResult)
        return await self._send(types.CreateMessageRequest(params=params), result)

    async def forward_elicitation(self, params: types.ElicitRequestParams) -> Any:

        return await self._send(types.ElicitRequest(params=params), types.ElicitResult)

    async def _send(self, request: Any, result: Any) -> Any:

        return await self.ctx.session.send_request(
            request, result, metadata=ServerMessageMetadata(related_request_id=self.ctx.request_id))

    async def resource_updated(self, uri: str) -> None:
        await self.ctx.session.send_resource_updated(uri)


class SessionHub:
    """Every client connection seen by ``remember``: what concerns them all goes to each.
    Goes away in 0.3.0: a gateway's relay keeps its own hub (``gateway.relay.hub``, a
    ``toolkeeper.gateway.relay.ClientSessions``), which ``MCPFace`` hands each client's
    connection."""

    def __init__(self) -> None:
        self.sessions = ClientSessions()

    def remember(self, ctx: Ctx, client: str) -> None:
        """Keep the connection of a request's client (the last one per client)."""
        self.sessions.remember(client, ctx.session)

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        await self.sessions.log(level, data, logger)

    async def resources_changed(self) -> None:
        await self.sessions.resources_changed()

    async def prompts_changed(self) -> None:
        await self.sessions.prompts_changed()
