"""The ids of the requests a process sends its sessions' clients (a tool's ``ctx.elicit``,
``ctx.sample``): two processes on one real SQLite store number theirs apart, so a session's
client asked by both at once never sees one id twice. (Served for real, through a load
balancer over three replicas: tests/server/test_replicas_sessions.py.)"""

from __future__ import annotations

from pathlib import Path

from toolkeeper.mcp.session_answers import ID_SPAN, RequestIds
from toolkeeper.mcp.session_store import SessionStore


def test_two_processes_on_one_store_send_their_sessions_requests_under_different_ids(
        tmp_path: Path) -> None:
    first, second = (RequestIds(SessionStore(tmp_path / "store.db").process_number())
                     for _ in range(2))
    ones = [first.next() for _ in range(1000)]
    others = [second.next() for _ in range(1000)]
    assert not set(ones) & set(others)
    assert len(set(ones)) == 1000 and all(0 < n < 2**53 for n in ones + others)


def test_a_process_number_far_along_still_gives_ids_a_json_parser_holds_exactly() -> None:
    ids = RequestIds((1 << 40) + 3)
    spent = [ids.next() for _ in range(3)]
    assert all(n < 2**53 for n in spent) and spent[0] % ID_SPAN == 1
