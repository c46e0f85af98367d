"""The pages behind a notification's decision links (``direct_decisions = true``).

``GET /notify/{token}`` decides nothing — mail scanners and chat previews open links — it shows
the request's card and one button. That button POSTs to the same address (the gate refuses a
POST whose ``Origin`` is not this server's, and the form carries a confirmation derived from
the token), which spends the link (single-use) and decides through the same path as the page:
bound to the arguments' digest the link was made for, refused once the request is decided or
expired, recorded with the approver ``notify:CHANNEL``.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from ..approval.store import SqliteApprovalStore, StoredApproval
from ..invoke.audit import AuditLog
from ..notify.links import DecisionLinks, Link
from .clients import OPERATOR
from .decide import DecisionError, decide
from .page import HERE
from .requests import root_of
from .views import card

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute

    from ..toolbox.catalog import CatalogBase

__all__ = ["DecisionLinkPage", "confirmation"]

_VERBS = {"approve": "Approve", "deny": "Deny"}


def confirmation(token: str) -> str:
    """What the link's form sends back: a value only its page holds (derived from the token)."""
    return hmac.new(token.encode("utf-8"), b"toolkeeper decision link", hashlib.sha256
                    ).hexdigest()[:32]


class DecisionLinkPage:
    """``/notify/{token}``: the link's page (GET) and its one decision (POST)."""

    def __init__(self, store: SqliteApprovalStore, audit: AuditLog | None,
                 links: DecisionLinks, *, title: str = "toolkeeper",
                 catalog: CatalogBase | None = None) -> None:
        from jinja2 import Environment, FileSystemLoader, select_autoescape

        self.store, self.audit, self.links = store, audit, links
        self.title, self.catalog = title, catalog
        self.env = Environment(loader=FileSystemLoader(HERE / "templates"),
                               autoescape=select_autoescape(default=True,
                                                            default_for_string=True))

    def routes(self) -> list[BaseRoute]:
        from starlette.routing import Route

        return [Route("/notify/{token}", self.show, methods=["GET"]),
                Route("/notify/{token}", self.decide, methods=["POST"])]

    async def show(self, request: Request) -> Response:
        token = request.path_params["token"]
        link = await anyio.to_thread.run_sync(self.links.find, token)
        stored = await self._stored(link)
        if link is None or stored is None:
            return self._message(request, 404, "Unknown link", "This decision link does not "
                                 "exist (or it is older than a week). Open the approval page.")
        if not link.live() or stored.state != "pending":
            return self._spent(request, link, stored)
        shown = await anyio.to_thread.run_sync(card, stored, self.catalog)
        return self._render(request, "decision_link.html", 200, card=shown, token=token,
                            confirm=confirmation(token), choice=link.choice,
                            verb=_VERBS[link.choice], channel=link.channel)

    async def decide(self, request: Request) -> Response:
        token = request.path_params["token"]
        form = await request.form(max_files=0, max_fields=2)
        if not hmac.compare_digest(str(form.get("confirm", "")), confirmation(token)):
            return self._message(request, 403, "Refused", "The form did not come from this "
                                 "link's page. Open the link again and press its button.")
        link = await anyio.to_thread.run_sync(self.links.use, token)
        if link is None:
            found = await anyio.to_thread.run_sync(self.links.find, token)
            stored = await self._stored(found)
            if found is None or stored is None:
                return self._message(request, 404, "Unknown link", "This decision link does "
                                     "not exist. Open the approval page.")
            return self._spent(request, found, stored)
        try:
            after = await decide(self.store, self.audit, OPERATOR, link.request_id,
                                 link.choice, digest=link.args_digest, approver=link.approver)
        except DecisionError as exc:
            return self._message(request, exc.status, "Not decided", str(exc))
        verb = "Approved" if link.choice == "approve" else "Denied"
        return self._message(request, 200, verb, (
            f"{verb}: '{after.request.tool}' (request {after.request.id}), recorded as decided "
            f"through {link.channel}. " + ("It runs once, when its client calls again (or at "
                                           "once, if the call still waits)."
                                           if link.choice == "approve" else "It will not run.")))

    async def _stored(self, link: Link | None) -> StoredApproval | None:
        if link is None:
            return None
        return await anyio.to_thread.run_sync(self.store.get, link.request_id)

    def _spent(self, request: Request, link: Link, stored: StoredApproval) -> Response:
        """Why a link no longer decides: used, expired, or its request decided."""
        if stored.state == "expired":
            why = ("its request expired: nobody decided in time, and the call did not run. If "
                   "it is still wanted, the client calls again and a new request is asked.")
        elif stored.state != "pending":
            why = f"its request was already decided ({stored.state}); the first decision stands."
        elif link.used_at is not None:
            why = "it was used already (each link works once)."
        else:
            why = "it expired with its request."
        return self._message(request, 410, "Link no longer valid", f"This link decides "
                             f"nothing: {why}")

    def _message(self, request: Request, status: int, heading: str, text: str) -> Response:
        return self._render(request, "message.html", status, heading=heading, text=text)

    def _render(self, request: Request, name: str, status: int, **values: Any) -> Response:
        from starlette.responses import HTMLResponse

        html = self.env.get_template(name).render(title=self.title, csrf="",
                                                  root=root_of(request), **values)
        return HTMLResponse(html, status_code=status,
                            headers={"cache-control": "no-store", "x-robots-tag": "noindex"})
