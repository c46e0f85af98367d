"""The approval page and its JSON API, as Starlette routes over an approval store and an audit
log: ``web_routes`` for ``toolkeeper serve``, ``WebApprovalHandler`` for an agent loop of your
own (an approval handler whose ``app()`` is the same page, mountable in any ASGI app).

Who asks is decided by ``TokenGate`` (a ``Caller`` in ``request.state``): the operator sees
and decides everything; a client token sees only its own requests and calls, and decides
nothing — approving is a person's job, not the agent's.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ..approval.persisted import PersistedApprovalHandler
from ..approval.store import SqliteApprovalStore, StoredApproval
from ..core.context import CALLER_KEY, Caller
from ..invoke.audit import AuditLog
from .auth import COOKIE, WebSessions
from .decide import DecisionError, decide
from .gate import TokenGate
from .views import approval_json, audit_json, card, history_row, session_of

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute

    from ..toolbox.catalog import CatalogBase
    from .gate import ASGIApp, Receive, Scope, Send

__all__ = ["WebApprovalHandler", "web_routes"]

HERE = Path(__file__).resolve().parent
POLL_S = 0.05
HEARTBEAT_S = 15.0
MAX_MESSAGE = 2000


def web_routes(store: SqliteApprovalStore, audit: AuditLog | None, sessions: WebSessions,
               *, title: str = "toolkeeper", stopping: threading.Event | None = None,
               catalog: CatalogBase | None = None) -> list[BaseRoute]:
    """The page (``/``, ``/approvals/{id}``, ``/history``, ``/login``) and the API
    (``/api/approvals…``, ``/api/audit``). Event streams end when ``stopping`` is set (the
    server is shutting down; browsers reconnect and resume from their last event).
    ``catalog`` (the invoker's registry) lets a card find its tool's view (a diff for
    ``file_write``, the sandbox for ``shell``); without it cards use the generic view.
    Links, redirects and the cookie honour the ASGI ``root_path`` (mounted under a prefix)."""
    stopping = stopping or threading.Event()
    from jinja2 import Environment, FileSystemLoader, select_autoescape
    from starlette.responses import (
        FileResponse,
        HTMLResponse,
        JSONResponse,
        RedirectResponse,
        StreamingResponse,
    )
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    env = Environment(loader=FileSystemLoader(HERE / "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True))

    def who(request: Request) -> str | None:
        return caller_of(request).client or None

    def secret_of(request: Request) -> str:
        return caller_of(request).page_secret

    def page(request: Request, name: str, status: int = 200, **values: Any) -> Response:
        secret = secret_of(request)
        html = env.get_template(name).render(title=title, csrf=sessions.csrf(secret)
                                             if secret else "", root=_root(request), **values)
        return HTMLResponse(html, status_code=status, headers={"cache-control": "no-store"})

    def home(request: Request) -> Response:
        return RedirectResponse(_root(request) + "/", status_code=303)

    def login_needed(request: Request) -> Response:
        return page(request, "login.html", status=401)

    def shown(stored: StoredApproval) -> dict[str, Any]:
        return card(stored, catalog)

    async def visible_request(request: Request, client: str) -> StoredApproval | None:
        stored = await anyio.to_thread.run_sync(store.get, request.path_params["id"])
        scope = session_of(client)
        if stored is None or (scope is not None and stored.request.session_id != scope):
            return None  # another client's request does not exist for this one
        return stored

    async def pending_cards(client: str) -> tuple[list[dict[str, Any]], int]:
        def read() -> tuple[list[dict[str, Any]], int]:
            cursor = store.last_event()  # read first: a change after it is replayed
            listed = store.requests(state="pending", session_id=session_of(client))
            return [shown(s) for s in reversed(listed)], cursor  # views may read files
        return await anyio.to_thread.run_sync(read)

    # -- the page ---------------------------------------------------------------------------

    def inbox_view(template: str) -> Any:
        """The pending cards as a whole page, or only the cards (what the script fetches)."""
        async def view(request: Request) -> Response:
            client = who(request)
            if client is None:
                return login_needed(request)
            cards, cursor = await pending_cards(client)
            return page(request, template, cards=cards, cursor=cursor)
        return view

    async def detail(request: Request) -> Response:
        client = who(request)
        if client is None:
            return login_needed(request)
        stored = await visible_request(request, client)
        if stored is None:
            return page(request, "message.html", status=404, heading="No such request",
                        text="It does not exist, or it is not yours to see.")
        return page(request, "detail.html",
                    card=await anyio.to_thread.run_sync(shown, stored))

    async def decide_form(request: Request) -> Response:
        client = who(request)
        if client is None:
            return login_needed(request)
        form = await request.form(max_files=0, max_fields=10)
        secret = secret_of(request)
        if not sessions.csrf_ok(secret, str(form.get("csrf", ""))):
            return page(request, "message.html", status=403, heading="Refused",
                        text="The form is stale or came from elsewhere (CSRF check). Reload "
                             "the page and decide again.")
        choice = str(form.get("decision", ""))
        try:
            await decide(store, audit, client, request.path_params["id"], choice,
                         message=str(form.get("message", ""))[:MAX_MESSAGE],
                         digest=str(form.get("digest", "")), approver=f"web:{client}")
        except DecisionError as exc:
            return page(request, "message.html", status=exc.status, heading="Not decided",
                        text=str(exc))
        return home(request)

    async def history(request: Request) -> Response:
        client = who(request)
        if client is None:
            return login_needed(request)
        filters, problem = _audit_filters(request, client)
        shown_filters = {k: request.query_params.get(k, "") for k in
                         ("tool", "status", "session", "since")}
        if problem:
            return page(request, "history.html", status=400, rows=[], problem=problem,
                        filters=shown_filters)
        rows = await anyio.to_thread.run_sync(
            lambda: [history_row(e, n) for n, e in enumerate(_query(audit, filters))])
        return page(request, "history.html", rows=rows, filters=shown_filters, problem="")

    async def login(request: Request) -> Response:
        code = request.query_params.get("code", "")
        secret = await anyio.to_thread.run_sync(sessions.redeem, code) if code else None
        if secret is None:
            return page(request, "message.html", status=401, heading="Login link used or "
                        "expired", text="Each login link works once, for 15 minutes. Use the "
                        "one toolkeeper serve printed at its last start, or make a new one "
                        "with: toolkeeper approvals login-url")
        response = home(request)
        response.set_cookie(COOKIE, secret, httponly=True, samesite="strict",
                            path=_root(request) or "/", secure=request.url.scheme == "https",
                            max_age=7 * 24 * 3600)
        return response

    async def logout(request: Request) -> Response:
        secret = secret_of(request)
        form = await request.form(max_files=0, max_fields=2)
        if secret and sessions.csrf_ok(secret, str(form.get("csrf", ""))):
            await anyio.to_thread.run_sync(sessions.logout, secret)
        response = home(request)
        response.delete_cookie(COOKIE, path=_root(request) or "/")
        return response

    async def favicon(_request: Request) -> Response:
        return FileResponse(HERE / "static" / "favicon.svg", media_type="image/svg+xml",
                            headers={"cache-control": "max-age=86400"})

    # -- the API ----------------------------------------------------------------------------

    def api_error(status: int, error: str, message: str) -> Response:
        return JSONResponse({"error": error, "message": message}, status_code=status)

    async def api_list(request: Request) -> Response:
        client = who(request) or ""
        state = request.query_params.get("state") or None
        listed = await anyio.to_thread.run_sync(
            lambda: store.requests(state=state, session_id=session_of(client)))
        return JSONResponse({"approvals": [approval_json(s) for s in listed]})

    async def api_get(request: Request) -> Response:
        stored = await visible_request(request, who(request) or "")
        if stored is None:
            return api_error(404, "not_found", f"no approval request "
                             f"{request.path_params['id']!r} visible to this token")
        return JSONResponse(approval_json(stored))

    async def api_decide(request: Request) -> Response:
        client = who(request) or ""
        if caller_of(request).via == "cookie":
            secret = secret_of(request)
            if not sessions.csrf_ok(secret, request.headers.get("x-csrf-token", "")):
                return api_error(403, "csrf", "send the page's CSRF token as X-CSRF-Token")
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return api_error(400, "bad_request", 'send JSON: {"decision": "approve"|"deny", '
                             '"message": "...", "scope": "once"|"session"}')
        choice = str(body.get("decision", ""))
        if body.get("scope") == "session" and choice == "approve":
            choice = "approve_session"
        try:
            stored = await decide(store, audit, client, request.path_params["id"], choice,
                                  message=str(body.get("message", ""))[:MAX_MESSAGE],
                                  digest=body.get("args_digest"), approver=f"api:{client}")
        except DecisionError as exc:
            return api_error(exc.status, exc.code, str(exc))
        return JSONResponse(approval_json(stored))

    async def api_events(request: Request) -> Response:
        client = who(request) or ""
        scope = session_of(client)
        start = request.headers.get("last-event-id") or request.query_params.get("after")
        try:
            after = int(start) if start is not None else None
        except ValueError:
            return api_error(400, "bad_request", "Last-Event-ID / after must be an integer")
        if after is None:  # from now on
            after = await anyio.to_thread.run_sync(store.last_event)

        async def stream() -> Any:
            nonlocal after
            quiet = 0.0
            yield "retry: 250\n\n"  # reconnect soon after a restart
            while not stopping.is_set() and not await request.is_disconnected():
                events = await anyio.to_thread.run_sync(
                    partial(store.events, after or 0, session_id=scope))
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

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"cache-control": "no-store",
                                          "x-accel-buffering": "no"})

    async def api_audit(request: Request) -> Response:
        filters, problem = _audit_filters(request, who(request) or "")
        if problem:
            return api_error(400, "bad_request", problem)
        entries = await anyio.to_thread.run_sync(lambda: _query(audit, filters))
        return JSONResponse({"entries": [audit_json(e) for e in entries]})

    return [
        Route("/", inbox_view("inbox.html")),
        Route("/fragments/inbox", inbox_view("cards.html")),
        Route("/approvals/{id}", detail), Route("/approvals/{id}/decide", decide_form,
                                                methods=["POST"]),
        Route("/history", history), Route("/login", login),
        Route("/favicon.ico", favicon),
        Route("/logout", logout, methods=["POST"]),
        Route("/api/approvals", api_list), Route("/api/approvals/events", api_events),
        Route("/api/approvals/{id}", api_get),
        Route("/api/approvals/{id}/decision", api_decide, methods=["POST"]),
        Route("/api/audit", api_audit),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]


def _root(request: Request) -> str:
    """The path the page is mounted at ("" at the top), for links, redirects and the cookie."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def caller_of(request: Request) -> Caller:
    """Who asks, as the gate found (nobody: an empty caller)."""
    found = request.scope.get("state", {}).get(CALLER_KEY)
    return found if isinstance(found, Caller) else NOBODY


NOBODY = Caller(channel="page")


def _audit_filters(request: Request, client: str) -> tuple[dict[str, Any], str]:
    """(the audit query's filters, what is wrong with the parameters — "" when nothing)."""
    params = request.query_params
    session = params.get("session") or None
    own = session_of(client)
    if own is not None:
        session = own  # a client sees its own calls only
    since_text, limit_text = params.get("since", "").strip(), params.get("limit", "200")
    try:
        since = float(since_text) if since_text else None
        if since is not None and not math.isfinite(since):
            raise ValueError(since_text)
    except ValueError:
        return {}, (f"'since' must be a time in seconds since 1970 (a number such as "
                    f"{int(time.time()) - 3600}), not {since_text[:40]!r}")
    try:
        limit = min(max(int(limit_text), 1), 1000)
    except ValueError:
        return {}, f"'limit' must be a whole number from 1 to 1000, not {limit_text[:40]!r}"
    return {"tool": params.get("tool") or None, "status": params.get("status") or None,
            "session_id": session, "since": since, "limit": limit}, ""


def _query(audit: AuditLog | None, filters: dict[str, Any]) -> list[Any]:
    if audit is None:
        return []
    since = filters.pop("since", None)
    entries = audit.query(**filters)
    return [e for e in entries if since is None or e.ts >= since]


class WebApprovalHandler(PersistedApprovalHandler):
    """An approval handler whose requests a person answers on a web page.

    Requests are stored in ``store`` (so they survive restarts) and each call waits up to
    ``wait_s`` for a decision made on the page, the API or ``toolkeeper approvals``. Mount
    ``handler.app(token=...)`` in your ASGI app (or serve it with uvicorn) and open the URL of
    ``handler.login_url(base)``::

        handler = WebApprovalHandler(SqliteApprovalStore("approvals.db"), wait_s=50)
        invoker = ToolInvoker(tools, handler)
        app.mount("/approvals", handler.app(token=os.environ["APPROVAL_TOKEN"]))
    """

    def __init__(self, store: SqliteApprovalStore, *, wait_s: float = 50.0,
                 poll_s: float = 0.1, audit: AuditLog | None = None) -> None:
        super().__init__(store, wait_s=wait_s, poll_s=poll_s)
        self.audit = audit
        self.sessions = WebSessions(store.db.path)

    def login_url(self, base: str) -> str:
        """A one-time URL that logs a browser in (valid 15 minutes)."""
        return f"{base.rstrip('/')}/login?code={self.sessions.login_code()}"

    def app(self, *, token: str | None, hosts: tuple[str, ...] = ("127.0.0.1", "localhost",
                                                                   "::1"),
            catalog: CatalogBase | None = None) -> Any:
        """The page and API as an ASGI app, behind the same gate as ``toolkeeper serve``'s
        (bearer ``token`` for the API, the login cookie for the page, Host/Origin checks).
        Mount it anywhere: links, redirects and the cookie follow the mount path. With
        ``catalog`` (say ``invoker.registry``) cards show the built-in tools' views."""
        from starlette.applications import Starlette

        inner = Starlette(routes=web_routes(self.store, self.audit,  # type: ignore[arg-type]
                                            self.sessions, catalog=catalog))
        return _Mounted(inner, lambda app: TokenGate(app, token, sessions=self.sessions,
                                                     hosts=hosts, protected=("/api",)))


class _Mounted:
    """Lets the gate, which matches paths from the app's own root (``/api``), guard an app
    mounted under a prefix: the gate sees the path below the mount, the app gets the request
    as mounted (Starlette routes by ``path`` minus ``root_path``)."""

    def __init__(self, app: ASGIApp, gate: Callable[[ASGIApp], ASGIApp]) -> None:
        self.app = app
        self.gate = gate(self._inner)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        root, path = str(scope.get("root_path", "")), str(scope.get("path", ""))
        if root and path.startswith(root):
            scope = {**scope, "path": path[len(root):] or "/", _FULL_PATH: path}
        await self.gate(scope, receive, send)

    async def _inner(self, scope: Scope, receive: Receive, send: Send) -> None:
        if _FULL_PATH in scope:
            scope = {**scope, "path": scope[_FULL_PATH]}
        await self.app(scope, receive, send)


_FULL_PATH = "toolkeeper.full_path"
