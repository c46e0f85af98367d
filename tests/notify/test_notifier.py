"""The notifier over a real SQLite store and real receivers on loopback: each request is told
where its route says, reminded, escalated and said expired; replicas sharing the store tell it
once; a channel that fails or hangs costs its own messages and nothing else."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolkeeper.approval import (
    ApprovalDecision,
    ApprovalRequest,
    PostgresApprovalStore,
    SqliteApprovalStore,
)
from toolkeeper.config.notify import NotifySection
from toolkeeper.hooks import HookEvent, HookManager
from toolkeeper.notify import Composer, DecisionLinks, Notifier, Router, last_failure, verify
from toolkeeper.notify.signing import SIGNATURE, TIMESTAMP

from .receivers import Hanging, HttpReceiver, refused_port

pytestmark = pytest.mark.anyio
KEY = "a-signing-key-of-some-length-0123"


def _request(store: SqliteApprovalStore, *, ttl: float | None = 600.0, tool: str = "deploy",
             client: str = "ci") -> ApprovalRequest:
    now = time.time()
    request = ApprovalRequest(call_id="c", tool=tool, risk="critical", arguments={"env": "prod"},
                              args_digest="d", session_id=f"client-{client}", created_at=now,
                              reason="risk critical is above sensitive",
                              expires_at=None if ttl is None else now + ttl)
    store.create(request)
    return request


def _notifier(store: SqliteApprovalStore, hooks: HookManager | None = None,
              **settings: Any) -> Notifier:
    section = NotifySection.model_validate({"signing_key": KEY, "timeout_s": 5, **settings})
    composer = Composer(base_url=lambda: "http://127.0.0.1:1", where=lambda rid: rid)
    return Notifier(store, section, router=Router(section), composer=composer, hooks=hooks,
                    poll_s=0.05)


@asynccontextmanager
async def _running(*notifiers: Notifier) -> AsyncIterator[None]:
    async with anyio.create_task_group() as group:
        for notifier in notifiers:
            group.start_soon(notifier.run)
        yield
        group.cancel_scope.cancel()


async def _until(what: str, test: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not test():
        assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
        await anyio.sleep(0.02)


async def test_a_request_is_told_signed_reminded_escalated_and_said_expired(
        tmp_path: Path) -> None:
    hook, escalation = HttpReceiver(), HttpReceiver()
    store = SqliteApprovalStore(tmp_path / "s.db")
    notifier = _notifier(store, urls=[f"json://{hook.hostport}/team"], remind_after=0.3,
                         escalate_after=0.6, escalate_urls=[f"json://{escalation.hostport}/x"])
    try:
        async with _running(notifier):
            await anyio.sleep(0.1)  # watching from now on
            request = _request(store, ttl=1.5)
            told = (await anyio.to_thread.run_sync(hook.posts, "/team"))[0]
            assert verify(KEY.encode(), told.body, told.headers[TIMESTAMP.lower()],
                          told.headers[SIGNATURE.lower()])
            event = told.json()
            assert (event["event"], event["request"]["id"], event["request"]["client"]) == (
                "approval.requested", request.id, "ci")
            assert event["summary"] == ['env: "prod"']
            assert event["buttons"] == [{"label": "Open the card", "action": "open",
                                         "url": f"http://127.0.0.1:1/approvals/{request.id}"}]
            posts = await anyio.to_thread.run_sync(hook.posts, "/team", 3)
            events = [p.json()["event"] for p in posts]
            assert events == ["approval.requested", "approval.reminder", "approval.expired"]
            escalated = await anyio.to_thread.run_sync(escalation.posts, "/x", 2)
            assert [p.json()["event"] for p in escalated] == ["approval.escalated",
                                                              "approval.expired"]
            assert "Nobody decided within 1.5 s; it did not run" in posts[2].json()["text"]
            await _until("five sends counted", lambda: notifier.counts["json", "sent"] == 5)
        assert store.get(request.id).state == "expired"  # type: ignore[union-attr]
    finally:
        hook.close()
        escalation.close()


async def test_an_escalated_request_that_expires_is_said_expired_where_it_was_escalated(
        tmp_path: Path) -> None:
    hook, on_call = HttpReceiver(), HttpReceiver()
    store = SqliteApprovalStore(tmp_path / "s.db")
    notifier = _notifier(store, urls=[f"json://{hook.hostport}/team"], escalate_after=0.2,
                         escalate_urls=[f"json://{on_call.hostport}/on-call"])
    try:
        async with _running(notifier):
            await anyio.sleep(0.1)  # watching from now on
            escalated, quiet = _request(store, ttl=1.0), _request(store, ttl=None)
            posts = await anyio.to_thread.run_sync(on_call.posts, "/on-call", 3)
            await anyio.to_thread.run_sync(hook.posts, "/team", 3)
        told = sorted((p.json()["request"]["id"], p.json()["event"]) for p in posts)
        assert told == sorted([(escalated.id, "approval.escalated"),
                               (escalated.id, "approval.expired"),
                               (quiet.id, "approval.escalated")])
    finally:
        hook.close()
        on_call.close()


async def test_a_decided_request_is_neither_reminded_nor_said_expired(tmp_path: Path) -> None:
    hook = HttpReceiver()
    store = SqliteApprovalStore(tmp_path / "s.db")
    notifier = _notifier(store, urls=[f"json://{hook.hostport}/h"], remind_after=0.5)
    try:
        async with _running(notifier):
            await anyio.sleep(0.1)
            request = _request(store, ttl=1.0)
            await anyio.to_thread.run_sync(hook.posts, "/h")
            store.decide(ApprovalDecision(request_id=request.id, outcome="denied",
                                          approver="page"))
            later = _request(store, ttl=None)  # a request after it is still told, alone
            posts = await anyio.to_thread.run_sync(hook.posts, "/h", 3)
        told = [(p.json()["request"]["id"], p.json()["event"]) for p in posts]
        assert told == [(request.id, "approval.requested"), (later.id, "approval.requested"),
                        (later.id, "approval.reminder")]
    finally:
        hook.close()


async def test_replicas_sharing_a_store_tell_each_request_once(tmp_path: Path) -> None:
    hook = HttpReceiver()
    path = tmp_path / "shared.db"
    stores = [SqliteApprovalStore(path) for _ in range(3)]
    notifiers = [_notifier(store, urls=[f"json://{hook.hostport}/h"]) for store in stores]
    try:
        async with _running(*notifiers):
            await anyio.sleep(0.2)
            made = [_request(stores[n % 3]).id for n in range(12)]
            posts = await anyio.to_thread.run_sync(hook.posts, "/h", 12)
            await anyio.sleep(0.5)  # three replicas had time to read every change
        told = sorted(p.json()["request"]["id"] for p in hook.items)
        assert told == sorted(made), f"{len(hook.items)} posts for 12 requests"
        assert len(posts) == 12
    finally:
        hook.close()


async def test_a_failing_channel_is_retried_then_counted_and_the_others_still_get_theirs(
        tmp_path: Path) -> None:
    hook, seen = HttpReceiver(), list[dict[str, Any]]()
    hooks = HookManager()
    hooks.register(HookEvent.NOTIFICATION, lambda _e, payload: seen.append(payload))
    store = SqliteApprovalStore(tmp_path / "s.db")
    refused = f"json://127.0.0.1:{refused_port()}/down"
    notifier = _notifier(store, hooks, urls=[refused, f"json://{hook.hostport}/up"], attempts=2)
    try:
        async with _running(notifier):
            await anyio.sleep(0.1)
            request = _request(store)
            await anyio.to_thread.run_sync(hook.posts, "/up")
            await _until("failure", lambda: notifier.counts["json", "failed"] == 1)
        assert [(s["outcome"], s["attempts"]) for s in seen if "down" not in s["error"]
                and s["outcome"] == "sent"] == [("sent", 1)]
        assert [s["outcome"] for s in seen if s["error"]] == ["retried", "failed"]
        failure = last_failure(store.db)
        assert failure is not None and failure.channel == "json" and failure.attempts == 2
        assert "ConnectError" in failure.error and request.id not in failure.error
    finally:
        hook.close()


async def test_an_apprise_channel_that_fails_says_apprises_reason(tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "s.db")
    notifier = _notifier(store, urls=[f"ntfy://127.0.0.1:{refused_port()}/down"], attempts=1)
    async with _running(notifier):
        await anyio.sleep(0.1)
        _request(store)
        await _until("failure logged", lambda: last_failure(store.db) is not None)
    failure = last_failure(store.db)
    assert failure is not None and failure.channel == "ntfy"
    assert "Connection error occurred sending ntfy" in failure.error, failure.error


async def test_a_hanging_receiver_holds_only_its_own_message(tmp_path: Path) -> None:
    hook, hanging = HttpReceiver(), Hanging()
    store = SqliteApprovalStore(tmp_path / "s.db")
    notifier = _notifier(store, urls=[f"json://{hanging.url.removeprefix('http://')}/stuck",
                                      f"json://{hook.hostport}/up"], timeout_s=60)
    try:
        async with _running(notifier):
            await anyio.sleep(0.1)
            for _ in range(3):
                _request(store)
            await anyio.to_thread.run_sync(hook.posts, "/up", 3)
            assert hanging.items, "the hanging receiver was reached"
            assert notifier.counts["json", "failed"] == 0  # still hanging, and only it
    finally:
        hook.close()
        hanging.close()


async def test_on_postgresql_replicas_tell_once_say_expired_and_links_and_failures_work(
        postgres_url: str) -> None:
    hook = HttpReceiver()
    stores = [PostgresApprovalStore(postgres_url) for _ in range(2)]
    notifiers = [_notifier(store, urls=[f"json://{hook.hostport}/h"]) for store in stores]
    links = DecisionLinks(postgres_url)
    try:
        async with _running(*notifiers):
            await anyio.sleep(0.3)
            made = [_request(stores[n % 2], ttl=1.0).id for n in range(6)]
            posts = await anyio.to_thread.run_sync(hook.posts, "/h", 12)
            await anyio.sleep(0.5)
        events = sorted((p.json()["request"]["id"], p.json()["event"]) for p in hook.items)
        assert events == sorted([(r, "approval.requested") for r in made] +
                                [(r, "approval.expired") for r in made]), len(posts)
        late = links.issue(stores[0].get(made[0]).request, "approve", "json")  # type: ignore[union-attr]
        assert links.use(late) is None  # its request's time is over
        token = links.issue(_request(stores[1], ttl=None), "approve", "json")
        assert links.use(token) is not None and links.use(token) is None
        ledger = notifiers[0].ledger
        ledger.record(made[0], "request", "json", "failed", 4, "answered HTTP 500")
        failure = last_failure(stores[0].db)
        assert failure is not None and failure.error == "answered HTTP 500"
    finally:
        hook.close()
