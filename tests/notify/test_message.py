"""What a notification says, in every format: the request as the card shows it, with what a
model chose escaped for the format it goes into, secrets masked, long values cut with a marker,
invisible characters made visible, and buttons no argument can forge."""

from __future__ import annotations

import time
from typing import Any

from toolkeeper.approval import ApprovalRequest
from toolkeeper.notify import Composer, DecisionLinks
from toolkeeper.notify.message import (
    Button,
    Notice,
    as_html,
    as_json,
    as_slack,
    as_teams,
    as_text,
    ntfy_actions,
)
from toolkeeper.notify.text import cut_lines, generic_summary, mask_secrets

HOSTILE = "<a href='https://evil.example'>Approve</a> & <@here> [Approve](https://evil) \u202egnp.exe"


def _notice(kind: str = "request", **changes: object) -> Notice:
    now = time.time()
    fields: dict[str, object] = {
        "kind": kind, "request_id": "apr_1", "tool": "shell", "client": "ci\u200bbot", "risk": "critical",
        "reason": "risk critical is above sensitive", "args_digest": "d" * 64, "created_at": now - 60,
        "expires_at": now + 3540, "summary": (f"command: {HOSTILE}",),
        "where": "http://127.0.0.1:1/approvals/apr_1", "sent_at": now,
        "buttons": (Button(label="Approve", url="http://127.0.0.1:1/notify/tok-a", action="approve"),
                 Button(label="Deny", url="http://127.0.0.1:1/notify/tok-d", action="deny"),
                 Button(label="Open the card", url="http://127.0.0.1:1/approvals/apr_1"))}
    fields.update(changes)
    return Notice(**fields)  # type: ignore[arg-type]


def test_the_text_names_tool_client_risk_why_expiry_arguments_and_each_link() -> None:
    text = as_text(_notice())
    assert "shell waits for a person's decision (request apr_1)" in text
    assert "Client: ci\\u200bbot. Risk: critical." in text  # the zero-width space is visible
    assert "Why it asks: risk critical is above sensitive" in text
    assert "Expires in 59 min" in text
    assert "Approve: http://127.0.0.1:1/notify/tok-a" in text
    assert "Open the card: http://127.0.0.1:1/approvals/apr_1" in text


def test_email_html_escapes_every_value_and_writes_each_link_out() -> None:
    page = as_html(_notice())
    assert "<a href='https://evil.example'>" not in page and "&lt;a href=" in page
    assert page.count("<a href=") == 3  # the three buttons, and nothing an argument wrote
    assert "Approve: http://127.0.0.1:1/notify/tok-a" in page  # the mail's text part keeps it


def test_slack_escapes_links_and_mentions_and_makes_real_buttons() -> None:
    payload: Any = as_slack(_notice())  # Slack's JSON, read as the test expects it
    sections = [b["text"]["text"] for b in payload["blocks"] if b["type"] == "section"]
    assert not any("<@here>" in s or "<https://" in s for s in sections)
    assert "&lt;@here&gt;" in sections[-1]
    (actions,) = [b for b in payload["blocks"] if b["type"] == "actions"]
    assert [(e["text"]["text"], e["url"], e.get("style")) for e in actions["elements"]] == [
        ("Approve", "http://127.0.0.1:1/notify/tok-a", "primary"),
        ("Deny", "http://127.0.0.1:1/notify/tok-d", "danger"),
        ("Open the card", "http://127.0.0.1:1/approvals/apr_1", None)]


def test_teams_shows_arguments_as_text_runs_and_buttons_as_open_url_actions() -> None:
    card = as_teams(_notice())["attachments"][0]["content"]  # type: ignore[index]
    runs = [i for b in card["body"] if b["type"] == "RichTextBlock" for i in b["inlines"]]
    assert all(r["type"] == "TextRun" for r in runs)  # no markdown: an argument makes no link
    assert any(HOSTILE.replace("\u202e", "") in r["text"].replace("\u202e", "") for r in runs)
    assert [(a["type"], a["title"]) for a in card["actions"]] == [
        ("Action.OpenUrl", "Approve"), ("Action.OpenUrl", "Deny"),
        ("Action.OpenUrl", "Open the card")]


def test_ntfy_gets_its_buttons_as_view_actions() -> None:
    assert ntfy_actions(_notice()) == (
        "view, Approve, http://127.0.0.1:1/notify/tok-a, clear=true; "
        "view, Deny, http://127.0.0.1:1/notify/tok-d, clear=true; "
        "view, Open the card, http://127.0.0.1:1/approvals/apr_1, clear=true")


def test_an_expired_notice_says_it_did_not_run_and_has_no_buttons_to_press() -> None:
    now = time.time()
    notice = _notice("expired", buttons=(), created_at=now - 3600, expires_at=now)
    assert notice.title == "Expired, it did not run: shell (critical) for ci\\u200bbot"
    text = as_text(notice)
    assert "Nobody decided within 60 min; it did not run" in text and "denied" not in text
    assert as_json(notice)["event"] == "approval.expired"


def test_secrets_are_masked_before_anything_is_cut_and_long_values_say_what_was_cut() -> None:
    masked = mask_secrets({"env": {"KEY": "sk-" + "a" * 40}, "n": 3})
    assert masked == {"env": {"KEY": "[REDACTED]"}, "n": 3}
    lines = cut_lines(generic_summary("t", {"text": "x" * 1000, "many": "\n".join("l" * 30)}))
    assert lines[0].startswith('text: "xxx') and lines[0].endswith(
        "… [808 more characters: the card shows all]")
    assert lines[-1] == "… [8 more lines: the card shows all]"


def test_control_bidi_and_line_separator_characters_are_written_as_escapes() -> None:
    (line,) = cut_lines(["a\u202eb\x1bc\u2028d"])
    assert line == "a\\u202eb\\x1bc\\u2028d"


def test_a_message_without_a_page_names_the_command_that_decides(tmp_path: object) -> None:
    request = ApprovalRequest(call_id="c", tool="t", risk="high", arguments={}, args_digest="d",
                              session_id="client-alice")
    composer = Composer(base_url=lambda: None, where=lambda rid: f"toolkeeper approvals decide {rid}")
    notice = composer.notice(request, "request", "ntfy")
    assert notice.buttons == () and notice.client == "alice"
    assert f"Decide: toolkeeper approvals decide {request.id}" in as_text(notice)


def test_direct_decisions_make_two_single_use_links_and_the_card_button(tmp_path: object) -> None:
    from pathlib import Path

    links = DecisionLinks(Path(str(tmp_path)) / "l.db")
    request = ApprovalRequest(call_id="c", tool="t", risk="high", arguments={}, args_digest="d",
                              session_id="s")
    composer = Composer(base_url=lambda: "https://approvals.example.com/",
                        where=lambda rid: rid, links=links)
    approve, deny, card = composer.notice(request, "request", "ntfy").buttons
    assert (approve.action, deny.action, card.action) == ("approve", "deny", "open")
    assert approve.url.startswith("https://approvals.example.com/notify/")
    assert card.url == f"https://approvals.example.com/approvals/{request.id}"
    found = links.find(approve.url.rsplit("/", 1)[1])
    assert found is not None and (found.choice, found.channel) == ("approve", "ntfy")
