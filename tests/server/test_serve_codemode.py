"""``[codemode]`` in ``toolkeeper serve``: an MCP client sends a script; it runs in the real
sandbox and each of its calls is governed and audited like a direct one."""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path

import pytest

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
