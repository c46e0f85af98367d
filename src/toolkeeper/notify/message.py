"""What a notification says, and how each kind of channel shows it.

A ``Notice`` holds one message about one request: the tool, the client, the risk, why it asks,
the summary of its arguments as the card shows them (already cut and made visible by whoever
made the summary), how long until it expires, the card's link and its buttons. The renderers
turn it into plain text (most services), HTML (email), ntfy's action header, Slack's Block Kit,
a Teams Adaptive Card and toolkeeper's own JSON event. Every value a model could have chosen is
escaped for the format it goes into, and goes where a format cannot read it as markup or a
link: a button is the service's own element, which no argument can forge.
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass, field
from typing import Literal

from ..approval.models import duration
from .text import plain

__all__ = ["Button", "Kind", "Notice", "as_html", "as_json", "as_slack", "as_teams", "as_text",
           "ntfy_actions"]

Kind = Literal["request", "reminder", "escalation", "expired"]
EVENTS: dict[Kind, str] = {"request": "approval.requested", "reminder": "approval.reminder",
                           "escalation": "approval.escalated", "expired": "approval.expired"}


@dataclass(frozen=True, kw_only=True)
class Button:
    """A link shown as a button: ``open`` (the card) or a single-use ``approve`` / ``deny``."""

    label: str
    url: str
    action: Literal["open", "approve", "deny"] = "open"


@dataclass(frozen=True, kw_only=True)
class Notice:
    """One message about one request."""

    kind: Kind
    request_id: str
    tool: str
    client: str
    risk: str
    reason: str
    args_digest: str
    created_at: float
    expires_at: float | None
    summary: tuple[str, ...] = ()
    where: str = ""
    """The card's link (or the command that decides, without a page)."""
    buttons: tuple[Button, ...] = ()
    sent_at: float = field(default_factory=time.time)

    @property
    def title(self) -> str:
        what = f"{plain(self.tool)} ({self.risk}) for {plain(self.client)}"
        if self.kind == "reminder":
            return f"Still waiting for approval: {what}"
        if self.kind == "escalation":
            return f"Escalated, nobody decided for {self.asked_ago}: {what}"
        if self.kind == "expired":
            return f"Expired, it did not run: {what}"
        return f"Approval needed: {what}"

    @property
    def asked_ago(self) -> str:
        return duration(self.sent_at - self.created_at)

    @property
    def expiry(self) -> str:
        """When it expires, in words."""
        if self.kind == "expired":
            lifetime = (self.expires_at or self.sent_at) - self.created_at
            return (f"Nobody decided within {duration(lifetime)}; it did not run. If it is "
                    "still wanted, the client calls again and a new request is asked.")
        if self.expires_at is None:
            return "It does not expire."
        at = time.strftime("%H:%M UTC", time.gmtime(self.expires_at))
        return f"Expires in {duration(self.expires_at - self.sent_at)} (at {at})."

    def lines(self) -> list[str]:
        """The message as lines of text, without its links."""
        head = [f"{plain(self.tool)} waits for a person's decision (request "
                f"{self.request_id}).", f"Client: {plain(self.client)}. Risk: {self.risk}.",
                f"Why it asks: {plain(self.reason)}", self.expiry]
        if self.kind == "expired":
            head = [f"{plain(self.tool)} for {plain(self.client)} (request "
                    f"{self.request_id}).", self.expiry]
        if self.kind != "expired" and self.summary:
            head += ["Arguments (as the card shows them):", *(f"  {s}" for s in self.summary)]
        return head


def as_text(notice: Notice) -> str:
    """Plain text: the lines, then each link on a line of its own (services make them
    clickable)."""
    links = [f"{b.label}: {b.url}" for b in notice.buttons]
    if notice.where and not any(b.url == notice.where for b in notice.buttons):
        links.append(f"Decide: {notice.where}")
    return "\n".join([*notice.lines(), "", *links]).rstrip() + "\n"


_BUTTON = ("display:inline-block;padding:8px 16px;margin:4px 8px 4px 0;border-radius:4px;"
           "text-decoration:none;color:#fff;background:{}")
_COLOURS = {"approve": "#1a7f37", "deny": "#cf222e", "open": "#0969da"}


def as_html(notice: Notice) -> str:
    """HTML for email: every value escaped, the buttons as styled links, and each link also
    written out (the text part a mail client shows is made from this HTML)."""
    esc = html.escape
    parts = [f"<p><strong>{esc(notice.title)}</strong></p>"]
    parts += [f"<p>{esc(line)}</p>" for line in notice.lines()
              if not line.startswith("  ") and not line.startswith("Arguments")]
    if notice.summary and notice.kind != "expired":
        rows = "\n".join(esc(s) for s in notice.summary)
        parts.append(f"<p>Arguments (as the card shows them):</p><pre>{rows}</pre>")
    buttons = "".join(f'<a href="{esc(b.url, quote=True)}" style="{_BUTTON.format(_COLOURS[b.action])}">'
                      f"{esc(b.label)}</a>" for b in notice.buttons)
    if buttons:
        parts.append(f"<p>{buttons}</p>")
    links = [f"{esc(b.label)}: {esc(b.url)}" for b in notice.buttons]
    if notice.where and not notice.buttons:
        links.append(f"Decide: {esc(notice.where)}")
    if links:
        parts.append("<p>" + "<br>".join(links) + "</p>")
    return "\n".join(parts)


def ntfy_actions(notice: Notice) -> str:
    """ntfy's ``X-Actions`` header: a ``view`` action per button (ntfy shows three); the
    labels are ours and hold no comma or semicolon."""
    return "; ".join(f"view, {b.label}, {b.url}, clear=true" for b in notice.buttons[:3])


def _slack_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def as_slack(notice: Notice) -> dict[str, object]:
    """Slack's Block Kit (incoming webhooks; Mattermost and Rocket.Chat take it too): the
    text escaped (no argument can make a link or a mention), the arguments in a code block,
    the buttons as link buttons."""
    blocks: list[dict[str, object]] = [
        {"type": "header", "text": {"type": "plain_text", "text": notice.title[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _slack_text(
            "\n".join(line for line in notice.lines() if not line.startswith(("  ", "Arg"))))}}]
    if notice.summary and notice.kind != "expired":
        code = _slack_text("\n".join(notice.summary).replace("```", "`\u200b``"))
        blocks.append({"type": "section", "text": {"type": "mrkdwn",
                                                   "text": f"```{code[:2900]}```"}})
    if notice.buttons:
        blocks.append({"type": "actions", "elements": [
            {"type": "button", "text": {"type": "plain_text", "text": b.label},
             "url": b.url, "action_id": f"{b.action}-{n}",
             **({"style": "primary"} if b.action == "approve" else
                {"style": "danger"} if b.action == "deny" else {})}
            for n, b in enumerate(notice.buttons)]})
    return {"text": _slack_text(notice.title), "blocks": blocks}


def as_teams(notice: Notice) -> dict[str, object]:
    """A message with an Adaptive Card (a Teams workflow's webhook): text in ``TextRun``s,
    which Teams shows as written (no markdown, so no argument makes a link), the buttons as
    ``Action.OpenUrl``."""
    runs = [{"type": "TextRun", "text": line} for line in notice.lines()
            if not line.startswith(("  ", "Arg"))]
    body: list[dict[str, object]] = [
        {"type": "TextBlock", "text": notice.title, "weight": "Bolder", "wrap": True,
         "size": "Medium"}]
    body += [{"type": "RichTextBlock", "inlines": [run]} for run in runs]
    if notice.summary and notice.kind != "expired":
        body.append({"type": "RichTextBlock", "inlines": [
            {"type": "TextRun", "text": "\n".join(notice.summary), "fontType": "Monospace"}]})
    card = {"type": "AdaptiveCard", "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
            "version": "1.4", "body": body,
            "actions": [{"type": "Action.OpenUrl", "title": b.label, "url": b.url}
                        for b in notice.buttons]}
    return {"type": "message", "attachments": [
        {"contentType": "application/vnd.microsoft.card.adaptive", "content": card}]}


def as_json(notice: Notice) -> dict[str, object]:
    """toolkeeper's own event, for a team's bot: what happened, the request, the summary, the
    buttons (with the action each takes)."""
    return {
        "event": EVENTS[notice.kind], "title": notice.title, "text": as_text(notice),
        "request": {"id": notice.request_id, "tool": notice.tool, "client": notice.client,
                    "risk": notice.risk, "reason": notice.reason,
                    "args_digest": notice.args_digest, "created_at": notice.created_at,
                    "expires_at": notice.expires_at},
        "summary": list(notice.summary), "where": notice.where,
        "buttons": [{"label": b.label, "url": b.url, "action": b.action}
                    for b in notice.buttons],
        "sent_at": notice.sent_at,
    }
