"""What a request to the page or the API says: who asks (the ``Caller`` the gate found), where
the page is mounted, and the audit filters its query string asks for."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from ..approval.store import SqliteApprovalStore, StoredApproval
from ..core.context import CALLER_KEY, Caller
from ..invoke.audit import AuditLog
from .views import session_of

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = ["NOBODY", "audit_filters", "caller_of", "query_audit", "root_of", "visible_request"]

NOBODY = Caller(channel="page")


def caller_of(request: Request) -> Caller:
    """Who asks, as the gate found (nobody: an empty caller)."""
    found = request.scope.get("state", {}).get(CALLER_KEY)
    return found if isinstance(found, Caller) else NOBODY


def root_of(request: Request) -> str:
    """The path the page is mounted at ("" at the top), for links, redirects and the cookie."""
    return str(request.scope.get("root_path", "")).rstrip("/")


async def visible_request(store: SqliteApprovalStore, request: Request, client: str
                          ) -> StoredApproval | None:
    """The request named in the path, if this client may see it: another client's request
    does not exist for it."""
    stored = await anyio.to_thread.run_sync(store.get, request.path_params["id"])
    scope = session_of(client)
    if stored is None or (scope is not None and stored.request.session_id != scope):
        return None
    return stored


def audit_filters(request: Request, client: str) -> tuple[dict[str, Any], str]:
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


def query_audit(audit: AuditLog | None, filters: dict[str, Any]) -> list[Any]:
    """The audit entries the filters select (none without an audit log)."""
    if audit is None:
        return []
    since = filters.pop("since", None)
    entries = audit.query(**filters)
    return [e for e in entries if since is None or e.ts >= since]
