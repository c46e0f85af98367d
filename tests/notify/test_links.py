"""Single-use decision links: unguessable, stored as digests, spent once (with every other link
of their request), dead once their request's time is over."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from pathlib import Path

from toolkeeper.approval import ApprovalRequest
from toolkeeper.notify import DecisionLinks


def _request(expires_in: float | None = 600.0) -> ApprovalRequest:
    now = time.time()
    return ApprovalRequest(call_id="c", tool="deploy", risk="critical", arguments={"env": "prod"},
                           args_digest="abc", session_id="client-ci", created_at=now,
                           expires_at=None if expires_in is None else now + expires_in)


def test_a_link_is_a_random_256_bit_token_kept_only_as_its_digest(tmp_path: Path) -> None:
    links = DecisionLinks(tmp_path / "l.db")
    tokens = {links.issue(_request(), "approve", "ntfy") for _ in range(50)}
    assert len(tokens) == 50 and all(len(t) >= 43 for t in tokens)  # 32 bytes, base64url
    stored = {r[0] for r in sqlite3.connect(tmp_path / "l.db").execute(
        "SELECT digest FROM notify_links")}
    assert stored == {hashlib.sha256(t.encode()).hexdigest() for t in tokens}
    assert not any(t in str(stored) for t in tokens)


def test_a_link_is_bound_to_its_request_arguments_choice_and_channel(tmp_path: Path) -> None:
    links = DecisionLinks(tmp_path / "l.db")
    request = _request()
    link = links.find(links.issue(request, "deny", "mailto"))
    assert link is not None
    assert (link.request_id, link.args_digest, link.choice, link.approver) == (
        request.id, "abc", "deny", "notify:mailto")
    assert link.expires_at == request.expires_at


def test_a_link_works_once_and_spends_the_other_links_of_its_request(tmp_path: Path) -> None:
    links = DecisionLinks(tmp_path / "l.db")
    request, other = _request(), _request()
    approve, deny = links.issue(request, "approve", "ntfy"), links.issue(request, "deny", "ntfy")
    elsewhere = links.issue(other, "approve", "ntfy")
    used = links.use(approve)
    assert used is not None and used.choice == "approve" and used.used_at is not None
    assert links.use(approve) is None  # once
    assert links.use(deny) is None  # the request's other link went with it
    assert links.use(elsewhere) is not None  # another request's link did not


def test_a_link_dies_with_its_requests_time_and_unknown_tokens_are_nothing(
        tmp_path: Path) -> None:
    links = DecisionLinks(tmp_path / "l.db")
    late = links.issue(_request(expires_in=-1), "approve", "ntfy")
    assert links.find(late) is not None and links.use(late) is None
    assert links.find("x" * 43) is None and links.use("") is None
    forever = links.issue(_request(expires_in=None), "approve", "ntfy")
    assert links.use(forever) is not None  # a request that never expires: live until used


def test_old_links_are_forgotten(tmp_path: Path) -> None:
    links = DecisionLinks(tmp_path / "l.db")
    token = links.issue(_request(), "approve", "ntfy")
    links.use(token)
    assert links.sweep(now=time.time() + 8 * 24 * 3600) == 1
    assert links.find(token) is None
