"""``--approval-wait`` is the wait of the one policy a real ``toolkeeper serve`` runs calls under:
a client's direct calls and its code-mode scripts' calls alike wait that long for a person,
whatever the tool's HITL mode, then answer 'pending' (a script's run pauses on it; the request
stays open)."""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path

import anyio
import pytest

from .test_serve import _client, _start

pytestmark = pytest.mark.anyio

TOOLS = '''
from toolkeeper import HitlMode, ToolRisk, tool


@tool(risk=ToolRisk.HIGH, hitl_mode=HitlMode.CONTINUE_ON_TIMEOUT)
def restart(service: str) -> str:
    """Restart a service (approved on its own if nobody answers in time)."""
    return f"restarted {service}"
'''


async def test_a_call_waits_the_approval_wait_whatever_its_mode_in_a_script_too(
        tmp_path: Path) -> None:
    tools = tmp_path / "ops_tools.py"
    tools.write_text(TOOLS)
    config = tmp_path / "toolkeeper.toml"
    config.write_text('[codemode]\nenabled = true\ntools = ["restart"]\n')
    proc, url = _start(tmp_path, "--config", str(config), tools=str(tools))  # --approval-wait 0
    try:
        async with _client(url) as client:
            with anyio.fail_after(20):  # not the 30 s a CONTINUE_ON_TIMEOUT request lives
                direct = await client.call_tool("restart", {"service": "web"})
                scripted = await client.call_tool("tool_chain", {
                    "code": "r = restart(service='db')\nresult = r.status"})
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) in (0, 130)
    assert direct.is_error and "waiting for approval" in direct.content[0].text  # type: ignore[union-attr]
    scripted_text = scripted.content[0].text  # type: ignore[union-attr]
    # the script's call waited as long, then its run paused on the request (not denied)
    assert scripted.is_error and scripted_text.startswith("status: pending"), scripted_text
    assert "paused at call 1 ('restart'" in scripted_text
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        rows = db.execute("SELECT state FROM approvals ORDER BY rowid").fetchall()
    assert [r[0] for r in rows] == ["pending", "pending"]  # open: a person may still decide
