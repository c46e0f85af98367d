"""The inbox's queue on the server: filters (client, tool, risk, upstream, age), search and
paging over a real SQLite store, and a query string that asks for something unknown."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

from toolkeeper import tool
from toolkeeper.approval import ApprovalRequest, SqliteApprovalStore
from toolkeeper.approval.models import args_digest
from toolkeeper.core.metadata import ToolMetadata
from toolkeeper.server.queue import PAGE_SIZE, QueueFilter, upstream_of, waiting_page
from toolkeeper.toolbox import Toolbox


@tool(risk="high")
def local_write(text: str) -> str:
    """Write locally."""
    return text


@tool(risk="critical", namespace="crm", metadata=ToolMetadata(source="mcp"))
def delete_contact(name: str) -> str:
    """Delete a contact upstream."""
    return name


def _store(tmp_path: Path) -> SqliteApprovalStore:
    store, now = SqliteApprovalStore(tmp_path / "q.db"), time.time()
    for n in range(60):
        name, risk = ("crm-delete_contact", "critical") if n % 3 == 0 else ("local_write", "high")
        arguments: dict[str, object] = {"text": "the Needle" if n == 42 else f"t{n}"}
        store.create(ApprovalRequest(
            call_id=f"c{n}", tool=name, risk=risk, arguments=arguments,
            args_digest=args_digest(arguments), session_id=f"client-{'bob' if n % 2 else 'eve'}",
            created_at=now, expires_at=now + 3600))
    with store.db.transaction() as conn:  # the first ten have waited two hours
        conn.execute("UPDATE approvals SET updated_at = updated_at - 7200 WHERE id IN (SELECT id "
                     "FROM approvals ORDER BY updated_at LIMIT 10)")
    return store


def _page(store: SqliteApprovalStore, box: Toolbox, session: str | None = None,
          **wanted: str) -> tuple[int, int, list[str]]:
    shown = waiting_page(store, QueueFilter.of(wanted)[0], session_id=session,
                         upstream_of=partial(upstream_of, box))
    return shown.total, shown.pages, [str(s.request.arguments["text"]) for s in shown.items]


def test_the_queue_is_filtered_searched_and_paged_on_the_server(tmp_path: Path) -> None:
    store, box = _store(tmp_path), Toolbox([local_write, delete_contact])
    total, pages, first = _page(store, box)
    assert (total, pages, len(first)) == (60, -(-60 // PAGE_SIZE), PAGE_SIZE)
    assert first[0] == "t0"  # the oldest first
    assert _page(store, box, page="3")[2] == [f"t{n}" for n in range(2 * PAGE_SIZE, 60)]
    assert _page(store, box, client="bob")[0] == 30
    assert _page(store, box, tool="local_write")[0] == 40
    assert _page(store, box, risk="critical")[0] == 20
    assert _page(store, box, upstream="crm")[0] == 20
    assert _page(store, box, age="1h")[0] == 10
    assert _page(store, box, q="needle")[2] == ["the Needle"]
    assert _page(store, box, client="eve", risk="critical", age="1h")[0] == 2  # 0, 6
    assert _page(store, box, session="client-bob", client="eve")[0] == 0  # a client sees its own
    shown = waiting_page(store, QueueFilter(), session_id=None,
                         upstream_of=partial(upstream_of, box))
    assert (shown.clients, shown.upstreams) == (["bob", "eve"], ["crm"])


def test_a_filter_asking_for_something_unknown_says_what_it_takes() -> None:
    assert "risk must be one of safe, sensitive, high, critical" in \
        QueueFilter.of({"risk": "low"})[1]
    assert "age must be one of 5m, 1h, 1d" in QueueFilter.of({"age": "3w"})[1]
    assert "page must be a whole number" in QueueFilter.of({"page": "-1"})[1]
    assert QueueFilter.of({"tool": "x", "page": "2"})[0].query(3) == "tool=x&page=3"
