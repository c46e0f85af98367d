"""The inbox in a real browser (Debian's chromium, driven by Playwright) at a desktop's and a
phone's width: twenty requests approved with the keyboard alone (each ran once), an edit made
on the card (the tool ran with it and the model was told), and a thousand waiting requests
shown a page at a time, filtered and searched on the server — every value escaped, the CSP
strict, every decision a POST with the page's CSRF token."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolkeeper.approval import ApprovalRequest, SqliteApprovalStore
from toolkeeper.approval.models import args_digest
from toolkeeper.server.queue import PAGE_SIZE

from ..blocks import text_of
from .test_serve import _client
from .test_web import ALERT, start_page, stop
from .test_web_browser import _Call, _page, browser

__all__ = ["browser"]

WIDTHS = (1280, 375)
PENDING = "article.card[data-state=pending]"


def _alert(region: str) -> dict[str, Any]:
    return {"alert": {**ALERT["alert"], "region": region}}


async def _each(url: str, regions: list[str]) -> list[str]:
    """Make the example's critical call once per region in one MCP session; each text."""
    async with _client(url) as client:
        return [text_of((await client.call_tool("broadcast_alert", _alert(r))).content[0])
                for r in regions]


def _made(url: str, regions: list[str]) -> list[str]:
    """``_each`` in a thread of its own (Playwright's sync API owns this one's event loop)."""
    out: list[list[str]] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            out.append(anyio.run(_each, url, regions))
        except BaseException as exc:  # reported below
            failed.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive() and not failed, failed
    return out[0]


def _cards(page: Any, count: int) -> None:
    """Wait (bounded) until the inbox shows ``count`` waiting cards; say what it showed."""
    try:
        page.wait_for_function(f"n => document.querySelectorAll('{PENDING}').length === n",
                               arg=count, timeout=30000)
    except Exception:
        shown = page.eval_on_selector_all(PENDING, "cs => cs.length")
        pytest.fail(f"the inbox showed {shown} waiting cards, not {count}")


def _shown(page: Any, text: str) -> None:
    """Wait (bounded) until the inbox's "shown" line says ``text`` (the next page has the same
    number of cards as the first: only this line tells them apart); say what it said."""
    try:
        page.wait_for_function("t => document.querySelector('#shown')?.innerText.includes(t)",
                               arg=text, timeout=30000)
    except Exception:
        pytest.fail(f"the inbox said {page.inner_text('#shown')!r}, not {text!r}")


def _clean(page: Any) -> None:
    assert page.evaluate("window.__alerts") == []
    assert page.evaluate("window.__violations") == []


@pytest.mark.parametrize("width", WIDTHS)
def test_twenty_requests_approved_with_the_keyboard_alone_each_run_once(
        browser: Any, tmp_path: Path, width: int) -> None:
    proc, url, login = start_page(tmp_path)  # --approval-wait 0: each call answers 'pending'
    regions = [f"K-{n:02}" for n in range(20)]
    try:
        asked = _made(url, regions)
        assert all("waiting for approval" in text for text in asked)
        page = _page(browser, context=browser.new_context(
            viewport={"width": width, "height": 800}))
        page.goto(login)
        _cards(page, 20)
        page.keyboard.press("?")
        assert page.is_visible("#keys")
        page.keyboard.press("?")
        page.keyboard.press("j")
        page.keyboard.press("k")  # back on the first, oldest card
        for left in range(19, -1, -1):
            page.keyboard.press("a")
            _cards(page, left)
        _clean(page)
        ran = _made(url, regions)  # each call made again runs, once
        assert [t.startswith(f"alert for {r} sent") for t, r in zip(ran, regions, strict=True)] == [True] * 20
        with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
            states = db.execute("SELECT state, COUNT(*) FROM approvals GROUP BY state").fetchall()
            runs = db.execute("SELECT approval_id, COUNT(*) FROM audit WHERE tool = "
                              "'broadcast_alert' AND status = 'ok' GROUP BY approval_id"
                              ).fetchall()
        assert states == [("done", 20)]
        assert len(runs) == 20 and {n for _, n in runs} == {1}
    finally:
        stop(proc)


@pytest.mark.parametrize("width", WIDTHS)
def test_an_edit_on_the_card_runs_the_edited_call_and_the_model_is_told(
        browser: Any, tmp_path: Path, width: int) -> None:
    proc, url, login = start_page(tmp_path)
    try:
        hostile = {"alert": {**ALERT["alert"], "message": "Storm\u202e<script>alert(1)</script>"}}
        first = _Call(url, hostile).wait()
        assert first.is_error and "waiting for approval" in text_of(first.content[0])
        page = _page(browser, context=browser.new_context(
            viewport={"width": width, "height": 800}))
        page.goto(login)
        _cards(page, 1)
        page.keyboard.press("e")
        box = page.locator("details.edit textarea")
        page.wait_for_function("() => document.activeElement?.name === 'arguments'", timeout=30000)
        shown = box.input_value()
        assert "\\u202e" in shown and "\u202e" not in shown  # the bidi character made visible
        assert json.loads(shown) == {**hostile, "channels": None}  # …and read back as itself
        box.fill(json.dumps({"alert": {"region": "PT-13", "level": "purple", "message": "R"}}))
        page.click("button.preview")  # checked against the tool's schema before anything
        page.wait_for_selector(".preview-out .note.warn", timeout=30000)
        assert "level" in page.inner_text(".preview-out")
        edited = {"alert": {"region": "PT-13", "level": "yellow", "message": "Rain"}}
        box.fill(json.dumps(edited))
        page.click("button.preview")  # the edit through the card's own view
        page.wait_for_selector(".preview-out section.block", timeout=30000)
        assert "PT-13" in page.inner_text(".preview-out")
        page.click("button.approve-edited")
        _cards(page, 0)
        _clean(page)
        ran = _Call(url, hostile).wait()  # the client's retry of the asked call
        told = "\n".join(block.text for block in ran.content)
        assert not ran.is_error and "alert for PT-13 sent" in told
        assert "a person edited the arguments" in told and "Changed: alert" in told
        with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
            (decision,) = db.execute("SELECT decision FROM audit WHERE status = 'ok' AND tool = "
                                     "'broadcast_alert'").fetchone()
        assert f"ran {args_digest(edited)}" in decision
    finally:
        stop(proc)


def test_a_new_request_waits_while_an_edit_is_typed_and_the_edit_survives_the_redraw(
        browser: Any, tmp_path: Path) -> None:
    proc, url, login = start_page(tmp_path)
    try:
        first = _Call(url, _alert("PT-01")).wait()
        assert first.is_error and "waiting for approval" in text_of(first.content[0])
        page = _page(browser)
        page.goto(login)
        _cards(page, 1)
        page.keyboard.press("e")
        page.wait_for_function("() => document.activeElement?.name === 'arguments'", timeout=30000)
        page.keyboard.press("Control+End")
        page.keyboard.type(" typed")
        second = _Call(url, _alert("PT-02")).wait()
        assert second.is_error and "waiting for approval" in text_of(second.content[0])
        with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
            assert db.execute("SELECT COUNT(*) FROM approvals WHERE state = 'pending'"
                              ).fetchone() == (2,)
        # while the reader types, the cards are not redrawn under their hands
        assert page.eval_on_selector_all(PENDING, "cs => cs.length") == 1
        assert page.evaluate("() => document.activeElement?.name") == "arguments"
        page.keyboard.press("Escape")  # leaves the field: the new card comes in
        _cards(page, 2)
        box = page.locator(f"{PENDING} details.edit textarea").first
        assert box.input_value().endswith(" typed")  # what was typed is still there
        assert page.locator(f"{PENDING} details.edit").first.evaluate("d => d.open")
        _clean(page)
    finally:
        stop(proc)


def _fill(store: SqliteApprovalStore, count: int) -> None:
    """``count`` waiting requests of the example's tool, as its calls would store them."""
    now = time.time()
    for n in range(count):
        arguments: dict[str, object] = {"alert": {"region": f"R-{n:04}", "level": "red",
                                                  "message": "needle" if n == 777 else "Storm"}}
        store.create(ApprovalRequest(
            call_id=f"c{n}", tool="broadcast_alert", risk="critical", arguments=arguments,
            args_digest=args_digest(arguments), session_id="client-default",
            reason="risk critical is above sensitive", created_at=now, expires_at=now + 3600))


@pytest.mark.parametrize("width", WIDTHS)
def test_a_thousand_waiting_requests_are_shown_a_page_at_a_time_and_filtered(
        browser: Any, tmp_path: Path, width: int) -> None:
    proc, _url, login = start_page(tmp_path, "--approval-ttl", "3600")
    try:
        _fill(SqliteApprovalStore(tmp_path / "state" / "toolkeeper.db"), 1000)
        page = _page(browser, context=browser.new_context(
            viewport={"width": width, "height": 800}))
        page.goto(login)
        _cards(page, PAGE_SIZE)
        assert f"1000 match · page 1 of {1000 // PAGE_SIZE}" in page.inner_text("#shown")
        assert "1000 waiting" in page.inner_text("#figures")
        page.click("a[rel=next]")
        _shown(page, f"page 2 of {1000 // PAGE_SIZE}")
        _cards(page, PAGE_SIZE)
        assert f"R-{PAGE_SIZE:04}" in page.inner_text(PENDING)  # the oldest first
        page.fill("input[name=q]", "NEEDLE")
        page.click("#filters button[type=submit]")
        _cards(page, 1)
        assert "R-0777" in page.inner_text(PENDING)
        page.select_option("select[name=risk]", "high")
        page.click("#filters button[type=submit]")
        _cards(page, 0)
        assert "Nothing is waiting that matches" in page.inner_text("#inbox")
        _clean(page)
    finally:
        stop(proc)


def _ids(page: Any) -> list[str]:
    return [str(i) for i in page.eval_on_selector_all(PENDING, "cs => cs.map(c => c.dataset.id)")]


def _current(page: Any) -> list[str]:
    """The ids of the cards marked current (none or one)."""
    return [str(i) for i in page.eval_on_selector_all(
        "article.card.current", "cs => cs.map(c => c.dataset.id)")]


def _states(tmp_path: Path) -> dict[str, str]:
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        return dict(db.execute("SELECT id, state FROM approvals").fetchall())


def _deny_from_the_cli(tmp_path: Path, request_id: str) -> None:
    subprocess.run([sys.executable, "-m", "toolkeeper.cli", "approvals", "deny", request_id,
                    "--state-dir", str(tmp_path / "state")], capture_output=True, text=True,
                   check=True, timeout=60)


def _says(page: Any, text: str) -> None:
    """Wait (bounded) until the page's notice says ``text``; say what it said."""
    try:
        page.wait_for_function("t => document.getElementById('notice')?.innerText.includes(t)",
                               arg=text, timeout=30000)
    except Exception:
        pytest.fail(f"the notice said {page.inner_text('#notice')!r}, not {text!r}")


def test_the_keyboard_cursor_stays_on_its_card_when_an_earlier_card_leaves(
        browser: Any, tmp_path: Path) -> None:
    proc, url, login = start_page(tmp_path)  # --approval-wait 0: each call answers 'pending'
    try:
        _made(url, ["PT-00", "PT-01 read", "PT-02 dangerous", "PT-03"])  # oldest first
        page = _page(browser, login)
        _cards(page, 4)
        ids = _ids(page)
        page.keyboard.press("j")  # onto the card the person reads
        assert _current(page) == [ids[1]]
        _deny_from_the_cli(tmp_path, ids[0])  # someone else decides the first card
        _cards(page, 3)
        assert _current(page) == [ids[1]]  # the cursor stayed on its card, not its place
        assert page.get_attribute(f"#card-{ids[1]}", "aria-current") == "true"
        assert page.evaluate("() => document.activeElement?.dataset?.id") == ids[1]
        assert page.get_attribute("#inbox", "data-hold") == "1"
        page.keyboard.press("a")  # at once: the list just moved under the cursor
        _says(page, "Nothing was approved: the list changed under the cursor")
        page.wait_for_function("() => !document.getElementById('inbox').dataset.hold",
                               timeout=30000)
        assert _states(tmp_path)[ids[1]] == _states(tmp_path)[ids[2]] == "pending"
        page.keyboard.press("a")  # looked again: the card they read is approved
        _cards(page, 2)
        states = _states(tmp_path)
        assert (states[ids[1]], states[ids[2]]) == ("approved", "pending")
        assert _current(page) == [ids[2]]  # after a key decides, the next card
        _deny_from_the_cli(tmp_path, ids[2])  # the current card itself leaves
        _cards(page, 1)
        assert _current(page) == []  # nothing is current until the person moves
        _says(page, "left the list")
        page.wait_for_function("() => !document.getElementById('inbox').dataset.hold",
                               timeout=30000)
        page.keyboard.press("d")
        _says(page, "Nothing was denied: no card is current")
        page.keyboard.press("x")
        _says(page, "Nothing was selected: no card is current")
        assert _states(tmp_path)[ids[3]] == "pending"
        page.keyboard.press("j")
        assert _current(page) == [ids[3]]
        _clean(page)
    finally:
        stop(proc)


def test_approving_the_selected_with_the_keyboard_names_each_refused_card(
        browser: Any, tmp_path: Path) -> None:
    proc, url, login = start_page(tmp_path)
    try:
        _made(url, ["PT-10", "PT-11"])
        page = _page(browser, login)
        _cards(page, 2)
        ids = _ids(page)
        page.keyboard.press("x")
        page.keyboard.press("j")
        page.keyboard.press("x")
        _deny_from_the_cli(tmp_path, ids[0])  # decided elsewhere while selected
        _cards(page, 1)
        page.keyboard.press("A")
        _says(page, "Not all decided: 1 of 2 approved")
        said = page.inner_text("#notice")
        assert f"{ids[0]}:" in said and ids[1] not in said, said
        states = _states(tmp_path)
        assert (states[ids[0]], states[ids[1]]) == ("denied", "approved")
        _clean(page)
    finally:
        stop(proc)
