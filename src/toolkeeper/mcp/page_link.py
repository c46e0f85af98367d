"""The wait for a person shown at the MCP client as a link to the approval card: the person
decides on the page, the client only shows where (URL-mode elicitation).

On by default for a client that declares URL-mode elicitation (``capabilities.elicitation.url``)
when the server has an approval page:

- 2026-07-28 (without the tasks extension, which gets a task instead, ``tasks.py``): a call
  that needs a person answers at once, as soon as its request is stored, an
  ``input_required`` result whose one request is a URL-mode elicitation to the card. The
  client shows the link and retries the call with its answer; the retried call rejoins its
  open request (the same session, tool and arguments, ``ApprovalService.find_open``) and
  waits for the decision like any call: approved, it runs once and returns its result;
  denied and expired are their own results. Still undecided after the server's wait, it
  answers ``pending`` as a call always has, and made again it rejoins the same request.
- 2025-11-25 (on a connection that keeps a session): while the call waits, the client gets an
  ``elicitation/create`` request in URL mode pointing at the card, and
  ``notifications/elicitation/complete`` once the call is decided. The call does not wait for
  the client's answer: the page decides.

Other clients keep the progress notifications that name the card. When the operator lets the
client approve its own calls (``[approval] channels`` with ``"client"``, ``asking.py``), the
form is asked instead of the link.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import mcp_types as types
from anyio.abc import TaskGroup

from ..hooks import HookEvent
from ..invoke.invoker import ToolInvoker
from .asking import ClientChannel
from .wire import Ctx, modern

__all__ = ["MCP_CALL", "PAGE_KEY", "PageLinks", "declares_url", "quietly", "waiting_call"]

PAGE_KEY = "approval_page"
"""The key of the link's elicitation in ``inputRequests`` (and of its answer)."""
_CAPS = "io.modelcontextprotocol/clientCapabilities"
T = TypeVar("T")

MCP_CALL: ContextVar[str] = ContextVar("toolkeeper_mcp_call", default="")
"""The id of the client's call ``MCPFace.run_call`` is running: a request made by a call that
call makes in turn (a code-mode script's) is that call's wait, told to the same client."""


def waiting_call(calls: Mapping[str, T], request: Mapping[str, Any]) -> T | None:
    """What ``calls`` (by call id) holds for the call approval request ``request`` asks about,
    else for the client's call it was made for (the call whose script made it)."""
    found = calls.get(str(request.get("call_id")))
    return found if found is not None else calls.get(MCP_CALL.get())


def declares_url(ctx: Ctx) -> bool:
    """Whether the client of ``ctx`` declared URL-mode elicitation: on this request (its
    ``_meta``, 2026-07-28) or at its handshake."""
    caps = (ctx.meta or {}).get(_CAPS) if isinstance(ctx.meta, dict) else None
    if isinstance(caps, dict):
        elicitation = caps.get("elicitation")
        return isinstance(elicitation, dict) and isinstance(elicitation.get("url"), dict)
    session = getattr(ctx, "session", None)
    found = getattr(session, "client_capabilities", None)
    elicitation = getattr(found, "elicitation", None)
    return getattr(elicitation, "url", None) is not None


@dataclass
class _Shown:
    """A 2025-11-25 call in flight whose wait is shown at its client."""

    ctx: Ctx
    group: TaskGroup
    elicitations: list[str] = field(default_factory=list)


class PageLinks:
    """The links to the approval card that calls show their clients while a person decides."""

    def __init__(self, invoker: ToolInvoker) -> None:
        self.invoker = invoker
        self.channel = ClientChannel(invoker)
        """Runs a 2026-07-28 call until its request is stored (then its id is the outcome)."""
        self._shown: dict[str, _Shown] = {}
        invoker.approvals.hooks.register(HookEvent.APPROVAL_REQUESTED, self._requested)

    def card(self, request_id: str) -> str | None:
        """The URL of the card of ``request_id``, when the server has an approval page."""
        where = self.invoker.approvals.where(request_id)
        return where if where.startswith(("http://", "https://")) else None

    def _has_page(self) -> bool:
        return self.card("apr_x") is not None

    def links_now(self, ctx: Ctx, answers: dict[str, Any]) -> bool:
        """Whether a 2026-07-28 call of ``ctx`` answers with the link as soon as it needs a
        person: its client declared URL elicitation and did not just answer the link (a
        retried call waits for the decision instead)."""
        return modern(ctx) and PAGE_KEY not in answers and declares_url(ctx) and \
            self._has_page()

    def ask(self, request_id: str) -> types.InputRequiredResult:
        """The link to the card of ``request_id``, as an ``input_required`` result."""
        store = self.invoker.approvals.store
        stored = store.get(request_id) if store is not None else None
        what = {} if stored is None else {"tool": stored.request.tool,
                                          "risk": stored.request.risk.value}
        link = types.ElicitRequest(params=types.ElicitRequestURLParams(
            message=_message(request_id, what), url=self.card(request_id) or ""))
        return types.InputRequiredResult(input_requests={PAGE_KEY: link},
                                         request_state=request_id)

    # -- 2025-11-25: an elicitation request beside the waiting call ---------------------

    def shows(self, ctx: Ctx) -> bool:
        """Whether a 2025-11-25 call of ``ctx`` shows its wait at the client: it declared URL
        elicitation and its connection can carry a request back."""
        session = getattr(ctx, "session", None)
        return not modern(ctx) and getattr(session, "can_send_request", True) and \
            declares_url(ctx) and self._has_page()

    async def beside(self, ctx: Ctx, call_id: str, run: Callable[[], Awaitable[T]]) -> T:
        """``run()`` (the call), while its wait for a person is shown at its client."""
        finished: list[T] = []
        async with anyio.create_task_group() as group:
            shown = self._shown[call_id] = _Shown(ctx, group)
            try:
                finished.append(await run())
            finally:
                self._shown.pop(call_id, None)
                group.cancel_scope.cancel()
        for elicitation in shown.elicitations:
            await quietly(ctx.session.send_elicit_complete(
                elicitation, related_request_id=ctx.request_id))
        return finished[0]

    async def _requested(self, _event: HookEvent, payload: dict[str, Any]) -> None:
        request = payload.get("request") or {}
        shown = waiting_call(self._shown, request)
        url = self.card(str(request.get("id")))
        if shown is not None and url is not None:
            shown.group.start_soon(self._elicit, shown, _message(str(request.get("id")),
                                                                 request), url)

    @staticmethod
    async def _elicit(shown: _Shown, message: str, url: str) -> None:
        """Show the link; the client's answer changes nothing (the page decides)."""
        elicitation = "elicit_" + secrets.token_urlsafe(9)
        shown.elicitations.append(elicitation)
        await quietly(shown.ctx.session.elicit_url(message, url, elicitation,
                                                   related_request_id=shown.ctx.request_id))


def _message(request_id: str, request: dict[str, Any]) -> str:
    """What the client shows with the link: the tool and its risk, and what to do."""
    risk = getattr(request.get("risk"), "value", request.get("risk"))
    what = f"'{request['tool']}' (risk {risk}) " if request.get("tool") else ""
    return (f"The agent wants to run {what}and a person must approve it (request "
            f"{request_id}). Open the approval card to see the exact arguments and decide "
            "there; the call goes on once it is decided.")


async def quietly(told: Awaitable[Any]) -> None:
    """Tell the client something; a client that cannot hear it does not fail the call."""
    try:
        await told
    except Exception:  # a closed stream, a client that refused the request
        return
