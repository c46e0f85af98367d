"""The approval page's JSON API: the requests a caller may see, one request, a decision (the
operator's only), the stream of changes, and the audit — what ``toolkeeper approvals`` and
scripts use."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ..approval.store import SqliteApprovalStore, StoredApproval
from ..invoke.audit import AuditLog
from .auth import WebSessions
from .decide import DecisionError, decide
from .deciding import Deciders, approver_of
from .page import MAX_BATCH, MAX_MESSAGE
from .queue import PAGE_SIZE, QueueFilter, upstream_of, waiting_page
from .requests import audit_filters, caller_of, query_audit, visible_request
from .views import approval_json, audit_json, session_of

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute

    from ..toolbox.catalog import CatalogBase
    from .rules_api import RuleRoutes

__all__ = ["HEARTBEAT_S", "POLL_S", "ApprovalAPI"]

POLL_S = 0.05
"""How often the change stream reads the store's event log (seconds)."""
HEARTBEAT_S = 15.0
"""A quiet change stream sends a comment this often, so proxies keep it open."""


class ApprovalAPI:
    """The API's routes under ``/api``: ``approvals`` (list), ``approvals/events`` (server-sent
    changes, resumable with ``Last-Event-ID``), ``approvals/{id}``, ``approvals/{id}/decision``
    (POST) and ``audit``. Change streams end when ``stopping`` is set (the server is shutting
    down; browsers reconnect and resume from their last event)."""

    def __init__(self, store: SqliteApprovalStore, audit: AuditLog | None,
                 sessions: WebSessions, *, stopping: threading.Event | None = None,
                 catalog: CatalogBase | None = None, deciders: Deciders | None = None,
                 rules: RuleRoutes | None = None) -> None:
        self.store, self.audit, self.sessions = store, audit, sessions
        self.deciders, self.rules = deciders or Deciders(), rules
        self.stopping = stopping or threading.Event()
        self.catalog = catalog
        """Where an edit's arguments are checked against its tool's schema."""

    def routes(self) -> list[BaseRoute]:
        from starlette.routing import Route

        return [
            Route("/api/approvals", self.approvals), Route("/api/approvals/events", self.events),
            Route("/api/approvals/queue", self.queue),
            Route("/api/approvals/{id}", self.approval),
            Route("/api/approvals/decisions", self.decide_many, methods=["POST"]),
            Route("/api/approvals/{id}/decision", self.decide, methods=["POST"]),
            Route("/api/audit", self.audit_entries),
        ]

    async def approvals(self, request: Request) -> Response:
        caller = caller_of(request)
        client = caller.client
        state = request.query_params.get("state") or None
        listed = await anyio.to_thread.run_sync(
            lambda: [s for s in self.store.requests(state=state, session_id=session_of(client))
                     if self.deciders.may(caller, s)])
        return _json({"approvals": [approval_json(s) for s in listed]})

    async def queue(self, request: Request) -> Response:
        """The waiting requests a page at a time, oldest first, filtered and searched on the
        server as the inbox is (``client``, ``tool``, ``risk``, ``upstream``, ``age``, ``q``,
        ``page``)."""
        wanted, problem = QueueFilter.of(request.query_params)
        if problem:
            return _error(400, "bad_request", problem)
        caller = caller_of(request)
        scope = session_of(caller.client)
        keep = partial(self.deciders.may, caller) if self.deciders.policies else None
        shown = await anyio.to_thread.run_sync(lambda: waiting_page(
            self.store, wanted, session_id=scope, upstream_of=partial(upstream_of, self.catalog),
            keep=keep))
        return _json({"approvals": [approval_json(s) for s in shown.items],
                      "total": shown.total, "page": shown.page, "pages": shown.pages,
                      "page_size": PAGE_SIZE})

    async def approval(self, request: Request) -> Response:
        stored = await visible_request(self.store, request, caller_of(request).client)
        if stored is not None and not await anyio.to_thread.run_sync(
                self.deciders.may, caller_of(request), stored):
            stored = None  # a request this operator may not decide is not theirs to see
        if stored is None:
            return _error(404, "not_found", f"no approval request "
                          f"{request.path_params['id']!r} visible to this token")
        return _json(approval_json(stored))

    async def decide(self, request: Request) -> Response:
        body, refused = await self._body(request)
        if refused is not None:
            return refused
        if body.get("rule") is not None and self.rules is not None:  # the rule's edits too
            return await self.rules.decide_api(request, body, catalog=self.catalog)
        try:
            stored = await self._decide_one(request, request.path_params["id"], body)
        except DecisionError as exc:
            return _error(exc.status, exc.code, str(exc))
        return _json(approval_json(stored))

    async def decide_many(self, request: Request) -> Response:
        """Several decisions in one request (the page's "approve selected"): each its own
        decision, bound to its own digest and audited as such; one refused does not stop the
        others. Answers each one's outcome in order."""
        body, refused = await self._body(request)
        if refused is not None:
            return refused
        items = body.get("decisions")
        if not isinstance(items, list) or not items or len(items) > MAX_BATCH or \
                not all(isinstance(i, dict) and isinstance(i.get("id"), str) for i in items):
            return _error(400, "bad_request", f'send {{"decisions": [{{"id": "apr_…", '
                          f'"decision": "approve"|"deny", "args_digest": "…"}}, …]}} with 1 '
                          f"to {MAX_BATCH} items")
        outcomes: list[dict[str, object]] = []
        for item in items:
            try:
                stored = await self._decide_one(request, str(item["id"]), item)
            except DecisionError as exc:
                outcomes.append({"id": item["id"], "error": exc.code, "message": str(exc)})
            else:
                outcomes.append({"id": item["id"], "state": stored.state})
        return _json({"results": outcomes})

    async def _body(self, request: Request) -> tuple[dict[str, Any], Response | None]:
        """The JSON object a decision sends, or the refusal: a page's (cookie) request without
        its CSRF token, or a body that is not an object."""
        caller = caller_of(request)
        if caller.via == "cookie" and not self.sessions.csrf_ok(
                caller.page_secret, request.headers.get("x-csrf-token", "")):
            return {}, _error(403, "csrf", "send the page's CSRF token as X-CSRF-Token")
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return {}, _error(400, "bad_request", 'send JSON: {"decision": "approve"|"deny", '
                              '"message": "...", "scope": "once"|"session", "arguments": '
                              '{...} (approve with edited arguments)}')
        return body, None

    async def _decide_one(self, request: Request, request_id: str, body: dict[str, Any]
                          ) -> StoredApproval:
        caller = caller_of(request)
        choice = str(body.get("decision", ""))
        if body.get("scope") == "session" and choice == "approve":
            choice = "approve_session"
        return await decide(self.store, self.audit, caller.client, request_id, choice,
                            message=str(body.get("message", ""))[:MAX_MESSAGE],
                            digest=body.get("args_digest"), arguments=body.get("arguments"),
                            catalog=self.catalog, approver=approver_of(caller),
                            judge=partial(self.deciders.refusal, caller))

    async def events(self, request: Request) -> Response:
        from starlette.responses import StreamingResponse

        start = request.headers.get("last-event-id") or request.query_params.get("after")
        try:
            after = int(start) if start is not None else None
        except ValueError:
            return _error(400, "bad_request", "Last-Event-ID / after must be an integer")
        if after is None:  # from now on
            after = await anyio.to_thread.run_sync(self.store.last_event)
        changes = self._changes(request, after, session_of(caller_of(request).client))
        return StreamingResponse(changes, media_type="text/event-stream",
                                 headers={"cache-control": "no-store",
                                          "x-accel-buffering": "no"})

    async def audit_entries(self, request: Request) -> Response:
        filters, problem = audit_filters(request, caller_of(request).client)
        if problem:
            return _error(400, "bad_request", problem)
        entries = await anyio.to_thread.run_sync(lambda: query_audit(self.audit, filters))
        return _json({"entries": [audit_json(e) for e in entries]})

    async def _changes(self, request: Request, after: int, scope: str | None
                       ) -> AsyncIterator[str]:
        """The store's changes after event ``after`` as server-sent events, until the client
        leaves or the server stops."""
        quiet = 0.0
        yield "retry: 250\n\n"  # reconnect soon after a restart
        while not self.stopping.is_set() and not await request.is_disconnected():
            events = await anyio.to_thread.run_sync(
                partial(self.store.events, after, session_id=scope))
            for seq, request_id, state in events:
                after = seq
                data = json.dumps({"id": request_id, "state": state})
                yield f"id: {seq}\nevent: approval\ndata: {data}\n\n"
            if events:
                quiet = 0.0
                continue
            await anyio.sleep(POLL_S)
            quiet += POLL_S
            if quiet >= HEARTBEAT_S:
                quiet = 0.0
                yield ": keep-alive\n\n"


def _json(body: object, status: int = 200) -> Response:
    from starlette.responses import JSONResponse

    return JSONResponse(body, status_code=status)


def _error(status: int, error: str, message: str) -> Response:
    return _json({"error": error, "message": message}, status)
