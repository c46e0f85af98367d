"""How approval requests and audit rows are shown: JSON for the API, cards and rows for the page.

Arguments are attacker-controlled (a model can be talked into sending markup, scripts,
look-alike characters or megabytes): a card shows them through a card view (the tool's own,
one registered in ``cards``, or the generic one), rendered by ``card_text`` — complete,
numbered, wrapped, with odd characters flagged where they are."""

from __future__ import annotations

import copy
import json
import logging
import time
import unicodedata
from dataclasses import asdict
from typing import Any

from ..approval.journal import ScriptView
from ..approval.models import NEVER_S, SESSION_GRANT_S, args_digest, duration
from ..approval.store import QueueFigures, StoredApproval
from ..builtins.fs import visible
from ..core.spec import ToolLike
from ..invoke.audit import AuditEntry
from ..toolbox.catalog import CatalogBase
from .card_builtins import BUILTIN_VIEWS, generic_sections
from .card_text import Block, Inline, diff_block, plain, rows_block, shown_as_is, text_block, url_block
from .cards import RowsSection, Section, TextSection, find_card_view, sections_of
from .clients import OPERATOR

__all__ = ["SESSION_GRANT_FOR", "SESSION_GRANT_LABEL", "approval_json", "audit_json", "card", "card_sections",
           "client_of", "decided_text", "edit_blocks", "edit_json", "figures_text", "history_row",
           "script_sections", "session_of"]

log = logging.getLogger(__name__)


def client_of(session_id: str) -> str:
    """The client a session belongs to (``client-NAME`` → ``NAME``)."""
    return session_id.removeprefix("client-") if session_id.startswith("client-") else session_id


def session_of(client: str) -> str | None:
    """The session filter for a client: ``None`` (everything) for the operator."""
    return None if client == OPERATOR else f"client-{client}"


def approval_json(stored: StoredApproval) -> dict[str, Any]:
    request, decision = stored.request, stored.decision
    return {
        "id": request.id, "tool": request.tool, "risk": request.risk.value,
        "state": stored.state, "arguments": request.arguments,
        "args_digest": request.args_digest, "client": client_of(request.session_id),
        "session": request.session_id, "reason": request.reason,
        "created_at": request.created_at, "expires_at": request.expires_at,
        "decision": decision.model_dump() if decision is not None else None,
        "run_digest": args_digest(decision.arguments)
        if decision is not None and decision.arguments is not None else None,
        "result": stored.result,
    }


def audit_json(entry: AuditEntry) -> dict[str, Any]:
    return {**asdict(entry), "client": client_of(entry.session_id)}


def shown_json(value: Any) -> str:
    """Pretty JSON with every invisible character made visible (line by line, so the
    indentation's own newlines stay)."""
    text = json.dumps(value, ensure_ascii=False, indent=2, default=str)
    return "\n".join(visible(line) for line in text.split("\n"))


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


SESSION_GRANT_FOR = _age(SESSION_GRANT_S)
SESSION_GRANT_LABEL = f"Approve for this client for {SESSION_GRANT_FOR} (any arguments)"
"""The button of the ``approve_session`` choice: it binds to one client, for a while, and lets
the tool run with any arguments meanwhile."""


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def card_sections(tool: str, arguments: dict[str, Any], catalog: CatalogBase | None
                  ) -> tuple[list[Section], str, bool]:
    """(the sections of a card, a note about the view, whether to add every argument as
    sent below them): a registered view first, then a built-in tool's, else the generic one."""
    view = find_card_view(tool)
    try:
        if view is not None:
            return sections_of(view(copy.deepcopy(arguments))), "", True
        builtin = BUILTIN_VIEWS.get(tool)
        found = catalog.get(tool) if builtin is not None and catalog is not None else None
        made = builtin(found if isinstance(found, ToolLike) else None, arguments) \
            if builtin is not None else None
        if made is not None:
            return made, "", False
    except Exception as exc:  # a view is code of its own: its failure must not hide the call
        log.warning("card view of %r failed", tool, exc_info=True)
        reason = plain(f"{type(exc).__name__}: {exc}")
        reason = reason if len(reason) <= 300 else reason[:300] + " …"
        return generic_sections(arguments), (f"The card view of this tool failed ({reason}); "
                                             "the arguments are shown as sent."), False
    return generic_sections(arguments), "", False


def render(sections: list[Section], anchor: str, inline: Inline | None = None
           ) -> list[Block]:
    """Sections as blocks for the template (ids ``{anchor}-{n}``…); with ``inline``, only
    what its budget allows (each block says what it left out)."""
    blocks = []
    for n, section in enumerate(sections):
        at = f"{anchor}-{n}"
        if section.kind == "text":
            blocks.append(text_block(section.title, section.text, anchor=at, note=section.note,
                                     marked=section.marked, inline=inline))
        elif section.kind == "diff":
            blocks.append(diff_block(section.title, section.old, section.new, anchor=at,
                                     note=section.note, inline=inline))
        elif section.kind == "url":
            blocks.append(url_block(section.title, section.url, section.method, anchor=at,
                                    note=section.note))
        else:
            rows = [(k, v if isinstance(v, str) else json.dumps(v)) for k, v in section.rows]
            blocks.append(rows_block(section.title, rows, anchor=at, note=section.note,
                                     inline=inline))
    return blocks


def decided_text(approver: str, outcome: str) -> str:
    """Who decided, in words (the timeout and announcements are not people)."""
    if approver == "timeout" and outcome == "approved":
        return "approved automatically after the timeout"
    if outcome == "expired":
        return "expired: nobody decided in time"
    if approver == "fire_and_continue":
        return "ran without waiting (announced, not asked)"
    return f"{outcome} by {plain(approver)}" if approver else outcome


def script_sections(script: ScriptView) -> list[Section]:
    """The script a call came from (a code-mode run's): the code with the call's line marked,
    and the calls it made before."""
    where = (f"line {script.line} (marked) is this call, as the script's side reported it; "
             "the call itself is what is shown above" if script.line is not None else
             "the line of this call is not known: the whole script is shown")
    sections: list[Section] = [TextSection(
        title="the script this call came from (tool_chain)", text=script.code, note=where,
        marked=script.line)]
    if script.before:
        sections.append(RowsSection(
            title="calls the script made before this one (answered, not run again, when it "
                  "resumes)",
            rows=[(f"call {n}", f"{tool}: {status}")
                  for n, (tool, status) in enumerate(script.before, 1)]))
    return sections


def card(stored: StoredApproval, catalog: CatalogBase | None = None,
         script: ScriptView | None = None, *, inline: bool = False) -> dict[str, Any]:
    """What a card shows (the template escapes every value but the blocks' own HTML); a call
    a code-mode script made shows the ``script`` below it. ``inline`` (the inbox's cards)
    renders at most ``card_text.INLINE_*`` of it: a card cut so (``cut``) says how much it left
    out and is approved only from the request's own page, which shows everything."""
    request, now = stored.request, time.time()
    expires, state = request.expires_at, str(stored.state)
    expired = state == "expired" or (state == "pending" and expires is not None
                                     and expires <= now)
    sections, note, raw_too = card_sections(request.tool, request.arguments, catalog)
    if script is not None:
        sections = [*sections, *script_sections(script)]
    anchor = f"c-{request.id}"
    decision = stored.decision
    budget = Inline() if inline else None
    blocks = render(sections, anchor, budget)
    raw = render(generic_sections(request.arguments), anchor + "-raw", budget) if raw_too else []
    cut = budget is not None and bool(budget.cut_lines or budget.cut_chars)
    return {
        "id": request.id, "tool": plain(request.tool), "risk": request.risk.value,
        "state": "expired" if expired else state,
        "approvable": state == "pending" and not expired,
        "client": plain(client_of(request.session_id)),
        "session": plain(request.session_id), "reason": plain(request.reason),
        "age": _age(now - request.created_at), "asked_at": _when(request.created_at),
        "expires": "never" if expires is None or expires - request.created_at >= NEVER_S / 2
        else "expired" if expires <= now else
        f"in {_age(expires - now)}",
        "blocks": blocks, "view_note": note, "raw": raw, "cut": cut,
        "cut_note": f"{budget.cut_lines:,} lines or rows, {budget.cut_chars:,} characters"
        if budget is not None and cut else "",
        "digest": request.args_digest, "session_grant": SESSION_GRANT_LABEL,
        "grant_for": SESSION_GRANT_FOR,
        "edit_json": "" if cut else edit_json(request.arguments),
        "edited": bool(decision and decision.arguments is not None),
        "decision": decision.outcome if decision else None,
        "decided": decided_text(decision.approver, decision.outcome) if decision else "",
        "decided_at": _when(decision.decided_at) if decision else "",
        "decided_ago": _age(now - decision.decided_at) if decision else "",
        "message": plain(decision.message) if decision and decision.outcome != "expired"
        else "",
    }


MAX_EDIT = 512 * 1024
"""The longest arguments (as JSON characters) a card offers to edit in its box."""


def edit_blocks(stored: StoredApproval, arguments: dict[str, Any],
                catalog: CatalogBase | None = None) -> tuple[list[Block], str]:
    """An edit of ``stored``'s arguments through the card's own views (a write as its diff
    against the file, a command as its text): the blocks and the view's note."""
    sections, note, _ = card_sections(stored.request.tool, arguments, catalog)
    return render(sections, f"p-{stored.request.id}"), note


def figures_text(figures: QueueFigures) -> dict[str, str]:
    """The queue's figures as the inbox says them."""
    def said(seconds: float | None) -> str:
        return "—" if seconds is None else duration(seconds)

    return {"waiting": f"{figures.waiting} waiting",
            "oldest": f"oldest {said(figures.oldest_s)}" if figures.waiting else "",
            "decision": f"time to decision: median {said(figures.median_s)}, "
                        f"p95 {said(figures.p95_s)}",
            "expired": f"{figures.expired} expired"}


def edit_json(arguments: dict[str, object]) -> str:
    """The arguments as the edit box holds them: indented JSON in which every invisible,
    control, bidi, separator or private character but the space and the newline, and every
    blank-looking one the card escapes too (``card_text.BLANK_LOOKING``: U+3164 HANGUL
    FILLER…), is written as its ``\\uXXXX`` escape (a box shows characters as they are; these
    would hide or reorder what the person edits). The escapes read back as the same characters. Empty when
    the arguments are longer than ``MAX_EDIT`` characters (edit those through the API)."""
    text = json.dumps(arguments, ensure_ascii=False, indent=2, default=str)
    if len(text) > MAX_EDIT:
        return ""
    return "".join(_escaped(ch) for ch in text)


def _escaped(ch: str) -> str:
    if ch in " \n" or (unicodedata.category(ch)[0] not in "CZ" and shown_as_is(ch)):
        return ch
    code = ord(ch)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # a surrogate pair, as JSON writes it
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def history_row(entry: AuditEntry, n: int = 0) -> dict[str, Any]:
    anchor = f"h-{n}"
    code = entry.error_code or ""
    return {
        "when": _when(entry.ts), "tool": plain(entry.tool), "status": entry.status,
        "error_code": "" if code == entry.status else code,
        "client": plain(client_of(entry.session_id)), "session": plain(entry.session_id),
        "duration": f"{entry.duration_ms:.1f} ms",
        "arguments": text_block("arguments", json.dumps(entry.arguments, ensure_ascii=False,
                                                        indent=2, default=str), anchor=anchor),
        "approval_id": entry.approval_id or "",
        "decision": plain(entry.decision or ""),
        "decided": decided_text(entry.approver or "", entry.decision or "")
        if entry.approver else plain(entry.decision or ""),
        "call_id": plain(entry.call_id),
    }
