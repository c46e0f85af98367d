"""``[codemode]`` in ``toolkeeper serve``: an MCP client sends a script; it runs in the real
sandbox and each of its calls is governed and audited like a direct one."""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path

import pytest

from ..processes import descendants
from .test_serve import _client, _start

pytestmark = pytest.mark.anyio

SCRIPT = """
f = get_forecast(city='Lisbon', days=2)
print('forecast for', f.structured['city'])
a = broadcast_alert(alert={'region': 'PT-11', 'level': 'red', 'message': 'Storm'})
result = [f.status, a.status]
"""


async def test_a_served_script_calls_tools_through_the_governed_door(tmp_path: Path) -> None:
    config = tmp_path / "toolkeeper.toml"
    config.write_text('[codemode]\nenabled = true\nmax_tool_calls = 5\n'
                      'tools = ["get_forecast", "broadcast_alert"]\n')
    proc, url = _start(tmp_path, "--config", str(config))
    try:
        async with _client(url) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            answer = await client.call_tool("tool_chain", {"code": SCRIPT})
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) in (0, 130)
    assert "def get_forecast(" in (listed["tool_chain"].description or "")
    text = answer.content[0].text  # type: ignore[union-attr]
    # the run paused at the alert: the model is told it waits, with what printed so far
    assert answer.is_error and text.startswith("status: pending"), text
    assert "forecast for Lisbon" in text and "paused at call 2 ('broadcast_alert'" in text
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        audited = [r[:2] for r in db.execute("SELECT tool, status FROM audit ORDER BY rowid")]
        (state,) = db.execute(
            "SELECT state FROM approvals WHERE tool = 'broadcast_alert'").fetchone()
    # each call of the script is in the audit log like a direct call, then the chain itself
    assert audited == [("get_forecast", "ok"), ("broadcast_alert", "pending"),
                       ("tool_chain", "pending")]
    assert state == "pending"  # the alert waits for a person, as it would outside a script


def test_a_bad_codemode_section_names_the_key_and_line(tmp_path: Path) -> None:
    from toolkeeper.config import load_config
    from toolkeeper.errors import ConfigError

    config = tmp_path / "toolkeeper.toml"
    config.write_text('[codemode]\nenabled = true\nworkspace = "everything"\n')
    with pytest.raises(ConfigError, match=r"toolkeeper.toml:3: codemode.workspace"):
        load_config(config)


def _sandboxes(pid: int) -> set[int]:
    """The sandboxes below ``pid``: each is a bwrap whose parent is no bwrap (bubblewrap
    forks itself into the new namespaces)."""
    found = {child for child, argv in descendants(pid).items()
             if argv and argv[0].endswith(b"bwrap")}
    return {b for b in found if not any(b in descendants(other) for other in found - {b})}


async def test_serve_starts_a_sandbox_ahead_of_the_first_script(tmp_path: Path) -> None:
    """``[codemode] warm`` defaults to one: serve starts a sandbox before any script comes,
    the first run takes it and a fresh one replaces it (none is used twice)."""
    config = tmp_path / "toolkeeper.toml"
    config.write_text('[codemode]\nenabled = true\ntools = ["get_forecast"]\n')
    proc, url = _start(tmp_path, "--config", str(config))
    try:
        deadline = time.monotonic() + 30
        while not (before := _sandboxes(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(before) == 1, "no sandbox was started ahead of the first script"
        async with _client(url) as client:
            answer = await client.call_tool(
                "tool_chain", {"code": "result = get_forecast(city='Oslo', days=1).status"})
        assert not answer.is_error, answer.content
        deadline = time.monotonic() + 30
        while ((now := _sandboxes(proc.pid)) & before or len(now) != 1) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(now) == 1 and not now & before  # the used one is gone, a new one waits
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) in (0, 130)


def test_warm_defaults_to_one_but_not_under_a_writable_workspace() -> None:
    from toolkeeper.config.model import CodeModeSection

    assert CodeModeSection().warm_sandboxes == 1
    assert CodeModeSection(workspace="read").warm_sandboxes == 1
    assert CodeModeSection(workspace="write").warm_sandboxes == 0
    assert CodeModeSection(workspace="write", warm=2).warm_sandboxes == 2
    assert CodeModeSection(warm=0).warm_sandboxes == 0
