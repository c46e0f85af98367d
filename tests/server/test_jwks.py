"""The issuer's key set as a dependency that fails: a real ``toolkeeper serve`` trusting an
authorization server on loopback whose key set endpoint answers, hangs, dribbles a byte a second
or errors. Whatever it does, no request gets a 500: one fetch at a time under one deadline,
failed fetches rate-limited, the keys held before kept in use, and 503 with ``Retry-After`` only
while no key is known."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from toolkeeper.server.jwks import KeySet, KeysUnavailable

from .test_oauth import ACCEPT, LIST, Issuer, Served, _claims, _serve, _stop

DEADLINE_S = 2


@dataclass
class Flaky(Issuer):
    """An issuer whose key set endpoint behaves as ``mode`` says: ``ok``, ``hang`` (answers
    nothing until released), ``dribble`` (a byte a second), ``error`` (500), ``nonsense`` (JSON
    that is no key set) or ``deep`` (JSON nested past any parser's stack). It counts the
    fetches and the most that were under way at once."""

    mode: str = "ok"
    busy: int = 0
    most: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    fetched: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def started(self) -> None:
        with self.lock:
            self.fetches += 1
            self.busy += 1
            self.most = max(self.most, self.busy)
        self.fetched.set()

    def ended(self) -> None:
        with self.lock:
            self.busy -= 1


@pytest.fixture
def flaky() -> Iterator[Flaky]:
    found = Flaky(keys={"rsa-1": rsa.generate_private_key(public_exponent=65537,
                                                          key_size=2048)})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/jwks":
                self.send_error(404)
                return
            found.started()
            data = {"nonsense": b'{"keys": 5}', "deep": b"[" * 200_000}.get(
                found.mode, json.dumps(found.jwks()).encode())
            try:
                self._answer(found.mode, data)
            except OSError:
                return  # the client gave up
            finally:
                found.ended()

        def _answer(self, mode: str, data: bytes) -> None:
            if mode == "hang":
                found.release.wait(timeout=120)
                return
            if mode == "error":
                self.send_error(500)
                return
            head = (f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    f"content-length: {len(data)}\r\n\r\n").encode()
            if mode in ("ok", "nonsense", "deep"):
                self.wfile.write(head + data)
                return
            for byte in head + data:  # dribble: every read gets a byte well within any timeout
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                if found.release.wait(timeout=1):
                    return

        def log_message(self, *_args: object) -> None:
            return

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    http.daemon_threads = True
    found.url = f"http://127.0.0.1:{http.server_address[1]}"
    threading.Thread(target=http.serve_forever, daemon=True).start()
    yield found
    found.release.set()
    http.shutdown()
    http.server_close()


def _ask(served: Served, token: str) -> tuple[int, str]:
    """The status of a ``tools/list`` with ``token`` and its ``Retry-After`` ("" if none)."""
    answer = httpx.post(f"{served.url}/mcp", json=LIST, timeout=60,
                        headers={**ACCEPT, "Authorization": f"Bearer {token}"})
    return answer.status_code, answer.headers.get("retry-after", "")


def _together(served: Served, token: str, count: int = 4) -> list[tuple[int, str]]:
    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(lambda _: _ask(served, token), range(count)))


def _stopped(served: Served) -> list[str]:
    """Stop the server; the lines it wrote on stderr."""
    _stop(served)
    assert served.proc.stderr is not None
    return served.proc.stderr.read().splitlines()


@pytest.mark.parametrize("mode", ["hang", "dribble", "error", "nonsense", "deep"])
def test_with_no_key_known_a_failing_key_set_is_one_bounded_fetch_and_a_503_to_retry(
        tmp_path: Path, flaky: Flaky, mode: str) -> None:
    """Four requests at once while the key set hangs, dribbles, errors or answers what is no key
    set: one fetch, stopped by its one deadline (a byte a second never trips a per-read
    timeout); every request gets 503 with Retry-After, none 500; the failure is not fetched
    again before jwks_min_refresh_s, and the operator reads one line, no traceback."""
    flaky.mode = mode
    served = _serve(tmp_path, flaky, flags=True, jwks_timeout_s=DEADLINE_S,
                    jwks_min_refresh_s=3600)
    try:
        token = flaky.sign(**_claims(served, flaky))
        answers = _together(served, token)
        later = _ask(served, token)
    finally:
        lines = _stopped(served)
    assert [status for status, _ in [*answers, later]] == [503] * 5, answers
    assert all(1 <= int(wait) <= 3600 for _, wait in [*answers, later])
    assert (flaky.fetches, flaky.most) == (1, 1)
    said = [line for line in lines if "signing keys" in line]
    assert len(said) == 1 and "could not be fetched" in said[0], lines
    assert not any("Traceback" in line for line in lines), lines


@pytest.mark.parametrize("mode", ["hang", "error"])
def test_keys_held_before_keep_verifying_while_a_refresh_fails(
        tmp_path: Path, flaky: Flaky, mode: str) -> None:
    """The keys were fetched once; they grow older than jwks_max_age_s and the key set now
    hangs or errors: the refresh is one fetch, and every token is still checked with the keys
    held — 200, never 500 or 503 — before, during and after it."""
    served = _serve(tmp_path, flaky, flags=True, jwks_timeout_s=DEADLINE_S,
                    jwks_max_age_s=0.5, jwks_min_refresh_s=3600)
    try:
        token = flaky.sign(**_claims(served, flaky))
        assert _ask(served, token) == (200, "")
        assert flaky.fetches == 1
        flaky.mode, flaky.fetched = mode, threading.Event()
        deadline = time.monotonic() + 30
        seen = []
        while not flaky.fetched.is_set() and time.monotonic() < deadline:
            seen += _together(served, token)  # the keys age; one of these starts the refresh
            flaky.fetched.wait(timeout=0.2)
        assert flaky.fetched.is_set(), f"no refresh within 30 s: {seen}"
        seen += _together(served, token)  # during the refresh (hang) or after it (error)
        seen.append(_ask(served, token))
    finally:
        lines = _stopped(served)
    assert {status for status, _ in seen} == {200}, seen
    assert (flaky.fetches, flaky.most) == (2, 1)
    assert not any("Traceback" in line for line in lines), lines


async def test_a_request_whose_wait_for_the_fetch_ends_first_gets_keys_unavailable() -> None:
    """A request waiting for the first fetch whose own wait ends before that fetch has said
    why it failed (both timers run in one turn of a busy loop) is told to retry (a 503), not
    answered 500: there is no failure time yet to count the retry from."""
    keys = KeySet("https://issuer.example", timeout_s=0.01)
    keys._fetching = anyio.Event()  # a fetch under way that has not ended
    with pytest.raises(KeysUnavailable) as refused:
        await keys.key("rsa-1")
    assert refused.value.retry_after == 1
