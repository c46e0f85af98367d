"""The inbox's queue: the waiting requests a caller may see, filtered (client, tool, risk,
upstream, age) and searched on the server, a page at a time — so a thousand waiting requests
cost one page of cards, not a thousand."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlencode

from ..approval.models import ApprovalRequest
from ..approval.store import SqliteApprovalStore, StoredApproval
from ..core.risk import ToolRisk
from ..toolbox.catalog import CatalogBase
from .views import client_of

__all__ = ["AGES", "PAGE_SIZE", "RISKS", "QueueFilter", "QueuePage", "upstream_of",
           "waiting_page"]

PAGE_SIZE = 25
"""Cards on one page of the inbox."""
AGES: dict[str, float] = {"": 0.0, "5m": 300.0, "1h": 3600.0, "1d": 86400.0}
"""The age filter's choices: waiting at least this long (seconds)."""
RISKS = tuple(r.value for r in ToolRisk)
_WAITING = ("SELECT id, session_id, tool, request, updated_at FROM approvals WHERE state = "
            "'pending'")


@dataclass(frozen=True, kw_only=True)
class QueueFilter:
    """What the inbox shows: each field empty for any; ``q`` a case-insensitive search of the
    tool, the client, why it asks and the arguments."""

    client: str = ""
    tool: str = ""
    risk: str = ""
    upstream: str = ""
    age: str = ""
    q: str = ""
    page: int = 1

    @classmethod
    def of(cls, params: Mapping[str, str]) -> tuple[QueueFilter, str]:
        """The filter a query string asks for, and what is wrong with it ("" when nothing)."""
        values = {k: str(params.get(k, "")).strip()[:200] for k in
                  ("client", "tool", "risk", "upstream", "age", "q")}
        page = str(params.get("page", "1") or "1")
        problem = ""
        if values["risk"] and values["risk"] not in RISKS:
            problem, values["risk"] = f"risk must be one of {', '.join(RISKS)}", ""
        if values["age"] not in AGES:
            problem, values["age"] = f"age must be one of {', '.join(a for a in AGES if a)}", ""
        if not page.isdigit() or int(page) < 1:
            problem, page = "page must be a whole number from 1", "1"
        return cls(**values, page=int(page)), problem

    def query(self, page: int | None = None) -> str:
        """This filter as a query string (for the pager's links)."""
        fields = {"client": self.client, "tool": self.tool, "risk": self.risk,
                  "upstream": self.upstream, "age": self.age, "q": self.q,
                  "page": str(page or self.page)}
        return urlencode({k: v for k, v in fields.items() if v and (k != "page" or v != "1")})


@dataclass(frozen=True, kw_only=True)
class QueuePage:
    """One page of the waiting requests that pass a filter, oldest first, and the choices the
    filter's lists offer (every client, tool and upstream waiting now)."""

    items: list[StoredApproval]
    total: int
    page: int
    pages: int
    clients: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    upstreams: list[str] = field(default_factory=list)


def waiting_page(store: SqliteApprovalStore, wanted: QueueFilter, *, session_id: str | None,
                 upstream_of: Callable[[str], str],
                 keep: Callable[[StoredApproval], bool] | None = None) -> QueuePage:
    """The page ``wanted`` asks for of the requests waiting now (of ``session_id`` only, for a
    client; every one for the operator), of those ``keep`` passes (the ones this person may
    decide; its lists offer only those too). Blocking: run it in a thread."""
    store.settle()
    rows = store.db.query(_WAITING + (" AND session_id = ?" if session_id else "") +
                          " ORDER BY updated_at", (session_id,) if session_id else ())
    now, needle, passed = time.time(), wanted.q.casefold(), []
    clients, tools, upstreams = set(), set(), set()
    for request_id, session, tool, raw, updated in rows:
        if keep is not None and not keep(StoredApproval(
                request=ApprovalRequest.model_validate_json(str(raw)), state="pending")):
            continue
        client, name, upstream = client_of(str(session)), str(tool), upstream_of(str(tool))
        clients.add(client)
        tools.add(name)
        if upstream:
            upstreams.add(upstream)
        if _passes(wanted, client, name, upstream, now - float(str(updated))) and \
                _matches(wanted, needle, str(raw)):
            passed.append((str(request_id), str(raw)))
    pages = max(1, -(-len(passed) // PAGE_SIZE))
    page = min(wanted.page, pages)
    shown = passed[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
    items = [StoredApproval(request=ApprovalRequest.model_validate_json(raw), state="pending")
             for _, raw in shown]
    return QueuePage(items=items, total=len(passed), page=page, pages=pages,
                     clients=sorted(clients), tools=sorted(tools), upstreams=sorted(upstreams))


def upstream_of(catalog: CatalogBase | None, name: str) -> str:
    """The upstream MCP server a gateway tool comes from ("" for any other tool)."""
    tool = catalog.get(name) if catalog is not None else None
    if tool is None or tool.metadata.source != "mcp":
        return ""
    return str(getattr(tool, "namespace", "") or "")


def _passes(wanted: QueueFilter, client: str, tool: str, upstream: str, age: float) -> bool:
    return ((not wanted.client or wanted.client == client)
            and (not wanted.tool or wanted.tool == tool)
            and (not wanted.upstream or wanted.upstream == upstream)
            and age >= AGES.get(wanted.age, 0.0))


def _matches(wanted: QueueFilter, needle: str, raw: str) -> bool:
    """Whether a stored request (its JSON) has the risk asked for and holds the search's text
    in its tool, session, reason or arguments (read only when a risk or a search is asked)."""
    if not needle and not wanted.risk:
        return True
    request = json.loads(raw)
    if wanted.risk and request.get("risk") != wanted.risk:
        return False
    text = json.dumps([request.get("tool"), request.get("session_id"), request.get("reason"),
                       request.get("arguments")], ensure_ascii=False, default=str)
    return needle in text.casefold()
