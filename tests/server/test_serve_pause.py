"""A served script whose call waits for a person pauses, and resumes exactly once: a real
``toolkeeper serve`` with ``[codemode]``, the official MCP client, the real sandbox, tools that
write each side effect to a file; the server killed with -9 while the run waits and again
after the approval, restarted on the same state (SQLite, then PostgreSQL) — and each call of
the script ran once. The approval card shows the call and the script around it."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest

from ..blocks import text_of
from .test_client_channel import _asking_client
from .test_serve import TOKEN, _client, _start
from .test_web import _login, start_page, stop

pytestmark = pytest.mark.anyio

TOOLS = '''
from pathlib import Path

from toolkeeper import ToolRisk, tool

LEDGER = Path(__file__).with_name("ledger")


def _write(line: str) -> None:
    with LEDGER.open("a") as out:
        out.write(line + "\\n")


@tool
def note(text: str) -> str:
    """Write a note (a side effect)."""
    _write(f"note {text}")
    return f"noted {text}"


@tool(risk=ToolRisk.CRITICAL)
def deploy(version: str) -> str:
    """Deploy a version (needs approval)."""
    _write(f"deploy {version}")
    return f"deployed {version}"
'''

CONFIG = '[codemode]\nenabled = true\ntools = ["note", "deploy"]\n'

SCRIPT = """
note(text='a')
note(text='b')
d = deploy(version='v1')
note(text='c')
print('deploy said:', d.text)
result = d.status
"""


def _ledger(tmp_path: Path) -> list[str]:
    path = tmp_path / "ledger"
    return path.read_text().splitlines() if path.exists() else []


def _api(url: str, path: str, body: dict[str, object] | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    if body is None:
        return httpx.get(f"{url}{path}", headers=headers, timeout=30)
    return httpx.post(f"{url}{path}", headers=headers, json=body, timeout=30)


def _serve(tmp_path: Path, store: str | None, wait: str) -> tuple[subprocess.Popen[str], str]:
    return _start(tmp_path, "--config", str(tmp_path / "toolkeeper.toml"), "--approval-wait",
                  wait, *(["--store", store] if store else []), tools=str(tmp_path / "tools.py"))


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=20)


async def _pending(url: str) -> dict[str, object]:
    """The one pending request, once it shows (within 60 s)."""
    with anyio.fail_after(60):
        while not (listed := _api(url, "/api/approvals?state=pending").json()["approvals"]):
            await anyio.sleep(0.1)
    (request,) = listed
    return request  # type: ignore[no-any-return]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest) -> str | None:
    if request.param == "sqlite":
        return None
    return str(request.getfixturevalue("postgres_url"))


async def test_a_paused_script_runs_each_call_once_across_kill_9_and_restarts(
        tmp_path: Path, store: str | None) -> None:
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "toolkeeper.toml").write_text(CONFIG)
    answer, request = await _paused_killed_resumed(tmp_path, store, SCRIPT)
    text = answer.content[0].text
    assert request["tool"] == "deploy" and request["arguments"] == {"version": "v1"}
    # each call of the script ran once: the journaled ones before, the approved one after
    assert _ledger(tmp_path) == ["note a", "note b", "deploy v1", "note c"], text
    assert not answer.is_error and answer.structured_content == {"status": "ok", "value": "ok"}
    assert "deploy said: deployed v1" in text and "[from the journal: nothing ran]" in text


async def test_a_safe_call_a_policy_asks_about_pauses_and_resumes_once_across_kill_9(
        tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "toolkeeper.toml").write_text(CONFIG)
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "team.cedar").write_text(
        '@id("note-c-asks") @ask\npermit (principal, action == Action::"note", resource) '
        'when { context.args.text == "c" };\n')
    script = "note(text='a')\nnote(text='b')\nnote(text='c')\nresult = note(text='d').text\n"
    answer, request = await _paused_killed_resumed(tmp_path, None, script)
    text = answer.content[0].text
    assert request["tool"] == "note" and request["arguments"] == {"text": "c"}
    assert _ledger(tmp_path) == ["note a", "note b", "note c", "note d"], text
    assert not answer.is_error, text


async def _paused_killed_resumed(tmp_path: Path, store: str | None, script: str
                                 ) -> tuple[Any, dict[str, object]]:
    """Run ``script`` until its call waits, kill serve with -9, restart and approve, kill it
    again, restart and send the script again: its answer and the request it paused on."""
    proc, url = _serve(tmp_path, store, wait="50")
    try:
        async with anyio.create_task_group() as group:
            async def call() -> None:
                with contextlib.suppress(BaseException):  # the server is killed under it
                    async with _client(url) as client:
                        await client.call_tool("tool_chain", {"code": script})

            group.start_soon(call)
            request = await _pending(url)  # the run waits on the call
            _kill(proc)  # -9 while the run waits
            group.cancel_scope.cancel()
    finally:
        if proc.poll() is None:
            _kill(proc)
    assert len(_ledger(tmp_path)) == 2, _ledger(tmp_path)  # the two calls before it
    proc, url = _serve(tmp_path, store, wait="50")
    try:
        decided = _api(url, f"/api/approvals/{request['id']}/decision", {"decision": "approve"})
        assert decided.status_code == 200, decided.text
    finally:
        _kill(proc)  # -9 again: after the approval, before the script is sent again
    proc, url = _serve(tmp_path, store, wait="50")
    try:
        async with _client(url) as client:
            answer = await client.call_tool("tool_chain", {"code": script})
        again = _api(url, f"/api/approvals/{request['id']}").json()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert again["state"] == "done"
    return answer, request


async def test_a_paused_call_tells_the_model_it_waits_and_how_to_resume(
        tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "toolkeeper.toml").write_text(CONFIG)
    proc, url = _serve(tmp_path, None, wait="0")
    try:
        async with _client(url) as client:
            answer = await client.call_tool("tool_chain", {"code": SCRIPT})
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    text = text_of(answer.content[0])
    assert answer.is_error and text.startswith("status: pending"), text
    assert "paused at call 3 ('deploy', line 4)" in text and "exactly the same code" in text
    assert "/approvals/apr_" in text  # where a person decides
    assert "denied" not in text.split("(a denied")[0]
    assert _ledger(tmp_path) == ["note a", "note b"]


async def test_the_card_shows_the_call_and_the_script_with_its_line_marked(
        tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "toolkeeper.toml").write_text(CONFIG)
    proc, url, login = start_page(tmp_path, "--config", str(tmp_path / "toolkeeper.toml"),
                                  tools=str(tmp_path / "tools.py"))
    try:
        async with _client(url) as client:
            answer = await client.call_tool("tool_chain", {"code": SCRIPT})
        assert answer.is_error
        request = await _pending(url)
        browser = _login(url, login)
        page = browser.get(f"/approvals/{request['id']}").text
        inbox = browser.get("/").text
    finally:
        stop(proc)
    assert "the script this call came from (tool_chain)" in page
    assert "line 4 (marked) is this call" in page
    marked = page.split('class="row marked"')[1].split("</div>")[0]
    assert "▶ 4" in marked and "deploy(version=&#x27;v1&#x27;)" in marked
    assert page.count('class="row marked"') == 1
    assert "note: ok" in page and "flagged" not in page  # the calls it made before
    assert "the script this call came from" in inbox


async def test_a_client_asked_about_a_paused_scripts_call_decides_it_and_gets_the_output(
        tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "toolkeeper.toml").write_text('[approval]\nchannels = ["page", "client"]\n'
                                              + CONFIG)
    # the page's wait is 50 s: the person at the client is asked at once, not after it (the
    # run pauses as soon as its call's request is stored), so the call is answered before
    # that wait could have ended
    proc, url = _serve(tmp_path, None, wait="50")
    asked: list[str] = []

    async def answer(_params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    try:
        with anyio.fail_after(40):
            async with _asking_client(url, answer, asked) as client:
                result = await client.call_tool("tool_chain", {"code": SCRIPT})
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    text = result.content[0].text  # type: ignore[union-attr]
    # one form, about the script's call; then the model's one result: the script's output
    assert len(asked) == 1 and "'deploy' (risk critical)" in asked[0], asked
    assert not result.is_error and "deploy said: deployed v1" in text, text
    assert _ledger(tmp_path) == ["note a", "note b", "deploy v1", "note c"]
