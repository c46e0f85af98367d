"""A notification by email, followed in a real browser: a local SMTP server (aiosmtpd) gets the
mail Apprise sends for a risky call made with the official MCP client; its Approve link opens in
Debian's chromium (Playwright), shows the card and one button — opening it decided nothing — and
the click decides, once; the call made again runs, recorded as approved through the mail."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..notify.receivers import MailReceiver
from .test_web import ALERT, _bearer, start_page, stop
from .test_web_browser import _call, _page, _runs
from .test_web_browser import browser as browser  # the fixture

KEY = "the-team-bots-shared-key-0123456789"


@pytest.fixture
def mailbox() -> Iterator[MailReceiver]:
    got = MailReceiver()
    yield got
    got.close()


def _parts(mail: Any) -> tuple[str, str]:
    html = mail.get_body(("html",)).get_content()
    text = mail.get_body(("plain",)).get_content()
    return html, text


def test_a_mailed_approve_link_opens_the_card_and_one_click_decides_once(
        browser: Any, tmp_path: Path, mailbox: MailReceiver,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKEEPER_NOTIFY_KEY", KEY)
    (tmp_path / "toolkeeper.toml").write_text(f"""
[approval.notify]
urls = ["mailto://127.0.0.1:{mailbox.port}?from=toolkeeper@example.com&to=ops@example.com&mode=insecure"]
direct_decisions = true
""")
    proc, url, _ = start_page(tmp_path, "--config", str(tmp_path / "toolkeeper.toml"))
    try:
        pending = _call(url, ALERT)
        assert pending.is_error and "waiting for approval" in pending.content[0].text
        request_id = pending.content[0].text.split("(request ")[1].split(")")[0]
        (mail,) = mailbox.mails()
        assert mail["subject"] == "Approval needed: broadcast_alert (critical) for default"
        assert mail["to"] == "ops@example.com"
        html, text = _parts(mail)
        approve = re.search(rf'<a href="({url}/notify/[A-Za-z0-9_-]+)"[^>]*>Approve</a>', html)
        assert approve is not None, html
        assert f"Approve: {approve.group(1)}" in text  # the text part keeps every link
        assert f"Open the card: {url}/approvals/{request_id}" in text
        assert 'alert.region: "PT-11"' in text and "Expires in 60 min" in text

        page = _page(browser)  # no login: the link is the credential
        page.goto(approve.group(1))
        assert page.inner_text("h1") == "Approve this call?"
        assert "PT-11" in page.inner_text("article.card")
        assert httpx.get(f"{url}/api/approvals/{request_id}",
                         headers=_bearer()).json()["state"] == "pending"  # opened, not decided
        page.click("form.link-decision button.approve")
        page.wait_for_selector("p.message", timeout=15000)
        assert page.inner_text("h1") == "Approved"
        assert "recorded as decided through mailto" in page.inner_text("p.message")
        assert page.evaluate("window.__alerts") == []
        assert page.evaluate("window.__violations") == []

        page.goto(approve.group(1))  # a second click is refused
        assert page.inner_text("h1") == "Link no longer valid"
        ran = _call(url, ALERT)
        assert not ran.is_error and "alert for PT-11 sent" in ran.content[0].text
        assert _runs(tmp_path) == 1
        stored = httpx.get(f"{url}/api/approvals/{request_id}", headers=_bearer()).json()
        assert stored["decision"]["approver"] == "notify:mailto"
    finally:
        stop(proc)
