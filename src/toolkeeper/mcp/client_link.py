"""A tool's way back to the MCP client in front of its call (``ctx.log``, ``ctx.sample``,
``ctx.elicit``, ``ctx.list_roots``): log lines at or above the level the client set, and
requests the client answers — asked only when the tool asks, each recorded in the audit log.

How a request reaches the client depends on the wire. On a connection that keeps a session
(stdio, 2025-11-25) it is a request on the call's own stream. On the 2026-07-28 wire it is an
``input_required`` result: the call stops, the client retries it with the answers, and the
tool runs again from the start, each ask now answered (the answers of earlier rounds travel
in the sealed ``requestState``). A capability the client did not declare is an error the
client sees (-32021), never a request it cannot answer; a connection with no way back to the
client (stateless HTTP on the 2025-11-25 wire) is an invalid request (-32600) saying so."""

from __future__ import annotations

import hashlib
import itertools
import json
import time
import warnings
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.message import ServerMessageMetadata

from ..core.context import LogLevel
from ..errors import ToolkeeperError
from ..invoke.audit import AuditEntry, AuditLog, redact_arguments
from .wire import modern

__all__ = ["LEVELS", "InputWanted", "Levels", "MCPClientLink", "answers_of", "next_round"]

LEVELS: tuple[LogLevel, ...] = ("debug", "info", "notice", "warning", "error", "critical",
                                "alert", "emergency")
STATE_KEY = "toolkeeper_answers"


class InputWanted(ToolkeeperError):
    """The tool asked the client something it has not answered yet (a signal to the MCP face,
    which answers ``input_required``)."""


class Levels:
    """The log level each client asked for (``logging/setLevel``); ``debug`` until it does."""

    def __init__(self) -> None:
        self.by_client: dict[str, LogLevel] = {}

    def set(self, client: str, level: LogLevel) -> None:
        self.by_client[client] = level

    def allows(self, client: str, level: LogLevel) -> bool:
        return LEVELS.index(level) >= LEVELS.index(self.by_client.get(client, "debug"))


class MCPClientLink:
    """The ``ClientLink`` of one ``tools/call``: its SDK request context, its client's name,
    the call it serves (for the audit log) and, on the 2026-07-28 wire, the answers so far."""

    def __init__(self, request: Any, *, client: str, levels: Levels, audit: AuditLog | None,
                 call_id: str, tool: str, session_id: str,
                 answers: dict[str, Any] | None = None) -> None:
        self.request, self.client, self.levels, self.audit = request, client, levels, audit
        self.call_id, self.tool, self.session_id = call_id, tool, session_id
        self.rounds = modern(request)
        self.answers = answers or {}
        self.asked: dict[str, Any] = {}
        self.missing: dict[str, dict[str, Any]] = {}
        self.unreachable: str | None = None
        """Why the client could not be asked at all (no way back to it), once it could not."""
        self._count = itertools.count()
        self.quiet = False
        """Log lines are dropped (a task runs on after its request was answered)."""

    def can(self, capability: str) -> bool:

        declared = {"sampling": types.ClientCapabilities(sampling=types.SamplingCapability()),
                    "elicitation": types.ClientCapabilities(
                        elicitation=types.ElicitationCapability()),
                    "roots": types.ClientCapabilities(roots=types.RootsCapability())}
        wanted = declared.get(capability)
        session = getattr(self.request, "session", None)
        return wanted is not None and session is not None and bool(
            session.check_client_capability(wanted))

    async def log(self, level: LogLevel, data: Any, logger: str | None) -> None:

        if self.quiet or not self.levels.allows(self.client, level):
            return
        with warnings.catch_warnings():  # deprecated in 2026-07-28, current before
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await self.request.session.send_log_message(
                level, data, logger, related_request_id=self.request.request_id)

    async def sample(self, prompt: str, *, max_tokens: int, system: str | None,
                     key: str | None) -> str:

        params = types.CreateMessageRequestParams(
            messages=[types.SamplingMessage(role="user", content=types.TextContent(text=prompt))],
            max_tokens=max_tokens, system_prompt=system)
        answer = await self._ask("sampling", key, types.CreateMessageRequest(params=params),
                                 {"prompt": prompt, "max_tokens": max_tokens})
        return str((answer.get("content") or {}).get("text", ""))

    async def elicit(self, message: str, schema: dict[str, Any], *,
                     key: str | None) -> dict[str, Any]:

        request = types.ElicitRequest(params=types.ElicitRequestFormParams(
            message=message, requested_schema=schema))
        answer = await self._ask("elicitation", key, request, {"message": message})
        return {"action": answer.get("action"), "content": answer.get("content")}

    async def list_roots(self, *, key: str | None) -> list[dict[str, Any]]:

        answer = await self._ask("roots", key, types.ListRootsRequest(), {})
        return list(answer.get("roots") or [])

    async def _ask(self, capability: str, key: str | None, request: Any,
                   detail: dict[str, Any]) -> dict[str, Any]:
        key = key or f"{capability}-{next(self._count)}"
        session = getattr(self.request, "session", None)
        if not self.rounds and not getattr(session, "can_send_request", True):
            # A stateless POST has no way back for a request of ours: what the client
            # declared is not even known here, so it is not said to have failed to declare it.
            self.unreachable = (
                f"tool '{self.tool}' asks the client ({capability}), but this connection "
                "cannot carry a request back to the client: toolkeeper serve answers HTTP "
                "statelessly unless run with --sessions (or use a 2026-07-28 client, or stdio)")
            raise ToolkeeperError(self.unreachable)
        if not self.can(capability):
            self.missing[capability] = {}
            raise ToolkeeperError(f"the client did not declare the '{capability}' capability "
                                  f"tool '{self.tool}' needs")
        if self.rounds:
            if key in self.answers:
                return dict(self.answers[key])
            self._record(capability, detail)
            self.asked[key] = request
            raise InputWanted(f"waiting for the client's answer to '{key}'")
        self._record(capability, detail)
        try:
            result = await self.request.session.send_request(
                request, _result_type(request), metadata=_related(self.request.request_id))
        except Exception as exc:  # no back channel, a client error: the tool hears why
            raise ToolkeeperError(f"the client could not be asked ({type(exc).__name__}: "
                                  f"{exc}); over HTTP a client answers requests only on a "
                                  "connection that keeps a session (stdio always does)"
                                  ) from exc
        return _plain(result)

    def _record(self, what: str, detail: dict[str, Any]) -> None:
        if self.audit is None:
            return
        digest = hashlib.sha256(json.dumps(detail, sort_keys=True).encode()).hexdigest()[:16]
        redacted = redact_arguments({"asked_client": what, **detail})
        self.audit.record(AuditEntry(
            ts=time.time(), call_id=self.call_id, session_id=self.session_id, tool=self.tool,
            args_digest=digest, arguments=redacted if isinstance(redacted, dict) else {},
            status=what, error_code=None, duration_ms=0.0))


def answers_of(params: Any) -> dict[str, Any]:
    """The answers a retried call carries: those of earlier rounds (in its ``requestState``,
    sealed by the SDK) and this round's ``inputResponses``, as plain data."""
    earlier: dict[str, Any] = {}
    state = getattr(params, "request_state", None)
    if state:
        try:
            found = json.loads(state)
        except ValueError:  # not a state of this module (an approval's request id)
            found = None
        if isinstance(found, dict) and isinstance(found.get(STATE_KEY), dict):
            earlier = found[STATE_KEY]
    now = {key: _plain(value) for key, value in (getattr(params, "input_responses", None)
                                                 or {}).items()}
    return {**earlier, **now}


def next_round(asked: dict[str, Any], answers: dict[str, Any]) -> types.InputRequiredResult:
    """The ``input_required`` result asking what the tool still needs."""

    return types.InputRequiredResult(input_requests=asked,
                                     request_state=json.dumps({STATE_KEY: answers}))


def _plain(value: Any) -> dict[str, Any]:
    dump = getattr(value, "model_dump", None)
    found = dump(by_alias=True, mode="json", exclude_none=True) if callable(dump) else value
    return found if isinstance(found, dict) else {}


def _result_type(request: Any) -> Any:

    return {"sampling/createMessage": types.CreateMessageResult,
            "elicitation/create": types.ElicitResult,
            "roots/list": types.ListRootsResult}[request.method]


def _related(request_id: Any) -> Any:

    return ServerMessageMetadata(related_request_id=request_id)
