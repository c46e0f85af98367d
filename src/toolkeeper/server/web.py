"""The approval page and its API as one set of routes (``web_routes``, what ``toolkeeper serve``
mounts), and ``WebApprovalHandler`` for an agent loop of your own (an approval handler whose
``app()`` is the same page, mountable in any ASGI app).

The page (``ApprovalPage``, page.py) and the API (``ApprovalAPI``, api.py) are named classes
with a method per route. Who asks is decided by ``TokenGate`` (a ``Caller`` in
``request.state``): the operator sees and decides everything; a client token sees only its own
requests and calls, and decides nothing — approving is a person's job, not the agent's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..approval.persisted import PersistedApprovalHandler
from ..approval.store import SqliteApprovalStore
from ..invoke.audit import AuditLog
from ..policy.engine import Policies
from .api import ApprovalAPI
from .auth import WebSessions
from .deciding import Deciders
from .gate import TokenGate
from .page import ApprovalPage
from .rules_api import RuleRoutes

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from ..toolbox.catalog import CatalogBase
    from .gate import ASGIApp, Receive, Scope, Send

__all__ = ["WebApprovalHandler", "web_routes"]


def web_routes(store: SqliteApprovalStore, audit: AuditLog | None, sessions: WebSessions,
               *, title: str = "toolkeeper", stopping: threading.Event | None = None,
               catalog: CatalogBase | None = None,
               policies: Policies | None = None) -> list[BaseRoute]:
    """The page (``/``, ``/approvals/{id}``, ``/history``, ``/login``) and the API
    (``/api/approvals…``, ``/api/audit``) over one store and audit log: ``ApprovalAPI``'s
    routes, then ``ApprovalPage``'s. Event streams end when ``stopping`` is set. ``catalog``
    (the invoker's registry) lets a card show its tool's view and checks an edit's arguments.
    ``policies`` (the invoker's) decide who may decide what and keep the rules made from
    decisions (``rules_api.py``)."""
    deciders = Deciders(policies)
    rules = RuleRoutes(store, audit, sessions, policies, title=title)
    api = ApprovalAPI(store, audit, sessions, stopping=stopping, catalog=catalog,
                      deciders=deciders, rules=rules)
    page = ApprovalPage(store, audit, sessions, title=title, catalog=catalog, deciders=deciders)
    return rules.routes() + api.routes() + page.routes()


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
