"""What a card holds back in the inbox, in a real browser against a real ``toolkeeper serve``:
a call whose arguments are megabytes is cut in the inbox (each refresh stays small) and is
approved only from its own page, which shows every byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .test_inbox_browser import _cards, _current, _says, _states
from .test_web import start_page, stop
from .test_web_browser import _Call, _page, browser

__all__ = ["browser"]

TOOLS = '''
from typing import Any

from toolkeeper import ToolRisk, tool

@tool(risk=ToolRisk.CRITICAL)
def configure(settings: dict[str, Any]) -> str:
    """Apply free-form settings."""
    return f"configured {len(settings)}"
'''
ITEMS = 20_000  # ~400 KB of JSON; each refresh of the inbox carried ~3 MB of it before
FRAGMENT = "() => fetch((document.body.dataset.root || '') + '/fragments/inbox', " \
           "{credentials: 'same-origin', cache: 'no-store'}).then(r => r.text()).then(t => t.length)"


def _served(tmp_path: Path) -> tuple[Any, str, str]:
    (tmp_path / "tools.py").write_text(TOOLS)
    return start_page(tmp_path, tools=str(tmp_path / "tools.py"))


def test_a_huge_card_is_cut_in_the_inbox_and_approved_only_after_its_full_arguments_are_shown(
        browser: Any, tmp_path: Path) -> None:
    proc, url, login = _served(tmp_path)
    try:
        settings: dict[str, object] = {f"k{i}": i for i in range(ITEMS)}
        settings["zz_last"] = "rm -rf /"  # past the cut: what a person must still read
        assert _Call(url, {"settings": settings}, tool="configure").wait().is_error  # waiting
        page = _page(browser, login)
        _cards(page, 1)
        (request,) = _states(tmp_path)
        assert page.evaluate(FRAGMENT) < 500_000  # the inbox's refresh stays small
        card = page.locator(f"#card-{request}")
        text = card.inner_text()
        assert "Not shown here:" in text and "View the full arguments" in text
        assert "zz_last" not in text
        assert card.locator("button.approve, button.approve-session, input.pick").count() == 0
        page.keyboard.press("j")
        assert _current(page) == [request]
        page.keyboard.press("a")  # the keyboard cannot approve what the inbox did not show
        _says(page, "Nothing was approved: this card's arguments are too long to show here")
        assert _states(tmp_path)[request] == "pending"
        card.locator("p.cut-card a.full").click()  # the request's own page: every byte
        page.wait_for_selector("article.card button.approve", timeout=30000)
        page.eval_on_selector_all("article.card details.fold", "ds => ds.forEach(d => d.open = true)")
        full = page.locator("article.card").inner_text()
        assert '"rm -rf /"' in full and "Not shown here" not in full
        page.click("article.card button.approve")
        page.wait_for_function("() => location.pathname.endsWith('/')", timeout=30000)
        assert _states(tmp_path)[request] in ("approved", "executing", "done")
    finally:
        stop(proc)


BLANK = "\u3164\u2800\u115f\u1160\uffa0"  # printable to Python, blank to a reader


def test_blank_looking_letters_are_escaped_on_the_card_and_in_the_edit_box(
        browser: Any, tmp_path: Path) -> None:
    proc, url, login = _served(tmp_path)
    try:
        command = f"echo ok{BLANK[0] * 3} hidden{BLANK[1]}; rm{BLANK[2:]} -rf x"
        assert _Call(url, {"settings": {"command": command}}, tool="configure").wait().is_error
        page = _page(browser, login)
        _cards(page, 1)
        (request,) = _states(tmp_path)
        card = page.locator(f"#card-{request}")
        text = card.locator("section.block").first.inner_text()
        for char in BLANK:
            assert char not in text and f"\\u{ord(char):04x}" in text, (char, text)
        assert "U+3164 HANGUL FILLER" in card.locator(".flags li.invisible").first.inner_text()
        card.locator("details.edit > summary").click()
        box = card.locator("textarea[name=arguments]")
        value = box.input_value()
        for char in BLANK:
            assert char not in value and f"\\u{ord(char):04x}" in value, (char, value)
        assert json.loads(value) == {"settings": {"command": command}}  # reads back the same
        box.fill('{"settings": "not an object"}')  # an edit the tool does not take
        card.locator("button.approve-edited").click()
        page.wait_for_selector("main h1", timeout=30000)
        said = page.inner_text("main")
        assert "Not decided" in said and "do not fit 'configure'" in said, said
        assert ".." not in said and "call the tool again" not in said, said
        assert "Correct them and approve again" in said, said
        assert _states(tmp_path)[request] == "pending"
    finally:
        stop(proc)


def test_a_grant_for_the_client_says_any_arguments_and_a_critical_tool_asks_to_confirm_it(
        browser: Any, tmp_path: Path) -> None:
    proc, url, login = _served(tmp_path)
    try:
        assert _Call(url, {"settings": {"mode": "safe"}}, tool="configure").wait().is_error
        page = _page(browser, login)
        _cards(page, 1)
        (request,) = _states(tmp_path)
        card = page.locator(f"#card-{request}")
        grant = card.locator("button.approve-session")
        assert "any arguments" in grant.inner_text()
        hint = card.locator("p.grant-hint").inner_text()
        assert "with any arguments" in hint and "asked to confirm" in hint, hint
        grant.click()  # a critical tool: one click does not grant it
        page.wait_for_selector("form.confirm-grant", timeout=30000)
        assert "any arguments" in page.inner_text("main")
        assert _states(tmp_path)[request] == "pending"
        page.wait_for_function("() => document.activeElement?.classList.contains("
                               "'confirm-session')", timeout=30000)
        page.keyboard.press("Enter")  # the keyboard alone confirms
        page.wait_for_function("() => location.pathname.endsWith('/') && "
                               "!document.querySelector('form.confirm-grant')", timeout=30000)
        assert _states(tmp_path)[request] == "approved"
        other = _Call(url, {"settings": {"mode": "anything else"}}, tool="configure").wait()
        assert not other.is_error  # the grant: other arguments run without asking
    finally:
        stop(proc)
