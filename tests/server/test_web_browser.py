"""The approval page in a real browser (Debian's chromium, driven by Playwright): a call that
needs approval shows up as a card, a click runs it once and the MCP client gets the result, a
denial reaches the model, two tabs agree, a restart keeps the card, and hostile arguments render
inert and complete."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from .test_serve import _client
from .test_web import ALERT, start_page, stop

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Records what a successful injection would do: an alert, or a CSP violation report.
WATCH = """
window.__alerts = [];
window.alert = window.confirm = window.prompt = (m) => { window.__alerts.push(String(m)); };
window.__violations = [];
document.addEventListener('securitypolicyviolation',
  (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


def _page(browser: Any, login: str | None = None, context: Any = None) -> Any:
    context = context or browser.new_context()
    page = context.new_page()
    page.add_init_script(WATCH)
    if login:
        page.goto(login)
    return page


async def _call_async(url: str, arguments: dict[str, Any], tool: str = "broadcast_alert"
                      ) -> Any:
    async with _client(url) as client:
        return await client.call_tool(tool, arguments)


class _Call(threading.Thread):
    """An MCP client's call in its own thread (Playwright's sync API owns this one's loop)."""

    def __init__(self, url: str, arguments: dict[str, Any], tool: str = "broadcast_alert"
                 ) -> None:
        super().__init__(daemon=True)
        self.url, self.arguments, self.result = url, arguments, None
        self.error: BaseException | None = None
        self.tool = tool
        self.start()

    def run(self) -> None:
        try:
            self.result = anyio.run(_call_async, self.url, self.arguments, self.tool)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def wait(self) -> Any:
        self.join(timeout=60)
        assert not self.is_alive() and self.error is None, self.error
        return self.result


def _call(url: str, arguments: dict[str, Any]) -> Any:
    return _Call(url, arguments).wait()


def _runs(tmp_path: Path) -> int:
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        return int(db.execute("SELECT count(*) FROM audit WHERE tool = 'broadcast_alert' "
                              "AND status = 'ok'").fetchone()[0])


def test_a_card_appears_a_click_runs_the_call_once_and_two_tabs_agree(
        browser: Any, tmp_path: Path) -> None:
    proc, url, login = start_page(tmp_path, "--approval-wait", "40")
    try:
        first = _page(browser, login)
        assert first.url == f"{url}/"  # the code left the address bar
        second = _page(browser, context=first.context)
        second.goto(f"{url}/")
        call = _Call(url, ALERT)
        # the card arrives live in both tabs, without a reload
        first.wait_for_selector("article.card", timeout=15000)
        second.wait_for_selector("article.card", timeout=15000)
        text = first.inner_text("article.card")
        assert "broadcast_alert" in text and "PT-11" in text and "critical" in text
        first.click("button.approve")
        result = call.wait()
        assert not result.is_error and "alert for PT-11 sent" in result.content[0].text
        second.wait_for_selector("#empty", timeout=15000)  # the other tab saw the decision
        assert _runs(tmp_path) == 1
        for page in (first, second):
            assert page.evaluate("window.__alerts") == []
            assert page.evaluate("window.__violations") == []
    finally:
        stop(proc)


def test_a_denial_reaches_the_model_and_a_restart_keeps_the_pending_card(
        browser: Any, tmp_path: Path) -> None:
    proc, url, login = start_page(tmp_path)  # --approval-wait 0: the call answers 'pending'
    page = _page(browser, login)
    pending = _call(url, ALERT)
    assert pending.is_error and "waiting for approval" in pending.content[0].text
    page.wait_for_selector("article.card", timeout=15000)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=20)
    proc, url, _ = start_page(tmp_path)  # a new port: the old cookie is for another origin
    try:
        with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
            assert db.execute("SELECT state FROM approvals").fetchone()[0] == "pending"
        fresh = _page(browser)  # a new login link for the restarted server, from the CLI
        made = subprocess.run([sys.executable, "-m", "toolkeeper.cli", "approvals", "login-url",
                               "--url", url, "--state-dir", str(tmp_path / "state")],
                              capture_output=True, text=True, check=True, timeout=60)
        fresh.goto(made.stdout.strip())
        fresh.wait_for_selector("article.card", timeout=15000)
        fresh.fill("input[name=message]", "Use the yellow level for this region.")
        fresh.click("button.deny")
        fresh.wait_for_selector("#empty", timeout=15000)
        told = _call(url, ALERT)  # the same call made again learns why
        assert told.is_error and "yellow level" in told.content[0].text
        assert _runs(tmp_path) == 0
    finally:
        stop(proc)


def test_a_message_being_written_survives_a_new_card_arriving(
        browser: Any, tmp_path: Path) -> None:
    proc, url, login = start_page(tmp_path)  # --approval-wait 0: each call answers 'pending'
    try:
        page = _page(browser, login)
        _call(url, ALERT)
        page.wait_for_selector("article.card", timeout=15000)
        page.fill("input[name=message]", "Use the yellow level.")
        page.evaluate("() => document.activeElement.blur()")  # the writer looks elsewhere:
        # the live refresh is free to run
        _call(url, {"alert": {**ALERT["alert"], "region": "PT-02"}})
        page.wait_for_selector("article.card >> nth=1", timeout=15000)
        typed = page.eval_on_selector_all("input[name=message]", "is => is.map(i => i.value)")
        assert sorted(typed) == ["", "Use the yellow level."]
    finally:
        stop(proc)


def test_hostile_arguments_render_inert_and_complete(browser: Any, tmp_path: Path) -> None:
    huge = "A" * (5 * 1024 * 1024)
    hostile = {"alert": {"region": "<img src=x onerror=alert(1)>",
                         "level": "red",
                         "message": "<script>alert('x')</script>\u202egnp.exe <b onclick=alert(2)>"},
               "channels": ["javascript:alert(3)", "</pre><svg onload=alert(4)>", "pay\u200bpal",
                            "раураl", huge]}
    proc, url, login = start_page(tmp_path)
    try:
        page = _page(browser, login)
        _call(url, hostile)
        page.wait_for_selector("article.card", timeout=30000)
        (request_id,) = page.eval_on_selector_all("article.card", "cs => cs.map(c => c.dataset.id)")
        page.goto(f"{url}/approvals/{request_id}")  # no live refresh under the test's feet
        shown = page.inner_text("article.card")
        assert page.evaluate("window.__alerts") == []
        assert page.evaluate("window.__violations") == []
        assert page.query_selector_all("article.card img, article.card script, "
                                       "article.card svg, article.card b") == []
        assert "<script>alert('x')</script>" in shown and "onerror=alert(1)" in shown
        assert "\\u202e" in shown and "\\u200b" in shown  # made visible, not obeyed
        assert "\u202e" not in shown and "\u200b" not in shown
        text = page.evaluate("() => [...document.querySelectorAll('article.card .tx')]"
                             ".map(t => t.textContent).join('')")
        assert text.count("A") >= len(huge)  # complete: folded, never cut
        assert "5,242,880 characters" in shown
        assert "U+0440 CYRILLIC SMALL LETTER ER" in shown  # the look-alike, where it is
        page.screenshot(path=str(tmp_path / "card.png"))
        assert json.loads(json.dumps(hostile))  # the request itself was stored as sent
    finally:
        stop(proc)
