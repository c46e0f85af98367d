"""How approval requests and audit rows are shown: JSON for the API, escaped-ready text for the
page. Arguments are attacker-controlled (a model can be talked into sending markup, scripts,
look-alike characters or megabytes): they are shown complete, with control, invisible and bidi
characters written as escapes, and the template engine escapes the rest."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Any

from ..approval.store import StoredApproval
from ..builtins.fs import visible
from ..invoke.audit import AuditEntry
from .clients import OPERATOR

__all__ = ["approval_json", "audit_json", "card", "client_of", "session_of"]


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


def card(stored: StoredApproval) -> dict[str, Any]:
    """What a card shows (the template escapes every value)."""
    request, now = stored.request, time.time()
    shown = shown_json(request.arguments)
    ascii_view = json.dumps(request.arguments, ensure_ascii=True, indent=2, default=str)
    expires = request.expires_at
    return {
        "id": request.id, "tool": visible(request.tool), "risk": request.risk.value,
        "state": stored.state, "client": visible(client_of(request.session_id)),
        "session": visible(request.session_id), "reason": request.reason,
        "age": _age(now - request.created_at),
        "expires": (("in " + _age(expires - now)) if expires > now else "expired")
        if expires else "never",
        "arguments": shown, "size": len(shown),
        "non_ascii": not shown.isascii(), "ascii_arguments": ascii_view,
        "digest": request.args_digest,
        "decision": stored.decision.outcome if stored.decision else None,
        "message": stored.decision.message if stored.decision else "",
        "approver": stored.decision.approver if stored.decision else "",
    }


def history_row(entry: AuditEntry) -> dict[str, Any]:
    return {
        "when": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.ts)),
        "tool": visible(entry.tool), "status": entry.status,
        "error_code": entry.error_code or "", "client": visible(client_of(entry.session_id)),
        "session": visible(entry.session_id), "duration": f"{entry.duration_ms:.1f} ms",
        "arguments": shown_json(entry.arguments), "approval_id": entry.approval_id or "",
        "decision": visible(entry.decision or ""), "approver": visible(entry.approver or ""),
        "call_id": visible(entry.call_id),
    }
