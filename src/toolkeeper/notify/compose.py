"""One ``Notice`` per message: the request as the card shows it, and its buttons — the card
(the person's login decides), or with direct decisions single-use links that approve or deny."""

from __future__ import annotations

from collections.abc import Callable

from ..approval.models import ApprovalRequest
from .links import DecisionLinks
from .message import Button, Kind, Notice
from .routing import client_of
from .text import cut_lines, generic_summary, mask_secrets

__all__ = ["LINK_PATH", "Composer", "Summarize"]

Summarize = Callable[[str, dict[str, object]], list[str]]
"""(tool, arguments with their secrets masked) → the lines of the summary."""
LINK_PATH = "/notify/"
"""Where a decision link's page is, below the approval page's address."""


class Composer:
    """Makes each message. ``base_url`` says where the approval page is reached now (``None``
    without one: the message then names the command that decides, and has no buttons);
    ``where`` says where a person decides a request (the service's ``where``); ``links``
    (direct decisions) issues single-use links."""

    def __init__(self, *, base_url: Callable[[], str | None], where: Callable[[str], str],
                 summarize: Summarize = generic_summary,
                 links: DecisionLinks | None = None) -> None:
        self.base_url, self.where, self.summarize, self.links = base_url, where, summarize, links

    def notice(self, request: ApprovalRequest, kind: Kind, channel: str) -> Notice:
        """The message about ``request`` for ``channel`` (blocking: a direct decision's links
        are written to the store)."""
        base = (self.base_url() or "").rstrip("/")
        card = f"{base}/approvals/{request.id}" if base else self.where(request.id)
        masked = mask_secrets(request.arguments)
        summary = cut_lines(self.summarize(request.tool, masked if isinstance(masked, dict)
                                           else {}))
        return Notice(kind=kind, request_id=request.id, tool=request.tool,
                      client=client_of(request.session_id), risk=request.risk.value,
                      reason=request.reason, args_digest=request.args_digest,
                      created_at=request.created_at, expires_at=request.expires_at,
                      summary=summary, where=card,
                      buttons=self._buttons(request, kind, channel, base, card))

    def _buttons(self, request: ApprovalRequest, kind: Kind, channel: str, base: str,
                 card: str) -> tuple[Button, ...]:
        if kind == "expired" or not base:
            return ()
        opens = Button(label="Open the card", url=card)
        if self.links is None:
            return (opens,)
        approve = self.links.issue(request, "approve", channel)
        deny = self.links.issue(request, "deny", channel)
        return (Button(label="Approve", url=f"{base}{LINK_PATH}{approve}", action="approve"),
                Button(label="Deny", url=f"{base}{LINK_PATH}{deny}", action="deny"), opens)
