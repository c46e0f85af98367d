"""Client tokens as a server reads them on every request: from memory once seen, with a change
made anywhere (another process, another replica, the CLI) reaching every server sharing the
store within ``RECHECK_S``."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest

from toolkeeper.approval.sqlite import Connection, SqliteFile
from toolkeeper.server.clients import RECHECK_S, ClientTokens

from .test_serve import _start


class _Counted:
    """A real SQLite file that counts the reads made through it."""

    def __init__(self, path: Path) -> None:
        self.file = SqliteFile(path, "")
        self.path = str(path)
        self.reads: list[str] = []

    def transaction(self) -> AbstractContextManager[Connection]:
        return self.file.transaction()

    def query(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        self.reads.append(sql)
        return self.file.query(sql, params)


@pytest.fixture
def counted(tmp_path: Path) -> Iterator[_Counted]:
    ClientTokens(tmp_path / "toolkeeper.db")  # the tables
    db = _Counted(tmp_path / "toolkeeper.db")
    yield db
    db.file.close()


def test_a_token_seen_is_answered_from_memory_without_reading_the_store(
        counted: _Counted) -> None:
    tokens = ClientTokens(counted)  # type: ignore[arg-type]
    agent, person = tokens.add("agent"), tokens.add("alice", operator=True)
    counted.reads.clear()
    for _ in range(100):  # what a server asks on each request
        assert tokens.operator_for(agent) is None and tokens.client_for(agent) == "agent"
    assert tokens.operator_for(person) == "alice" and tokens.client_for(person) is None
    # the change number once, each token once: not two reads per request
    assert len(counted.reads) <= 4, counted.reads


def test_a_token_revoked_by_another_process_is_refused_after_the_next_recheck(
        counted: _Counted, tmp_path: Path) -> None:
    server = ClientTokens(counted)  # type: ignore[arg-type]
    elsewhere = ClientTokens(tmp_path / "toolkeeper.db")  # the CLI, another replica
    agent = elsewhere.add("agent")
    assert server.client_for(agent) == "agent"
    elsewhere.revoke("agent")
    deadline = time.monotonic() + RECHECK_S + 10
    while server.client_for(agent) is not None and time.monotonic() < deadline:
        time.sleep(RECHECK_S / 5)
    assert server.client_for(agent) is None, "the revoked token still works"
    assert server.owner("tkc_never-made") == ("", None)


def test_unknown_tokens_are_not_kept(counted: _Counted) -> None:
    tokens = ClientTokens(counted)  # type: ignore[arg-type]
    for n in range(3):
        assert tokens.owner(f"tkc_guess-{n}") == ("", None)
    later = tokens.add("later")  # a token made after a miss works at once
    assert tokens.client_for(later) == "later"


def _refused_on_both(urls: list[str], token: str, limit_s: float) -> list[float]:
    """Seconds until each server refuses ``token`` (polled until ``limit_s``)."""
    began, seen = time.monotonic(), dict[str, float]()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Authorization": f"Bearer {token}",
               "Accept": "application/json, text/event-stream"}
    while len(seen) < len(urls) and time.monotonic() - began < limit_s:
        for url in urls:
            if url not in seen and httpx.post(f"{url}/mcp", json=body, headers=headers,
                                              timeout=30).status_code == 401:
                seen[url] = time.monotonic() - began
    assert len(seen) == len(urls), f"still accepted after {limit_s} s by {set(urls) - set(seen)}"
    return [seen[url] for url in urls]


def test_a_token_revoked_with_the_cli_stops_working_on_two_servers_sharing_the_store(
        tmp_path: Path) -> None:
    state = str(tmp_path / "state")  # one state dir: its SQLite file is the store
    started = [_start(tmp_path) for _ in range(2)]
    try:
        made = subprocess.run([sys.executable, "-m", "toolkeeper.cli", "tokens", "add", "agent",
                               "--state-dir", state], capture_output=True, text=True,
                              check=True, timeout=60)
        token = next(w for w in made.stdout.split() if w.startswith("tkc_"))
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"Authorization": f"Bearer {token}",
                   "Accept": "application/json, text/event-stream"}
        for _, url in started:  # seen (and kept) by both
            assert httpx.post(f"{url}/mcp", json=body, headers=headers,
                              timeout=30).status_code == 200
        subprocess.run([sys.executable, "-m", "toolkeeper.cli", "tokens", "revoke", "agent",
                        "--state-dir", state], capture_output=True, check=True, timeout=60)
        after = _refused_on_both([url for _, url in started], token, limit_s=30)
        print(f"refused after {after} s (the recheck: every {RECHECK_S} s)")
    finally:
        for proc, _ in started:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
