"""Notifications of a real ``toolkeeper serve``, through the official MCP client making the
risky call and real receivers on loopback: ntfy (through Apprise), a signed JSON webhook, Slack-
and Teams-shaped webhooks — each with its buttons; decision links that decide once, by a POST,
recorded with their channel; channels that refuse or hang never delay a call's answer and their
failures are counted and shown; an expired request is said expired everywhere."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from toolkeeper.notify import verify
from toolkeeper.notify.signing import SIGNATURE, TIMESTAMP

from ..blocks import text_of
from ..notify.receivers import Hanging, HttpReceiver, refused_port
from .test_serve import EXAMPLE, _client
from .test_web import ALERT, _bearer, _login, _pending_call, start_page, stop

KEY = "the-team-bots-shared-key-0123456789"


@pytest.fixture
def receiver() -> Iterator[HttpReceiver]:
    got = HttpReceiver()
    yield got
    got.close()


def _serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str, *args: str
           ) -> tuple[Any, str, str]:
    monkeypatch.setenv("TOOLKEEPER_NOTIFY_KEY", KEY)
    (tmp_path / "toolkeeper.toml").write_text(config)
    return start_page(tmp_path, "--config", str(tmp_path / "toolkeeper.toml"), *args)


def _metric(url: str, name: str, **labels: str) -> float:
    text = httpx.get(f"{url}/metrics", headers=_bearer(), timeout=30).text
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        series, _, value = line.rpartition(" ")
        if series == (f"{name}{{{wanted}}}" if labels else name):
            return float(value)
    return 0.0


def _until(what: str, test: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not test():
        assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
        time.sleep(0.1)


async def test_a_risky_call_is_announced_with_buttons_to_its_card_on_every_channel(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: HttpReceiver) -> None:
    host = receiver.hostport
    proc, url, _ = _serve(tmp_path, monkeypatch, f"""
[approval.notify]
urls = ["ntfy://{host}/approvals", "json://{host}/team-bot",
        {{ url = "{receiver.url}/slack", format = "slack" }},
        {{ url = "{receiver.url}/teams", format = "teams" }}]
""")
    try:
        request_id = await _pending_call(url, message="Storm \u202eevil sk-" + "x" * 40)
        card = f"{url}/approvals/{request_id}"
        (ntfy,) = receiver.posts("/")
        assert ntfy.headers["x-actions"] == f"view, Open the card, {card}, clear=true"
        assert ntfy.headers["x-click"] == card
        assert "x-icon" not in ntfy.headers  # no third party's server learns of the message
        pushed = ntfy.json()
        assert pushed["topic"] == "approvals"
        assert pushed["title"] == "Approval needed: broadcast_alert (critical) for default"
        for said in ("Client: default. Risk: critical.", "Why it asks: risk critical is above",
                     "Expires in 60 min", 'alert.region: "PT-11"', "Storm \\u202eevil [REDACTED]"):
            assert said in pushed["message"], said
        (bot,) = receiver.posts("/team-bot")
        assert verify(KEY.encode(), bot.body, bot.headers[TIMESTAMP.lower()],
                      bot.headers[SIGNATURE.lower()])
        event = bot.json()
        assert (event["event"], event["request"]["id"], event["where"]) == (
            "approval.requested", request_id, card)
        (slack,) = receiver.posts("/slack")
        (actions,) = [b for b in slack.json()["blocks"] if b["type"] == "actions"]
        assert [(e["text"]["text"], e["url"]) for e in actions["elements"]] == [
            ("Open the card", card)]
        (teams,) = receiver.posts("/teams")
        adaptive = teams.json()["attachments"][0]["content"]
        assert adaptive["actions"] == [{"type": "Action.OpenUrl", "title": "Open the card",
                                        "url": card}]
        for channel in ("ntfy", "json", "slack", "teams"):
            _until(f"{channel} counted", lambda c=channel: _metric(
                url, "toolkeeper_notifications_total", channel=c, outcome="sent") == 1.0)
    finally:
        stop(proc)


def _links(post: Any) -> dict[str, str]:
    """label → URL of an ntfy message's actions."""
    return {label: link for _, label, link, _ in
            (a.split(", ") for a in post.headers["x-actions"].split("; "))}


async def test_a_notification_link_decides_once_by_a_post_recorded_with_its_channel(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: HttpReceiver) -> None:
    proc, url, login = _serve(tmp_path, monkeypatch, f"""
[approval.notify]
urls = ["ntfy://{receiver.hostport}/approvals"]
direct_decisions = true
""")
    try:
        request_id = await _pending_call(url)
        links = _links(receiver.posts("/")[0])
        approve, deny = links["Approve"], links["Deny"]
        assert links["Open the card"] == f"{url}/approvals/{request_id}"
        assert re.fullmatch(rf"{url}/notify/[A-Za-z0-9_-]{{43}}", approve)

        def state() -> str:
            return str(httpx.get(f"{url}/api/approvals/{request_id}",
                                 headers=_bearer()).json()["state"])

        scanned = httpx.get(approve)  # what a mail scanner or a chat preview does
        assert scanned.status_code == 200 and "Approve this call?" in scanned.text
        assert "alert.region" in scanned.text or "PT-11" in scanned.text  # the card is shown
        assert state() == "pending"
        confirm = scanned.text.split('name="confirm" value="')[1].split('"')[0]
        assert httpx.post(approve, data={"confirm": confirm}).status_code == 403  # no Origin
        forged = httpx.post(approve, data={"confirm": "0" * 32}, headers={"Origin": url})
        assert forged.status_code == 403 and state() == "pending"
        done = httpx.post(approve, data={"confirm": confirm}, headers={"Origin": url})
        assert done.status_code == 200 and "recorded as decided through ntfy" in done.text
        decided = httpx.get(f"{url}/api/approvals/{request_id}", headers=_bearer()).json()
        assert (decided["state"], decided["decision"]["approver"]) == ("approved", "notify:ntfy")
        again = httpx.post(approve, data={"confirm": confirm}, headers={"Origin": url})
        assert again.status_code == 410 and "already decided (approved)" in again.text
        assert httpx.get(deny).status_code == 410  # the request's other link went with it
        async with _client(url) as client:  # the call made again runs, once
            ran = await client.call_tool("broadcast_alert", ALERT)
        assert not ran.is_error, ran.content
        audit = httpx.get(f"{url}/api/audit", headers=_bearer()).json()["entries"]
        assert [(e["status"], e["approver"]) for e in audit if e["approval_id"] == request_id
                and e["status"] == "ok"] == [("ok", "notify:ntfy")]
        assert httpx.get(f"{url}/notify/{'A' * 43}").status_code == 404
        _login(url, login)  # the page still works beside the links
    finally:
        stop(proc)


async def test_channels_that_refuse_or_hang_never_delay_the_answer_and_their_failure_shows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hanging = Hanging()
    proc, url, login = _serve(tmp_path, monkeypatch, f"""
[approval.notify]
urls = ["json://127.0.0.1:{refused_port()}/down", "json://{hanging.url[7:]}/stuck"]
timeout_s = 120
attempts = 2
""")
    try:
        first = await _pending_call(url, region="ONE")
        hanging.wait("a connection held by the hanging receiver")
        second = await _pending_call(url, region="TWO")  # answered while the channel hangs
        assert first != second
        _until("the refused channel's failures", lambda: _metric(
            url, "toolkeeper_notifications_total", channel="json", outcome="failed") == 2.0)
        assert _metric(url, "toolkeeper_notifications_total", channel="json",
                       outcome="retried") >= 2.0
        page = _login(url, login).get("/").text
        line = page.split('class="note warn notify-failure">')[1].split("</p>")[0]
        assert line.startswith("Notifications: the last one to json failed at ")
        assert "after 2 attempts" in line and "ConnectError" in line
        assert "requests still wait here" in line
    finally:
        stop(proc)
        hanging.close()


async def test_apprise_channels_that_hang_hold_neither_the_servers_threads_nor_other_channels(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: HttpReceiver) -> None:
    """Apprise sends synchronously. Six ntfy channels whose receiver never answers (its read
    timeout raised to match ``timeout_s``) hold up to 48 sends at once: in the threads the
    server's calls use (40) a call would wait for them to time out, and in Apprise's shared
    pool (a few threads) a seventh channel that works would get nothing."""
    hanging = Hanging()
    host = hanging.url.removeprefix("http://")
    stuck = ", ".join(f'"ntfy://{host}/stuck{n}?rto=120&cto=120"' for n in range(6))
    proc, url, _ = _serve(tmp_path, monkeypatch, f"""
[approval.notify]
urls = [{stuck}, "ntfy://{receiver.hostport}/works"]
timeout_s = 120
attempts = 1
""")
    try:
        calls = [*range(8), "ONE-MORE"]  # 48 sends hang (more than 40 threads), then one more
        for n in calls:
            with anyio.move_on_after(45) as waited:
                await _pending_call(url, region=f"CALL-{n}")
            assert not waited.cancelled_caught, (
                f"call {n} had no answer within 45 s while the channels held "
                f"{len(hanging.items)} connections")
            if n == 7:
                hanging.wait("40 connections held", lambda seen: len(seen) >= 40)
        told = receiver.posts("/", count=len(calls), timeout=45)
        assert sorted(post.json()["topic"] for post in told) == ["works"] * len(calls)
    finally:
        hanging.close()  # first: the sends it holds end, and the server stops at once
        stop(proc)


async def test_an_expired_request_is_said_expired_to_the_model_the_store_audit_metrics_and_channels(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: HttpReceiver) -> None:
    proc, url, _ = _serve(tmp_path, monkeypatch, f"""
[approval.notify]
urls = ["json://{receiver.hostport}/bot"]
""", "--approval-wait", "5", "--approval-ttl", "1")
    try:
        async with _client(url) as client:
            result = await client.call_tool("broadcast_alert", ALERT)
        text = text_of(result.content[0])
        assert result.is_error and text == (
            "the call to 'broadcast_alert' expired: nobody decided within 1 s; it did not run; "
            "call it again to ask again (a person is asked anew)")
        told, expired = receiver.posts("/bot", 2)
        assert [told.json()["event"], expired.json()["event"]] == [
            "approval.requested", "approval.expired"]
        request_id = told.json()["request"]["id"]
        assert "Nobody decided within 1 s; it did not run" in expired.json()["text"]
        assert expired.json()["buttons"] == []
        stored = httpx.get(f"{url}/api/approvals/{request_id}", headers=_bearer()).json()
        assert (stored["state"], stored["decision"]["outcome"]) == ("expired", "expired")
        audit = httpx.get(f"{url}/api/audit", headers=_bearer()).json()["entries"]
        assert [(e["status"], e["error_code"], e["decision"]) for e in audit] == [
            ("expired", "expired", "expired")]
        assert _metric(url, "toolkeeper_approvals_expired_total") == 1.0
        assert _metric(url, "toolkeeper_tool_calls_total", tool="broadcast_alert",
                       status="expired") == 1.0
    finally:
        stop(proc)


async def test_serve_over_stdio_notifies_with_links_to_its_loopback_page_that_decide(
        tmp_path: Path, receiver: HttpReceiver) -> None:
    (tmp_path / "toolkeeper.toml").write_text(f"""
[approval.notify]
urls = ["json://{receiver.hostport}/bot"]
direct_decisions = true
""")
    command = [sys.executable, "-m", "toolkeeper.cli", "serve", "--stdio", EXAMPLE,
               "--no-builtins", "--config", str(tmp_path / "toolkeeper.toml"),
               "--state-dir", str(tmp_path / "state"), "--approval-wait", "0"]
    launch = StdioServerParameters(command=command[0], args=command[1:], cwd=str(tmp_path), env={
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TOOLKEEPER_NOTIFY_KEY": KEY})
    with (tmp_path / "server.log").open("w") as err:
        async with Client(stdio_client(launch, errlog=err)) as client:
            asked = await client.call_tool("broadcast_alert", ALERT)
            assert asked.is_error and "waiting for approval" in text_of(asked.content[0])
            (told,) = await anyio.to_thread.run_sync(receiver.posts, "/bot")
            buttons = {b["action"]: b["url"] for b in told.json()["buttons"]}
            page = buttons["open"].split("/approvals/")[0]
            assert re.fullmatch(r"http://127\.0\.0\.1:\d+", page)
            shown = httpx.get(buttons["approve"])
            confirm = shown.text.split('name="confirm" value="')[1].split('"')[0]
            done = httpx.post(buttons["approve"], data={"confirm": confirm},
                              headers={"Origin": page})
            assert done.status_code == 200, done.text
            ran = await client.call_tool("broadcast_alert", ALERT)
    assert not ran.is_error and "PT-11" in text_of(ran.content[0])
    assert "Traceback" not in (tmp_path / "server.log").read_text()
