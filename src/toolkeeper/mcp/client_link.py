"""A tool's way back to the MCP client in front of its call (``ctx.log``, ``ctx.sample``,
``ctx.elicit``): log lines at or above the level the client set, and requests the client
answers — each recorded in the audit log, asked only when the tool asks."""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from typing import Any

from ..core.context import LogLevel
from ..errors import ToolkeeperError
from ..invoke.audit import AuditEntry, AuditLog, redact_arguments

__all__ = ["LEVELS", "Levels", "MCPClientLink"]

LEVELS: tuple[LogLevel, ...] = ("debug", "info", "notice", "warning", "error", "critical",
                                "alert", "emergency")


class Levels:
    """The log level each client asked for (``logging/setLevel``); ``debug`` until it does."""

    def __init__(self) -> None:
        self.by_client: dict[str, LogLevel] = {}

    def set(self, client: str, level: LogLevel) -> None:
        self.by_client[client] = level

    def allows(self, client: str, level: LogLevel) -> bool:
        return LEVELS.index(level) >= LEVELS.index(self.by_client.get(client, "debug"))


class MCPClientLink:
    """The ``ClientLink`` of one ``tools/call``: its SDK request context, its client's name
    and the call it serves (for the audit log)."""

    def __init__(self, request: Any, *, client: str, levels: Levels, audit: AuditLog | None,
                 call_id: str, tool: str, session_id: str) -> None:
        self.request, self.client, self.levels, self.audit = request, client, levels, audit
        self.call_id, self.tool, self.session_id = call_id, tool, session_id

    async def log(self, level: LogLevel, data: Any, logger: str | None) -> None:
        from mcp.shared.exceptions import MCPDeprecationWarning

        if not self.levels.allows(self.client, level):
            return
        with warnings.catch_warnings():  # deprecated in 2026-07-28, current before
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await self.request.session.send_log_message(
                level, data, logger, related_request_id=self.request.request_id)

    async def sample(self, prompt: str, *, max_tokens: int, system: str | None) -> str:
        import mcp_types as types

        self._record("sampling", {"prompt": prompt, "max_tokens": max_tokens})
        result = await self._ask(self.request.session.create_message(
            messages=[types.SamplingMessage(role="user",
                                            content=types.TextContent(text=prompt))],
            max_tokens=max_tokens, system_prompt=system,
            related_request_id=self.request.request_id))
        content = result.content
        return str(getattr(content, "text", "")) if content is not None else ""

    async def elicit(self, message: str, schema: dict[str, Any]) -> dict[str, Any]:
        self._record("elicitation", {"message": message})
        result = await self._ask(self.request.session.elicit_form(
            message, schema, related_request_id=self.request.request_id))
        return {"action": result.action, "content": result.content}

    async def _ask(self, request: Any) -> Any:
        try:
            return await request
        except ToolkeeperError:
            raise
        except Exception as exc:  # no back channel, a client error: the tool hears why
            raise ToolkeeperError(f"the client could not be asked ({type(exc).__name__}: "
                                  f"{exc}); over HTTP a client answers requests only on a "
                                  "connection that keeps a session (stdio always does)"
                                  ) from exc

    def _record(self, what: str, detail: dict[str, Any]) -> None:
        if self.audit is None:
            return
        digest = hashlib.sha256(json.dumps(detail, sort_keys=True).encode()).hexdigest()[:16]
        self.audit.record(AuditEntry(
            ts=time.time(), call_id=self.call_id, session_id=self.session_id, tool=self.tool,
            args_digest=digest, arguments=redact_arguments({"asked_client": what, **detail}),
            status=what,
            error_code=None, duration_ms=0.0))
