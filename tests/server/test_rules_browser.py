""""Allow similar" in a real browser (Debian's chromium, driven by Playwright): the card
proposes a rule as Cedar text, the person narrows an argument to a pattern and edits the text,
saves it with the decision, the call runs, the next similar call runs without asking, and the
rules page lists the rule and revokes it. "Forbid similar" chosen on a card stays chosen when
the inbox is redrawn under it (another call arriving), and denies the call."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from .test_serve import TOKEN
from .test_web import start_page, stop
from .test_web_browser import _Call, _page, browser  # noqa: F401  (a fixture)

TOOLS = '''
from toolkeeper import ToolRisk, tool


@tool(risk=ToolRisk.HIGH)
def read_report(path: str, lines: int = 10) -> str:
    """Read the first lines of a report."""
    return f"report {path} ({lines} lines)"
'''


def _shows(page: Any, selector: str, needle: str, absent: str = "") -> str:
    """The value of the field once it holds ``needle`` (and not ``absent``, if given; 15 s at
    most; the page's CSP forbids the string predicates of ``wait_for_function``)."""
    deadline, seen = time.monotonic() + 15, ""
    while time.monotonic() < deadline:
        seen = page.input_value(selector)
        if needle in seen and not (absent and absent in seen):
            return str(seen)
        page.wait_for_timeout(100)  # a pace for the poll; the condition decides
    pytest.fail(f"{selector} never held {needle!r}; last: {seen!r}")


def test_allow_similar_proposes_an_editable_rule_that_runs_the_next_similar_call(
        browser: Any, tmp_path: Path) -> None:  # noqa: F811
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url, login = start_page(tmp_path, "--approval-wait", "40",
                                  tools=str(tmp_path / "tools.py"))
    try:
        page = _page(browser, login)
        call = _Call(url, {"path": "reports/q1.txt", "lines": 5}, tool="read_report")
        page.wait_for_selector("article.card", timeout=15000)
        page.click("details.rule summary")
        area = "form.rule-form textarea[name=text]"
        proposed = _shows(page, area, 'resource == Tool::"read_report"')
        assert 'context.args.path == "reports/q1.txt"' in proposed, proposed
        assert "context.args.lines == 5" in proposed and "@once" in proposed
        page.select_option("form.rule-form select[name=for]", "8h")
        page.uncheck("form.rule-form input[name=arg_on][value=lines]")
        page.fill("form.rule-form input[name='arg.path']", "reports/*")
        shown = _shows(page, area, 'context.args.path like "reports/*"')
        assert "lines" not in shown and "@once" not in shown, shown
        page.fill(area, '@reason("quarterly reports are fine")\n' + shown)  # edited by hand
        page.click("form.rule-form button.save-rule")
        result = call.wait()
        assert not result.is_error and "report reports/q1.txt" in result.content[0].text
        page.wait_for_selector("#empty", timeout=15000)
        similar = _Call(url, {"path": "reports/q2.txt", "lines": 50}, tool="read_report").wait()
        assert not similar.is_error and "reports/q2.txt" in similar.content[0].text
        rules = httpx.get(f"{url}/api/rules", headers={"Authorization": f"Bearer {TOKEN}"},
                          timeout=10).json()["rules"]
        assert len(rules) == 1 and rules[0]["reason"] == "quarterly reports are fine"
        assert rules[0]["author"] == "operator:operator" and rules[0]["expires"] is not None
        page.goto(f"{url}/rules")
        listed = page.inner_text(f"article#{rules[0]['id']}")
        assert "operator:operator" in listed and 'like "reports/*"' in listed
        page.click(f"article#{rules[0]['id']} button.deny")
        page.wait_for_selector(f"article#{rules[0]['id']}.ended", timeout=15000)
        assert page.evaluate("window.__alerts") == []
        assert page.evaluate("window.__violations") == []
    finally:
        stop(proc)


def test_forbid_similar_stays_chosen_when_a_new_call_redraws_the_inbox_and_denies_the_call(
        browser: Any, tmp_path: Path) -> None:  # noqa: F811
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url, login = start_page(tmp_path, "--approval-wait", "40",
                                  tools=str(tmp_path / "tools.py"))
    try:
        page = _page(browser, login)
        call = _Call(url, {"path": "/etc/shadow", "lines": 5}, tool="read_report")
        page.wait_for_selector("article.card", timeout=15000)
        card = page.locator("article.card").first
        request_id = card.get_attribute("data-id")
        card.locator("details.rule summary").click()
        form = f"#card-{request_id} form.rule-form"
        area = f"{form} textarea[name=text]"
        _shows(page, area, "permit (")
        page.select_option(f"{form} select[name=effect]", "forbid")
        page.select_option(f"{form} select[name=for]", "revoked")
        chosen = _shows(page, area, "forbid (", absent="@once")
        page.click("h1")  # the person reads elsewhere on the page: the redraw is free to run
        other = _Call(url, {"path": "reports/q1.txt", "lines": 1}, tool="read_report")
        page.wait_for_selector("article.card >> nth=1", timeout=15000)  # the inbox redrawn
        assert page.input_value(f"{form} select[name=effect]") == "forbid"
        assert page.input_value(f"{form} select[name=for]") == "revoked"
        assert page.input_value(area) == chosen  # never proposed again from the defaults
        save = page.locator(f"{form} button.save-rule")
        assert "Deny this call" in save.inner_text()
        save.click()
        result = call.wait()
        assert result.is_error and "denied" in result.content[0].text.lower()
        rules = httpx.get(f"{url}/api/rules", headers={"Authorization": f"Bearer {TOKEN}"},
                          timeout=10).json()["rules"]
        assert len(rules) == 1 and rules[0]["cedar"].startswith("forbid"), rules
        decided = httpx.get(f"{url}/api/approvals/{request_id}",
                            headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).json()
        assert decided["state"] == "denied", decided
        page.wait_for_function("() => document.querySelectorAll("
                               "'article.card[data-state=pending]').length === 1",
                               timeout=15000)  # the other call's card stays
        assert other.is_alive()  # the other call still waits for a person
        assert page.evaluate("window.__alerts") == []
        assert page.evaluate("window.__violations") == []
    finally:
        stop(proc)


def test_a_rule_whose_effect_is_not_the_decision_shown_is_refused(
        browser: Any, tmp_path: Path) -> None:  # noqa: F811
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url, login = start_page(tmp_path, "--approval-wait", "40",
                                  tools=str(tmp_path / "tools.py"))
    try:
        page = _page(browser, login)
        _Call(url, {"path": "/etc/shadow", "lines": 5}, tool="read_report")
        page.wait_for_selector("article.card", timeout=15000)
        request_id = page.locator("article.card").first.get_attribute("data-id")
        page.click("details.rule summary")
        area = "form.rule-form textarea[name=text]"
        proposed = _shows(page, area, "permit (")
        page.fill(area, proposed.replace("permit (", "forbid ("))  # the text says forbid,
        page.click("form.rule-form button.save-rule")               # the button approve
        page.wait_for_selector("text=Rule not saved", timeout=15000)
        said = page.inner_text("main")
        assert "forbid rule never approves a call" in said and "Nothing was decided" in said
        decided = httpx.get(f"{url}/api/approvals/{request_id}",
                            headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).json()
        assert decided["state"] == "pending"
        assert httpx.get(f"{url}/api/rules", headers={"Authorization": f"Bearer {TOKEN}"},
                         timeout=10).json()["rules"] == []
    finally:
        stop(proc)



CONFIGURE = '''
from typing import Any

from toolkeeper import ToolRisk, tool


@tool(risk=ToolRisk.HIGH)
def configure(settings: dict[str, Any]) -> str:
    """Apply free-form settings."""
    return f"configured {sorted(settings)}"
'''


def test_allow_similar_on_an_object_argument_takes_it_exactly_as_sent_and_says_so(
        browser: Any, tmp_path: Path) -> None:  # noqa: F811
    (tmp_path / "tools.py").write_text(CONFIGURE)
    proc, url, login = start_page(tmp_path, "--approval-wait", "40",
                                  tools=str(tmp_path / "tools.py"))
    operator = {"Authorization": f"Bearer {TOKEN}"}
    try:
        page = _page(browser, login)
        call = _Call(url, {"settings": {"log_level": "debug"}}, tool="configure")
        page.wait_for_selector("article.card", timeout=15000)
        page.click("details.rule summary")
        page.select_option("form.rule-form select[name=for]", "24h")
        area = "form.rule-form textarea[name=text]"
        proposed = _shows(page, area, "context.digests.settings == ", absent="@once")
        assert "when {" in proposed, proposed
        field = page.locator("form.rule-form input[name='arg.settings']")
        assert field.is_visible() and field.evaluate("f => f.readOnly")
        assert "exactly as sent" in page.inner_text("form.rule-form .pinned-note")
        page.click("form.rule-form button.save-rule")
        assert not call.wait().is_error
        _Call(url, {"settings": {"allow_remote_root": True}}, tool="configure")
        deadline, waiting = time.monotonic() + 30, list[Any]()
        while time.monotonic() < deadline and not waiting:
            waiting = httpx.get(f"{url}/api/approvals?state=pending", headers=operator,
                                timeout=10).json()["approvals"]
            page.wait_for_timeout(100)  # a pace for the poll; the condition decides
        assert [a["arguments"] for a in waiting] == [{"settings": {"allow_remote_root": True}}]
        assert page.evaluate("window.__violations") == []
    finally:
        stop(proc)
