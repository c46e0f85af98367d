"""``toolkeeper install claude-desktop|cursor|vscode``: the config each client reads, merged into
what is there, with absolute paths — and a server launched exactly as that config says answers
the official MCP client."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from typer.testing import CliRunner, Result

from toolkeeper.cli.install_cmd import config_file, launcher
from toolkeeper.cli.main import app
from toolkeeper.server.clients import ClientTokens
from toolkeeper.server.tokens import operator_token

ROOT = Path(__file__).resolve().parents[2]
WEATHER = ROOT / "examples" / "weather.py"
runner = CliRunner()

# client kind → (the key of its servers, the fields of a stdio entry)
SHAPES = {
    "claude-desktop": ("mcpServers", {"command", "args", "env"}),
    "cursor": ("mcpServers", {"command", "args", "env"}),
    "vscode": ("servers", {"type", "command", "args", "env"}),
}


def _install(*args: str) -> Result:
    return runner.invoke(app, ["install", *args], env={"COLUMNS": "300"})


def _one_line_error(result: Result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder with tools in it, as the current directory."""
    project = tmp_path / "project"
    (project / "tools").mkdir(parents=True)
    shutil.copy(WEATHER, project / "tools" / "weather.py")
    monkeypatch.chdir(project)
    return project


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_each_client_gets_its_own_shape_with_absolute_paths(kind: str, here: Path) -> None:
    result = _install(kind, "tools/weather.py:get_forecast", "--config-path", "out/mcp.json",
                      "--env", "WEATHER_UNITS=metric")
    assert result.exit_code == 0, result.output
    key, fields = SHAPES[kind]
    written = json.loads((here / "out" / "mcp.json").read_text())
    entry = written[key]["toolkeeper"]
    assert set(entry) == fields and entry.get("type", "stdio") == "stdio"
    assert [entry["command"], *entry["args"]] == [
        *launcher(), "serve", "--stdio", "--workspace", str(here),
        f"{here / 'tools' / 'weather.py'}:get_forecast"]
    assert Path(entry["command"]).is_absolute() and os.access(entry["command"], os.X_OK)
    assert entry["env"] == {"WEATHER_UNITS": "metric"}
    assert str(here / "out" / "mcp.json") in result.stdout


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_other_servers_and_keys_are_kept_and_only_ours_is_replaced(kind: str, here: Path
                                                                   ) -> None:
    key, _ = SHAPES[kind]
    path = here / "mcp.json"
    theirs = {"command": "npx", "args": ["-y", "other-server"]}
    path.write_text(json.dumps({"inputs": [], key: {"other": theirs, "tk": {"command": "old"}}}))
    result = _install(kind, "tools/weather.py", "--name", "tk", "--no-builtins",
                      "--config-path", str(path))
    assert result.exit_code == 0, result.output
    written = json.loads(path.read_text())
    assert written["inputs"] == [] and written[key]["other"] == theirs
    ours = written[key]["tk"]
    assert [ours["command"], *ours["args"]] == [*launcher(), "serve", "--stdio", "--no-builtins",
                                                str(here / "tools" / "weather.py")]


def test_options_passed_to_serve_are_made_absolute(here: Path) -> None:
    (here / "toolkeeper.toml").write_text("")
    (here / "ws").mkdir()
    result = _install("cursor", "json", "--config", "toolkeeper.toml", "--workspace", "ws",
                      "--state-dir", "state", "--print")
    assert result.exit_code == 0, result.output
    args = json.loads(result.stdout)["mcpServers"]["toolkeeper"]["args"]
    assert args == ["serve", "--stdio", "--config", str(here / "toolkeeper.toml"),
                    "--workspace", str(here / "ws"), "--state-dir", str(here / "state"),
                    "json"]  # a module importable here stays a module name


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_print_shows_the_entry_and_writes_nothing(kind: str, here: Path) -> None:
    result = _install(kind, "tools/weather.py", "--print", "--config-path", "mcp.json")
    assert result.exit_code == 0, result.output
    key, _ = SHAPES[kind]
    assert list(json.loads(result.stdout)[key]) == ["toolkeeper"]
    assert sorted(p.name for p in here.iterdir()) == ["tools"]


def test_a_file_that_is_not_json_is_refused_in_one_line_and_left_alone(here: Path) -> None:
    path = here / "mcp.json"
    broken = '{"servers": {"mine": {"command": "x"}}, // a comment\n}'
    path.write_text(broken)
    result = _install("vscode", "tools/weather.py", "--config-path", str(path))
    _one_line_error(result, str(path), "not valid JSON", "--print")
    assert path.read_text() == broken
    assert sorted(p.name for p in here.iterdir()) == ["mcp.json", "tools"]  # no temp file left


def test_a_file_whose_servers_are_not_an_object_is_refused(here: Path) -> None:
    path = here / "mcp.json"
    path.write_text('{"mcpServers": ["x"]}')
    _one_line_error(_install("cursor", "--config-path", str(path)), "'mcpServers' object")
    assert path.read_text() == '{"mcpServers": ["x"]}'


def test_a_config_reached_through_a_symlink_is_refused_and_left_alone(here: Path) -> None:
    """A cloned repository's ``.vscode`` (or its ``mcp.json``) may be a symlink to the user's
    global settings or to another program's JSON: a project install never writes through it."""
    other = here.parent / "other-program"
    other.mkdir()
    (other / "settings.json").write_text('{"theirs": 1}')
    (here / ".vscode").symlink_to(other)
    result = _install("vscode", "tools/weather.py")
    _one_line_error(result, str(here / ".vscode"), "symbolic link")
    assert json.loads((other / "settings.json").read_text()) == {"theirs": 1}
    assert not (other / "mcp.json").exists()
    (here / ".vscode").unlink()
    (here / ".vscode").mkdir()
    (here / ".vscode" / "mcp.json").symlink_to(other / "settings.json")
    _one_line_error(_install("vscode", "tools/weather.py"), "mcp.json", "symbolic link")
    (here / "link.json").symlink_to(other / "settings.json")
    _one_line_error(_install("cursor", "--config-path", "link.json"), "symbolic link")
    assert json.loads((other / "settings.json").read_text()) == {"theirs": 1}


def _server_store(tmp_path: Path, *, name: str = "state") -> tuple[Path, str]:
    """A server's state dir as ``toolkeeper serve`` leaves it: a store and an operator token."""
    state = tmp_path / name
    state.mkdir(mode=0o700, parents=True)
    ClientTokens(state / "toolkeeper.db")
    token, _ = operator_token(state)
    return state, token


@pytest.mark.parametrize(("kind", "typed"), [("cursor", False), ("vscode", True)])
def test_http_carries_a_new_client_token_the_store_knows_never_the_operators(
        kind: str, typed: bool, here: Path, tmp_path: Path) -> None:
    state, operator = _server_store(tmp_path)
    path = here / "mcp.json"
    result = _install(kind, "--http", "http://127.0.0.1:8765/", "--state-dir", str(state),
                      "--config-path", str(path))
    assert result.exit_code == 0, result.output
    text = path.read_text()
    key, _ = SHAPES[kind]
    entry = json.loads(text)[key]["toolkeeper"]
    assert entry.pop("type", None) == ("http" if typed else None)
    assert entry["url"] == "http://127.0.0.1:8765/mcp"
    scheme, token = entry["headers"]["Authorization"].split(" ")
    assert scheme == "Bearer" and ClientTokens(state / "toolkeeper.db").client_for(token) == kind
    assert operator not in text and operator not in result.output
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_http_print_mints_a_token_for_the_named_client_and_writes_nothing(
        here: Path, tmp_path: Path) -> None:
    state, operator = _server_store(tmp_path)
    result = _install("cursor", "--http", "https://tk.example/base/mcp", "--client-name",
                      "laptop", "--state-dir", str(state), "--print")
    assert result.exit_code == 0, result.output
    entry = json.loads(result.stdout)["mcpServers"]["toolkeeper"]
    assert entry["url"] == "https://tk.example/base/mcp"
    token = entry["headers"]["Authorization"].removeprefix("Bearer ")
    assert ClientTokens(state / "toolkeeper.db").client_for(token) == "laptop"
    assert operator not in result.output
    assert sorted(p.name for p in here.iterdir()) == ["tools"]


def test_a_broken_file_is_refused_before_any_token_is_made(here: Path, tmp_path: Path) -> None:
    state, _ = _server_store(tmp_path)
    (here / "mcp.json").write_text("{")
    result = _install("cursor", "--http", "http://127.0.0.1:8765", "--state-dir", str(state),
                      "--config-path", "mcp.json")
    _one_line_error(result, "not valid JSON")
    assert ClientTokens(state / "toolkeeper.db").list() == []


def test_a_client_name_that_has_a_token_is_refused_with_what_to_do(here: Path,
                                                                   tmp_path: Path) -> None:
    state, _ = _server_store(tmp_path)
    ClientTokens(state / "toolkeeper.db").add("cursor")
    result = _install("cursor", "--http", "http://127.0.0.1:8765", "--state-dir", str(state),
                      "--print")
    _one_line_error(result, "already has a token", "--client-name", "tokens revoke cursor")


def test_http_without_the_servers_state_says_which_to_pass(here: Path) -> None:
    result = _install("cursor", "--http", "http://127.0.0.1:8765", "--state-dir", "nowhere",
                      "--print")
    _one_line_error(result, "--state-dir")
    assert not (here / "nowhere").exists()


@pytest.mark.parametrize(("args", "words"), [
    (["claude-desktop", "--http", "http://127.0.0.1:8765"], ["Claude Desktop", "stdio"]),
    (["claude-desktop", "--project", "."], ["--project"]),
    (["cursor", "--http", "ftp://host"], ["--http"]),
    (["cursor", "missing.py"], ["no such file: missing.py"]),
    (["cursor", "no_such_module_here.tools"], ["no_such_module_here.tools"]),
    (["cursor", "--env", "NOEQUALS"], ["--env", "KEY=VALUE"]),
    (["cursor", "--env", "1X=y"], ["--env"]),
    (["cursor", "--config", "missing.toml"], ["--config", "missing.toml"]),
    (["cursor", "--workspace", "missing"], ["--workspace", "missing"]),
    (["cursor", "--name", ""], ["--name"]),
])
def test_mistakes_are_one_line_and_exit_2(args: list[str], words: list[str], here: Path) -> None:
    _one_line_error(_install(*args, "--config-path", "mcp.json"), *words)
    assert not (here / "mcp.json").exists()


def test_each_client_reads_its_own_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolkeeper.cli.install_cmd import ClientKind

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    claude = config_file(ClientKind.CLAUDE_DESKTOP, None)
    assert claude.name == "claude_desktop_config.json" and claude.parent.name == "Claude"
    assert config_file(ClientKind.CURSOR, None) == tmp_path / ".cursor" / "mcp.json"
    assert config_file(ClientKind.CURSOR, tmp_path / "p") == tmp_path / "p" / ".cursor" / "mcp.json"
    assert config_file(ClientKind.VSCODE, None) == tmp_path / ".vscode" / "mcp.json"
    assert config_file(ClientKind.VSCODE, tmp_path / "p") == tmp_path / "p" / ".vscode" / "mcp.json"


async def test_a_server_launched_exactly_as_the_config_says_serves_the_tools(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key one: the file ``install`` wrote, launched as a desktop client launches it — its
    command, args and env, from '/' — answers the official MCP client over stdio; the state
    goes to the per-user state dir, nothing to the working directory."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(WEATHER, project / "weather.py")
    monkeypatch.chdir(project)
    path = tmp_path / "claude" / "claude_desktop_config.json"
    result = _install("claude-desktop", "weather.py", "--env", "WEATHER_UNITS=metric",
                      "--config-path", str(path))
    assert result.exit_code == 0, result.output
    entry = json.loads(path.read_text())["mcpServers"]["toolkeeper"]
    home, xdg = tmp_path / "home", tmp_path / "xdg-state"
    home.mkdir()
    # What the desktop client adds of its own: the user's HOME and XDG dirs.
    env: dict[str, Any] = {**entry["env"], "HOME": str(home), "XDG_STATE_HOME": str(xdg)}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env,
                                   cwd="/")
    root_before = sorted(os.listdir("/"))
    with anyio.fail_after(60):
        async with Client(params) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            forecast = await client.call_tool("get_forecast", {"city": "Lisbon", "days": 2})
    assert {"get_forecast", "broadcast_alert", "file_read"} <= set(names)
    assert not forecast.is_error
    assert forecast.structured_content == {"city": "Lisbon", "temperature": 21.5,
                                           "summary": "sunny for 2 day(s)"}
    state = xdg / "toolkeeper"
    assert (state / "toolkeeper.db").is_file()
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert sorted(os.listdir("/")) == root_before  # nothing in the client's working directory
    assert list(home.iterdir()) == []
    assert {p.name for p in project.iterdir()} <= {"weather.py", "__pycache__"}


def test_a_workspace_holding_the_servers_state_dir_is_refused_at_install(
        here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """serve would refuse it at every launch, where only the client's log says so."""
    monkeypatch.setenv("XDG_STATE_HOME", str(here / "state"))
    result = _install("cursor", "tools/weather.py", "--config-path", "mcp.json")
    _one_line_error(result, str(here / "state" / "toolkeeper"), "workspace")
    assert not (here / "mcp.json").exists()
    elsewhere = here.parent / "elsewhere"
    assert _install("cursor", "tools/weather.py", "--state-dir", str(elsewhere),
                    "--config-path", "mcp.json").exit_code == 0


def test_a_workspace_holding_another_servers_state_is_refused_at_install_naming_it(
        here: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The project folder holds another server's state (make run kept it in .toolkeeper/):
    the desktop entry's tools would read its operator token."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))  # serve's own: elsewhere
    _server_store(here, name=".toolkeeper")
    claude = tmp_path / "claude" / "claude_desktop_config.json"
    result = _install("claude-desktop", "tools/weather.py", "--config-path", str(claude))
    _one_line_error(result, str(here / ".toolkeeper"), "toolkeeper state")
    assert not claude.exists()
    inside = here / ".toolkeeper" / "ws"
    inside.mkdir()
    _one_line_error(_install("claude-desktop", "tools/weather.py", "--workspace", str(inside),
                             "--config-path", str(claude)), str(here / ".toolkeeper"))


def test_http_makes_the_token_in_serves_own_default_state_dir(
        here: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    state, _ = _server_store(tmp_path / "xdg", name="toolkeeper")
    result = _install("vscode", "--http", "http://127.0.0.1:8765", "--print")
    assert result.exit_code == 0, result.output
    header = json.loads(result.stdout)["servers"]["toolkeeper"]["headers"]["Authorization"]
    assert ClientTokens(state / "toolkeeper.db").client_for(header.split()[1]) == "vscode"
