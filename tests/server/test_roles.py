"""Roles and credentials with real ``toolkeeper serve`` processes: the agent never approves
itself. Each test takes the agent's side — what it holds (the printed config), what it can
reach (the workspace, through every built-in tool) — and tries to decide its own call."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from toolkeeper.invoke.gates.record import TOLD_AGAIN

from ..blocks import text_of
from ..processes import readable
from ..workspaces import hand_over, reachable  # noqa: F401  (a fixture)
from .test_serve import CLIENT_TOKENS, EXAMPLE, TOKEN, _client, _remember, _start, _tokens

pytestmark = pytest.mark.anyio

ALERT = {"alert": {"region": "PT-11", "level": "red", "message": "Storm"}}
ACCEPT = {"Accept": "application/json, text/event-stream"}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=20)
    return proc.stderr.read() if proc.stderr else ""


def _decide(url: str, request_id: str, headers: dict[str, str], decision: str = "approve",
            **extra: str) -> httpx.Response:
    return httpx.post(f"{url}/api/approvals/{request_id}/decision", headers=headers,
                      json={"decision": decision, **extra}, timeout=10)


async def _ask(url: str, token: str | None = None, **alert: str) -> str:
    async with _client(url, token) as client:
        result = await client.call_tool("broadcast_alert",
                                        {"alert": {**ALERT["alert"], **alert}})
    assert result.is_error, result
    return text_of(result.content[0]).split("request ")[1].split(")")[0].split(";")[0]


def test_the_operator_token_is_refused_on_mcp_with_the_way_to_make_a_client_token(
        tmp_path: Path) -> None:
    proc, url = _start(tmp_path)
    try:
        refused = httpx.post(f"{url}/mcp", json=LIST, timeout=10,
                             headers={**ACCEPT, "Authorization": f"Bearer {TOKEN}"})
        assert refused.status_code == 403
        assert "toolkeeper tokens add NAME" in refused.json()["message"]
        assert "broadcast_alert" not in refused.text
    finally:
        _stop(proc)


async def test_the_agent_holding_the_printed_config_cannot_decide_its_own_call(
        tmp_path: Path) -> None:
    proc, url = _start(tmp_path)
    try:
        agent = {"Authorization": f"Bearer {CLIENT_TOKENS[url]}"}
        request_id = await _ask(url)
        for decision in ("approve", "approve_session"):
            own = _decide(url, request_id, agent, decision)
            assert own.status_code == 403 and "only the operator" in own.json()["message"]
        shown = httpx.get(f"{url}/api/approvals/{request_id}", headers=agent).json()
        assert shown["state"] == "pending" and shown["client"] == "default"
        assert _decide(url, request_id, {}).status_code in (401, 403)  # no credential
    finally:
        _stop(proc)


async def test_approving_for_a_client_reaches_neither_another_client_nor_other_sessions(
        tmp_path: Path) -> None:
    bob = _tokens(tmp_path, "add", "bob").stdout.strip()
    proc, url = _start(tmp_path)
    try:
        operator = {"Authorization": f"Bearer {TOKEN}"}
        first = await _ask(url, region="PT-1")
        granted = _decide(url, first, operator, "approve", scope="session")
        assert granted.status_code == 200 and granted.json()["decision"]["scope"] == "session"
        async with _client(url) as client:  # the default client: its grant holds
            ran = await client.call_tool("broadcast_alert", {"alert": {**ALERT["alert"],
                                                                       "region": "PT-1"}})
            other_args = await client.call_tool("broadcast_alert", {"alert": {
                **ALERT["alert"], "region": "PT-2"}})
        assert not ran.is_error and not other_args.is_error, other_args
        bobs = await _ask(url, bob, region="PT-3")  # another client asks anew
        assert bobs != first
        listed = httpx.get(f"{url}/api/approvals?state=pending", headers=operator).json()
        assert [a["client"] for a in listed["approvals"]] == ["bob"]
    finally:
        _stop(proc)


async def test_auth_none_opens_mcp_only_and_deciding_still_needs_the_operator(
        tmp_path: Path) -> None:
    proc, url = _start(tmp_path, "--auth", "none")
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(4)]
        assert "/login?code=" in lines[0] and "Authorization" not in lines[1]
        listed = httpx.post(f"{url}/mcp", json=LIST, headers=ACCEPT, timeout=10)
        assert listed.status_code == 200 and "broadcast_alert" in listed.text
        wrong = httpx.post(f"{url}/mcp", json=LIST, timeout=10,
                           headers={**ACCEPT, "Authorization": "Bearer wrong"})
        assert wrong.status_code == 401  # a wrong token is still wrong
        async with Client(streamable_http_client(
                f"{url}/mcp", http_client=httpx2.AsyncClient(timeout=60))) as client:
            asked = await client.call_tool("broadcast_alert", ALERT)
        request_id = text_of(asked.content[0]).split("request ")[1].split(")")[0].split(";")[0]
        for headers in ({}, {"Authorization": "Bearer nothing"}):
            assert _decide(url, request_id, headers).status_code in (401, 403)
        assert httpx.get(f"{url}/api/approvals", timeout=10).status_code == 401
        operator = {"Authorization": f"Bearer {TOKEN}"}
        everyone = _decide(url, request_id, operator, "approve", scope="session")
        assert everyone.status_code == 409 and "approved once" in everyone.json()["message"]
        assert _decide(url, request_id, operator).json()["state"] == "approved"
    finally:
        _stop(proc)


def _serve(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "toolkeeper.cli", "serve", EXAMPLE,
                             "--port", "0", "--approval-wait", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=cwd)


def _started(proc: subprocess.Popen[str]) -> list[str]:
    assert proc.stdout is not None
    ready = readable([proc.stdout], 60)
    first = proc.stdout.readline() if ready else ""
    if not first.startswith("toolkeeper serving on "):
        proc.kill()
        pytest.fail(f"serve did not start: {first!r} {proc.stderr.read() if proc.stderr else ''}")
    return [first, *(proc.stdout.readline() for _ in range(4))]


@pytest.fixture
def agent_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user with a home of their own and no toolkeeper settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLKEEPER_", "XDG_"))}
    env["HOME"] = str(tmp_path / "home")
    return env


async def _try_to_read_credentials(url: str, state: Path) -> list[str]:
    """Every way a client's tools read files; returns what leaked."""
    secrets = [(state / n).read_text().strip() for n in ("token", "client-token")]
    attempts = [("file_read", {"path": p}) for p in (
        "../token", "../client-token", "../toolkeeper.db", ".toolkeeper/token",
        str(state / "token"), str(state / "client-token"))]
    attempts += [("glob_search", {"pattern": "**/*token*"}),
                 ("glob_search", {"pattern": "../*"}),
                 ("content_search", {"pattern": secrets[0][:12]}),
                 ("shell", {"command": "cat ../token ../client-token; ls -la .. ~ /"}),
                 ("git_operations", {"operation": "log"})]
    operator = {"Authorization": f"Bearer {secrets[0]}"}
    leaked = []
    async with _client(url) as client:

        async def call(tool: str, arguments: dict[str, Any]) -> str:
            """The call's text, approved by the operator when it asks (as a person would)."""
            for _ in range(2):
                result = await client.call_tool(tool, arguments)
                text = " ".join(getattr(c, "text", "") for c in result.content)
                if "waiting for approval (request " not in text:
                    return text
                request_id = text.split("(request ")[1].split(")")[0]
                assert _decide(url, request_id, operator).status_code == 200
            raise AssertionError(f"{tool} still waits after its approval: {text}")

        names = {t.name for t in (await client.list_tools()).tools}
        assert {"file_read", "glob_search", "content_search", "shell"} <= names
        for tool, arguments in attempts:
            if tool in names:
                text = await call(tool, arguments)
                leaked += [f"{tool} {arguments}" for s in secrets if s in text]
        # the same tools do read the workspace: the refusals above are about the credentials
        for tool, arguments in (("file_read", {"path": "canary.txt"}),
                                ("content_search", {"pattern": "canary-7f3"}),
                                ("shell", {"command": "cat canary.txt"})):
            assert "canary-7f3" in await call(tool, arguments), tool
    return leaked


async def test_no_tool_reads_a_credential_with_the_readmes_commands(
        reachable: Path, agent_env: dict[str, str]) -> None:  # noqa: F811
    project = reachable / "project"
    project.mkdir()
    (project / "canary.txt").write_text("canary-7f3\n")
    hand_over(reachable)
    proc = _serve(project, env=agent_env)  # `toolkeeper serve examples/weather.py`
    try:
        lines = _started(proc)
        url = lines[0].split()[3]
        state = Path(agent_env["HOME"]) / ".local" / "state" / "toolkeeper"
        assert f"workspace: {project} (from the current directory)" in lines[3]
        assert f"state: {state}" in lines[4]
        assert not (project / ".toolkeeper").exists()
        _remember(url, state)
        assert await _try_to_read_credentials(url, state) == []
    finally:
        _stop(proc)


async def test_no_tool_reads_a_credential_with_make_runs_layout(
        reachable: Path, agent_env: dict[str, str]) -> None:  # noqa: F811
    # make run: --state-dir in the user's state directory, --workspace .workspace here
    state = Path(agent_env["HOME"]) / ".local" / "state" / "toolkeeper-make-run"
    project = reachable / "project"
    (project / ".workspace").mkdir(parents=True)
    (project / ".workspace" / "canary.txt").write_text("canary-7f3\n")
    hand_over(reachable)
    proc = _serve(project, "--state-dir", str(state), "--workspace", ".workspace",
                  env=agent_env)
    try:
        url = _started(proc)[0].split()[3]
        _remember(url, state)
        assert await _try_to_read_credentials(url, state) == []
        assert state.stat().st_mode & 0o777 == 0o700
        assert (state / ".toolkeeper-state").is_file()
        assert not (project / ".toolkeeper").exists()
    finally:
        _stop(proc)


async def test_no_tool_reads_another_servers_state_kept_in_the_workspace(
        reachable: Path, agent_env: dict[str, str]) -> None:  # noqa: F811
    """A desktop entry's workspace is a project folder; another server keeps its state in that
    folder (as make run did, in .toolkeeper/). The agent tries every tool on that state: the
    operator token would let it approve its own calls there."""
    project = reachable / "project"
    project.mkdir()
    (project / "canary.txt").write_text("canary-7f3\n")
    (project / "toolkeeper.toml").write_text("[codemode]\nenabled = true\nworkspace = \"read\"\n")
    hand_over(reachable)
    proc = _serve(project, "--config", str(project / "toolkeeper.toml"), "--workspace",
                  str(project), env=agent_env)
    url = _started(proc)[0].split()[3]  # serving: it found no state in its workspace
    neighbour = project / ".toolkeeper"  # the other server starts later, its state here
    other = _serve(reachable, "--no-builtins", "--state-dir", str(neighbour), env=agent_env)
    try:
        _started(other)
        state = Path(agent_env["HOME"]) / ".local" / "state" / "toolkeeper"
        _remember(url, state)
        secrets = [(neighbour / n).read_text().strip() for n in ("token", "client-token")]
        attempts: list[tuple[str, dict[str, object]]] = [
            ("file_read", {"path": f".toolkeeper/{n}"})
            for n in ("token", "client-token", "server.json", "toolkeeper.db")]
        attempts += [("glob_search", {"pattern": "**/*token*"}),
                     ("glob_search", {"pattern": "*", "path": ".toolkeeper"}),
                     ("content_search", {"pattern": "tkc_"}),
                     ("content_search", {"pattern": secrets[0][:12]}),
                     ("shell", {"command": "cat .toolkeeper/token .toolkeeper/client-token"}),
                     ("tool_chain", {"code": "import os\nd = os.path.join(WORKSPACE, "
                                     "'.toolkeeper')\nprint([open(os.path.join(d, n)).read() "
                                     "for n in os.listdir(d)])"})]
        said = await _answers(url, (state / "token").read_text().strip(), attempts)
        leaked = [f"{tool} {arguments}: {text[:200]}" for (tool, arguments), text
                  in zip(attempts, said, strict=True) if any(s in text for s in secrets)]
        listed = [text for (tool, _), text in zip(attempts, said, strict=True)
                  if tool == "glob_search" and ".toolkeeper/" in text]
        assert leaked == [] and listed == []
        assert "toolkeeper_state" in said[0]  # the refusal names the rule
    finally:
        _stop(other)
        _stop(proc)


async def _answers(url: str, operator: str, attempts: list[tuple[str, dict[str, object]]]
                   ) -> list[str]:
    """Each call's text, approved by the operator when it asks (as a person would)."""
    said = []
    async with _client(url) as client:
        for tool, arguments in attempts:
            for _ in range(2):
                result = await client.call_tool(tool, arguments)
                text = " ".join(getattr(c, "text", "") for c in result.content)
                if "waiting for approval (request " not in text:
                    break
                request_id = text.split("(request ")[1].split(")")[0]
                assert _decide(url, request_id, {"Authorization": f"Bearer {operator}"}
                               ).status_code == 200
            said.append(text)
    return said


@pytest.mark.parametrize("layout", ["holds", "inside", "is"])
def test_a_workspace_holding_any_state_folder_is_refused_in_one_line_naming_it(
        tmp_path: Path, agent_env: dict[str, str], layout: str) -> None:
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    neighbour = project / "sub" / ".toolkeeper"  # another server's, made as serve makes it
    started = subprocess.run(
        [sys.executable, "-c", "import sys; from pathlib import Path; "
         "from toolkeeper.cli.state import secure_state_dir; "
         "from toolkeeper.server.tokens import operator_token; "
         "secure_state_dir(Path(sys.argv[1])); operator_token(Path(sys.argv[1]))",
         str(neighbour)], capture_output=True, text=True, timeout=60, env=agent_env, check=True)
    assert started.returncode == 0
    workspace = {"holds": project, "inside": neighbour / "workspace", "is": neighbour}[layout]
    workspace.mkdir(exist_ok=True)
    proc = _serve(tmp_path, "--workspace", str(workspace), "--state-dir",
                  str(tmp_path / "own-state"), env=agent_env)
    assert proc.stdout is not None and proc.stderr is not None
    ready = readable([proc.stdout], 60)
    first = proc.stdout.readline() if ready else ""
    if first.startswith("toolkeeper serving on "):
        _stop(proc)
        pytest.fail(f"serve started on a workspace holding state: {first!r}")
    assert proc.wait(timeout=60) == 2
    stderr = proc.stderr.read()
    assert "Traceback" not in stderr and stderr.count("\n") == 1, stderr
    assert str(neighbour) in stderr and "toolkeeper state" in stderr
    assert "--workspace DIR, or [security] workspace in the config" in stderr, stderr


@pytest.mark.parametrize("layout", ["state in workspace", "state is workspace", "config's",
                                    "state in the current directory"])
def test_a_state_dir_a_tool_could_reach_is_refused_in_one_line_saying_how_to_move_it(
        tmp_path: Path, agent_env: dict[str, str], layout: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    args = {"state in workspace": ["--workspace", str(ws), "--state-dir", str(ws / ".tk")],
            "state is workspace": ["--workspace", str(ws), "--state-dir", str(ws)],
            "config's": ["--config", str(ws / "toolkeeper.toml"), "--state-dir",
                         str(ws / "state")],
            "state in the current directory": ["--state-dir", "state"]}[layout]
    (ws / "toolkeeper.toml").write_text("[security]\nautonomy = 'read_only'\n")
    result = subprocess.run([sys.executable, "-m", "toolkeeper.cli", "serve", "--port", "0",
                             *args], capture_output=True, text=True, timeout=60, env=agent_env,
                            cwd=tmp_path, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and "tools could read its tokens" in result.stderr
    assert "--state-dir DIR keeps the state elsewhere" in result.stderr, result.stderr
    assert "--workspace DIR gives the tools another workspace" in result.stderr, result.stderr
    assert not (ws / ".tk").exists() and not (ws / "state").exists()
    assert not (tmp_path / "state").exists()


def test_the_workspace_flag_wins_over_the_config_and_the_start_lines_say_so(
        tmp_path: Path, agent_env: dict[str, str]) -> None:
    (tmp_path / "from-config").mkdir()
    (tmp_path / "from-flag").mkdir()
    config = tmp_path / "toolkeeper.toml"
    config.write_text("[security]\nworkspace = 'from-config'\nautonomy = 'read_only'\n")
    proc = _serve(tmp_path, "--config", str(config), "--workspace", str(tmp_path / "from-flag"),
                  "--state-dir", str(tmp_path / "state"), env=agent_env)
    try:
        lines = _started(proc)
        assert f"workspace: {tmp_path / 'from-flag'} (from --workspace)" in lines[3]
    finally:
        _stop(proc)


@pytest.mark.parametrize("option", ["--port", "--metrics-port"])
def test_a_port_in_use_is_one_line_naming_its_option(option: str, tmp_path: Path,
                                                     agent_env: dict[str, str]) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        ports = ["--port", str(port)] if option == "--port" else [
            "--port", "0", "--metrics-port", str(port)]
        result = subprocess.run(
            [sys.executable, "-m", "toolkeeper.cli", "serve", EXAMPLE, "--no-builtins",
             *ports, "--state-dir", str(tmp_path / "s")],
            capture_output=True, text=True, timeout=60, env=agent_env, check=False)
    assert result.returncode == 2
    assert result.stderr.strip() == (f"error: port {port} ({option}) is in use; pass {option} "
                                     f"N, or {option} 0 for a free one")


SCRIPT = """
import os
seen = []
for path in PATHS:
    try:
        with open(path) as f:
            seen.append(f.read())
    except OSError as exc:
        seen.append(type(exc).__name__)
for root in (WORKSPACE, os.path.dirname(WORKSPACE), "/"):
    try:
        seen.append(" ".join(os.listdir(root)))
    except OSError as exc:
        seen.append(type(exc).__name__)
print(seen)
"""


async def test_a_code_mode_script_reads_no_credential(
        reachable: Path, agent_env: dict[str, str]) -> None:  # noqa: F811
    project = reachable / "project"
    project.mkdir()
    (project / "canary.txt").write_text("canary-7f3\n")
    (project / "toolkeeper.toml").write_text(
        "[codemode]\nenabled = true\nworkspace = \"read\"\n")
    hand_over(reachable)
    proc = _serve(project, "--config", str(project / "toolkeeper.toml"), env=agent_env)
    try:
        url = _started(proc)[0].split()[3]
        state = Path(agent_env["HOME"]) / ".local" / "state" / "toolkeeper"
        _remember(url, state)
        secrets = [(state / n).read_text().strip() for n in ("token", "client-token")]
        paths = [str(state / "token"), str(state / "client-token"), str(project / "canary.txt"),
                 str(project / "toolkeeper.toml")]
        async with _client(url) as client:
            ran = await client.call_tool("tool_chain", {
                "code": f"PATHS = {paths!r}\n" + SCRIPT})
        text = ran.content[0].text  # type: ignore[union-attr]
        assert "canary-7f3" in text, text  # the script does read its workspace …
        assert not any(s in text for s in secrets)  # … and no credential
        assert "[codemode]" not in text  # nor the config (a protected path), hidden
    finally:
        _stop(proc)


async def test_a_call_whose_client_gave_up_loses_nothing_and_runs_once(tmp_path: Path) -> None:
    import anyio

    proc, url = _start(tmp_path, "--approval-wait", "20")
    operator = {"Authorization": f"Bearer {TOKEN}"}
    agent = {**ACCEPT, "Authorization": f"Bearer {CLIENT_TOKENS[url]}"}
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "broadcast_alert", "arguments": ALERT}}
    try:
        # A client that stops listening but keeps its connection (one SDK does this after its
        # own 5 s timeout): the server cannot tell, and still waits for a decision.
        async with httpx.AsyncClient(timeout=60) as raw, anyio.create_task_group() as group:
            group.start_soon(lambda: raw.post(f"{url}/mcp", json=body, headers=agent))
            with anyio.fail_after(20):
                while not (listed := httpx.get(f"{url}/api/approvals?state=pending",
                                               headers=operator).json()["approvals"]):
                    await anyio.sleep(0.1)
            assert _decide(url, listed[0]["id"], operator).status_code == 200
            with anyio.fail_after(20):  # the waiting call takes it and runs, for nobody
                while httpx.get(f"{url}/api/approvals/{listed[0]['id']}",
                                headers=operator).json()["state"] != "done":
                    await anyio.sleep(0.1)
        async with _client(url) as client:
            told = await client.call_tool("broadcast_alert", ALERT)  # made again
            asks = await client.call_tool("broadcast_alert", ALERT)  # and once more
    finally:
        _stop(proc)
    text = told.content[0].text  # type: ignore[union-attr]
    assert not told.is_error and "PT-11" in text and listed[0]["id"] in text
    assert "does not run twice" in text
    assert asks.is_error and "waiting for approval" in asks.content[0].text  # type: ignore[union-attr]
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        rows = db.execute("SELECT decision, approver, approval_id FROM audit WHERE tool = "
                          "'broadcast_alert' AND status = 'ok' ORDER BY rowid").fetchall()
    # one approved run (who approved it, which request), then its answer told again
    assert rows == [("approved", "operator:operator", listed[0]["id"]),
                    (TOLD_AGAIN, None, listed[0]["id"])]
