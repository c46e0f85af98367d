"""The approval page: the inbox of waiting calls, a request's card, the decision form, the
history of calls, and the one-time login. A person decides here; the page's HTML is rendered
from the templates beside this module with every value escaped."""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from ..approval.journal import journals_of
from ..approval.sqlite import Database
from ..approval.store import SqliteApprovalStore, StoredApproval
from ..core.risk import ToolRisk
from ..invoke.audit import AuditLog
from ..notify.ledger import last_failure
from .auth import COOKIE, WebSessions
from .card_text import plain
from .clients import OPERATOR
from .decide import DecisionError, decide, edit_checked
from .deciding import Deciders, approver_of
from .queue import AGES, RISKS, QueueFilter, upstream_of, waiting_page
from .requests import audit_filters, caller_of, query_audit, root_of, visible_request
from .views import SESSION_GRANT_FOR, card, client_of, edit_blocks, figures_text, history_row, session_of

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute

    from ..toolbox.catalog import CatalogBase

__all__ = ["MAX_MESSAGE", "ApprovalPage"]

HERE = Path(__file__).resolve().parent
MAX_MESSAGE = 2000
"""The longest message to the model a decision keeps (characters)."""
MAX_BATCH = 500
"""The most cards one "approve selected" decides."""


def edited_json(text: str) -> object:
    """The edit box's arguments: a JSON object, or a decision error saying where it broke."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise DecisionError(400, "bad_arguments", f"the edited arguments are not JSON ({exc}); "
                            "write a JSON object like the one shown and approve again") from None


def failure_line(db: Database) -> str:
    """The page's line about notifications, when the last one to some channel failed."""
    failure = last_failure(db)
    if failure is None:
        return ""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(failure.ts))
    return (f"Notifications: the last one to {failure.channel} failed at {when} after "
            f"{failure.attempts} attempt{'s' if failure.attempts > 1 else ''} "
            f"({plain(failure.error)}); requests still wait here.")


class ApprovalPage:
    """The page's routes (``/``, ``/fragments/inbox``, ``/approvals/{id}`` and its decision
    form, ``/history``, ``/login``, ``/logout``, ``/favicon.ico``, ``/static``).

    ``catalog`` (the invoker's registry) lets a card find its tool's view (a diff for
    ``file_write``, the sandbox for ``shell``); without it cards use the generic view. Links,
    redirects and the cookie honour the ASGI ``root_path`` (mounted under a prefix)."""

    def __init__(self, store: SqliteApprovalStore, audit: AuditLog | None,
                 sessions: WebSessions, *, title: str = "toolkeeper",
                 catalog: CatalogBase | None = None, deciders: Deciders | None = None) -> None:
        from jinja2 import Environment, FileSystemLoader, select_autoescape

        self.store, self.audit, self.sessions = store, audit, sessions
        self.title, self.catalog = title, catalog
        self.deciders = deciders or Deciders()
        self.journals = journals_of(store)  # where a script's call shows its script from
        self.env = Environment(loader=FileSystemLoader(HERE / "templates"),
                               autoescape=select_autoescape(default=True,
                                                            default_for_string=True))

    def routes(self) -> list[BaseRoute]:
        from starlette.routing import Mount, Route
        from starlette.staticfiles import StaticFiles

        return [
            Route("/", self.inbox), Route("/fragments/inbox", self.inbox_cards),
            Route("/approvals/batch", self.decide_many, methods=["POST"]),
            Route("/approvals/{id}", self.detail),
            Route("/approvals/{id}/preview", self.preview, methods=["POST"]),
            Route("/approvals/{id}/decide", self.decide, methods=["POST"]),
            Route("/history", self.history), Route("/login", self.login),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/favicon.ico", self.favicon),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]

    # -- the handlers -----------------------------------------------------------------------

    async def inbox(self, request: Request) -> Response:
        """The waiting calls as a whole page."""
        return await self._inbox(request, "inbox.html")

    async def inbox_cards(self, request: Request) -> Response:
        """Only the cards (what the page's script fetches on a change)."""
        return await self._inbox(request, "cards.html")

    async def detail(self, request: Request) -> Response:
        client = caller_of(request).client or None
        if client is None:
            return self._login_needed(request)
        stored = await visible_request(self.store, request, client)
        if stored is not None and not await anyio.to_thread.run_sync(
                self.deciders.may, caller_of(request), stored):
            stored = None  # a request this operator may not decide is not theirs to see
        if stored is None:
            return self._render(request, "message.html", status=404, heading="No such request",
                                text="It does not exist, or it is not yours to see.")
        shown = await anyio.to_thread.run_sync(self._card, stored)
        return self._render(request, "detail.html", card=shown)

    async def decide(self, request: Request) -> Response:
        client = caller_of(request).client or None
        if client is None:
            return self._login_needed(request)
        form = await request.form(max_files=0, max_fields=10)
        if not self.sessions.csrf_ok(caller_of(request).page_secret, str(form.get("csrf", ""))):
            return self._render(request, "message.html", status=403, heading="Refused",
                                text="The form is stale or came from elsewhere (CSRF check). "
                                     "Reload the page and decide again.")
        choice, arguments = str(form.get("decision", "")), None
        if choice == "approve_session" and form.get("confirm") != "yes":
            grant = await self._grant_to_confirm(request, client, form)
            if grant is not None:  # a critical tool: the person confirms on a page of its own
                return self._render(request, "confirm_grant.html", grant=grant)
        try:
            if choice == "approve_edited":  # the card's edited arguments, as JSON
                choice, arguments = "approve", edited_json(str(form.get("arguments", "")))
            await decide(self.store, self.audit, client, request.path_params["id"], choice,
                         message=str(form.get("message", ""))[:MAX_MESSAGE],
                         digest=str(form.get("digest", "")),
                         approver=approver_of(caller_of(request)),
                         judge=partial(self.deciders.refusal, caller_of(request)),
                         arguments=arguments, catalog=self.catalog)
        except DecisionError as exc:
            return self._render(request, "message.html", status=exc.status,
                                heading="Not decided", text=str(exc))
        return self._home(request)

    async def _grant_to_confirm(self, request: Request, client: str, form: Any
                                ) -> dict[str, str] | None:
        """What the confirmation of a session grant says, when its tool is CRITICAL (a
        grant lets any arguments run for a while); ``None`` when none is asked."""
        stored = await visible_request(self.store, request, client)
        if stored is None or stored.request.risk is not ToolRisk.CRITICAL:
            return None
        return {"id": stored.request.id, "tool": plain(stored.request.tool),
                "client": plain(client_of(stored.request.session_id)),
                "for": SESSION_GRANT_FOR, "digest": str(form.get("digest", "")),
                "message": str(form.get("message", ""))[:MAX_MESSAGE]}

    async def preview(self, request: Request) -> Response:
        """An edit of a card's arguments as the card would show it (its own views: a diff
        against the file, a script's lines), checked against the tool's schema first; a
        fragment the page's script puts under the edit box. Changes nothing."""
        client = caller_of(request).client or None
        if client is None:
            return self._login_needed(request)
        form = await request.form(max_files=0, max_fields=4)
        if not self.sessions.csrf_ok(caller_of(request).page_secret, str(form.get("csrf", ""))):
            return self._render(request, "preview.html", status=403, blocks=[],
                                problem="The form is stale (CSRF check): reload the page.")
        stored = await visible_request(self.store, request, client)
        if stored is not None and not await anyio.to_thread.run_sync(
                self.deciders.may, caller_of(request), stored):
            stored = None  # a request this operator may not decide is not theirs to see
        if stored is None:
            return self._render(request, "preview.html", status=404, blocks=[],
                                problem="No such request, or not yours to see.")
        try:
            edited = edit_checked(stored, "approve", edited_json(str(form.get("arguments", ""))),
                                  self.catalog)
        except DecisionError as exc:
            return self._render(request, "preview.html", status=exc.status, blocks=[],
                                problem=str(exc))
        shown = edited if edited is not None else stored.request.arguments
        blocks, note = await anyio.to_thread.run_sync(edit_blocks, stored, shown, self.catalog)
        return self._render(request, "preview.html", blocks=blocks, problem="",
                            note=note or ("" if edited is not None else
                                          "Unchanged: these are the asked arguments."))

    async def decide_many(self, request: Request) -> Response:
        """The selected cards, each decided on its own (bound to the digest its card showed);
        one refused does not stop the others, and the page names each refused one."""
        client = caller_of(request).client or None
        if client is None:
            return self._login_needed(request)
        form = await request.form(max_files=0, max_fields=MAX_BATCH + 4)
        if not self.sessions.csrf_ok(caller_of(request).page_secret, str(form.get("csrf", ""))):
            return self._render(request, "message.html", status=403, heading="Refused",
                                text="The form is stale or came from elsewhere (CSRF check). "
                                     "Reload the page and decide again.")
        picks = [str(p).partition(":") for p in form.getlist("pick")][:MAX_BATCH]
        refused = []
        for request_id, _, digest in picks:
            try:
                await decide(self.store, self.audit, client, request_id,
                             str(form.get("decision", "")),
                             message=str(form.get("batch_message", ""))[:MAX_MESSAGE],
                             digest=digest, approver=approver_of(caller_of(request)),
                             judge=partial(self.deciders.refusal, caller_of(request)))
            except DecisionError as exc:
                refused.append(f"{request_id}: {exc}")
        if not picks or refused:
            return self._render(request, "message.html", status=409 if refused else 400,
                                heading="Not all decided" if refused else "Nothing selected",
                                text=" · ".join(refused) or "Select cards with their check "
                                     "boxes (or x), then approve or deny them together.")
        return self._home(request)

    async def history(self, request: Request) -> Response:
        client = caller_of(request).client or None
        if client is None:
            return self._login_needed(request)
        filters, problem = audit_filters(request, client)
        shown = {k: request.query_params.get(k, "") for k in ("tool", "status", "session",
                                                               "since")}
        if problem:
            return self._render(request, "history.html", status=400, rows=[], problem=problem,
                                filters=shown)
        rows = await anyio.to_thread.run_sync(
            lambda: [history_row(e, n) for n, e in enumerate(query_audit(self.audit, filters))])
        return self._render(request, "history.html", rows=rows, filters=shown, problem="")

    async def login(self, request: Request) -> Response:
        code = request.query_params.get("code", "")
        secret = await anyio.to_thread.run_sync(self.sessions.redeem, code) if code else None
        if secret is None:
            return self._render(
                request, "message.html", status=401, heading="Login link used or expired",
                text="Each login link works once, for 15 minutes. Use the one toolkeeper "
                     "serve printed at its last start, or make a new one with: toolkeeper "
                     "approvals login-url")
        response = self._home(request)
        response.set_cookie(COOKIE, secret, httponly=True, samesite="strict",
                            path=root_of(request) or "/", secure=request.url.scheme == "https",
                            max_age=7 * 24 * 3600)
        return response

    async def logout(self, request: Request) -> Response:
        secret = caller_of(request).page_secret
        form = await request.form(max_files=0, max_fields=2)
        if secret and self.sessions.csrf_ok(secret, str(form.get("csrf", ""))):
            await anyio.to_thread.run_sync(self.sessions.logout, secret)
        response = self._home(request)
        response.delete_cookie(COOKIE, path=root_of(request) or "/")
        return response

    async def favicon(self, _request: Request) -> Response:
        from starlette.responses import FileResponse

        return FileResponse(HERE / "static" / "favicon.svg", media_type="image/svg+xml",
                            headers={"cache-control": "max-age=86400"})

    # -- rendering --------------------------------------------------------------------------

    async def _inbox(self, request: Request, template: str) -> Response:
        client = caller_of(request).client or None
        if client is None:
            return self._login_needed(request)
        wanted, problem = QueueFilter.of(request.query_params)

        caller = caller_of(request)
        keep = partial(self.deciders.may, caller) if self.deciders.policies else None

        def read() -> dict[str, Any]:
            cursor = self.store.last_event()  # read first: a change after it is replayed
            shown = waiting_page(self.store, wanted, session_id=session_of(client),
                                 upstream_of=partial(upstream_of, self.catalog),
                                 keep=keep)  # only what this person may decide
            figures = self.store.figures(settle=False) if session_of(client) is None else None
            failed = failure_line(self.store.db) if client == OPERATOR else ""
            return {"cards": [self._card(s, inline=True) for s in shown.items], "cursor": cursor,
                    "queue": shown, "figures": figures_text(figures) if figures else None,
                    "notify_failure": failed}

        values = await anyio.to_thread.run_sync(read)  # views may read files
        return self._render(request, template, status=400 if problem else 200,
                            wanted=wanted, problem=problem, ages=AGES, risks=RISKS,
                            **values)

    def _card(self, stored: StoredApproval, *, inline: bool = False) -> dict[str, Any]:
        journals = self.journals
        script = journals.script_for(stored.request) if journals is not None else None
        return card(stored, self.catalog, script, inline=inline)

    def _render(self, request: Request, name: str, status: int = 200, **values: Any
                ) -> Response:
        from starlette.responses import HTMLResponse

        secret = caller_of(request).page_secret
        html = self.env.get_template(name).render(
            title=self.title, csrf=self.sessions.csrf(secret) if secret else "",
            root=root_of(request), **values)
        return HTMLResponse(html, status_code=status, headers={"cache-control": "no-store"})

    def _home(self, request: Request) -> Response:
        from starlette.responses import RedirectResponse

        return RedirectResponse(root_of(request) + "/", status_code=303)

    def _login_needed(self, request: Request) -> Response:
        return self._render(request, "login.html", status=401)
