"""The ``toolkeeper`` command: schema and check, with helpful errors and exit codes."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from toolkeeper.cli.main import app

from .command import toolkeeper

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "weather.py")
runner = CliRunner()


def test_schema_of_one_object_prints_its_declaration() -> None:
    result = runner.invoke(app, ["schema", f"{EXAMPLE}:get_forecast", "--format", "anthropic"])
    assert result.exit_code == 0, result.output
    declaration = json.loads(result.stdout)
    assert declaration["name"] == "get_forecast"
    assert declaration["input_schema"]["properties"]["units"]["enum"] == ["metric", "imperial"]


def test_schema_of_a_module_prints_the_tools_parameter() -> None:
    result = runner.invoke(app, ["schema", EXAMPLE, "-f", "gemini"])
    assert result.exit_code == 0, result.output
    (tool_entry,) = json.loads(result.stdout)
    names = [d["name"] for d in tool_entry["functionDeclarations"]]
    assert names == ["get_forecast", "broadcast_alert"]


def test_schema_strict_for_openai() -> None:
    result = runner.invoke(app, ["schema", f"{EXAMPLE}:broadcast_alert", "-f", "openai", "--strict"])
    assert result.exit_code == 0, result.output
    function = json.loads(result.stdout)["function"]
    assert function["strict"] is True
    assert function["parameters"]["additionalProperties"] is False


def test_schema_loads_a_module_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mytools.py").write_text(
        "def ping(host: str) -> str:\n    '''Ping a host.'''\n    return host\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    result = runner.invoke(app, ["schema", "mytools:ping", "-f", "mcp"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["inputSchema"]["required"] == ["host"]


def test_check_passes_clean_tools_and_lists_notes_on_request() -> None:
    result = runner.invoke(app, ["check", EXAMPLE, "--info"])
    assert result.exit_code == 0, result.output
    assert "2 tool(s), 6 format(s): 0 error(s), 0 warning(s)" in result.stdout


def test_check_fails_when_a_format_loses_meaning(tmp_path: Path) -> None:
    source = tmp_path / "maps.py"
    source.write_text(
        "from toolkeeper import tool\n\n@tool\ndef tally(counts: dict[str, int]) -> int:\n"
        "    '''Sum counts.'''\n    return sum(counts.values())\n"
    )
    result = runner.invoke(app, ["check", str(source), "--format", "gemini"])
    assert result.exit_code == 1
    assert "warning" in result.stdout and "additionalProperties" in result.stdout
    strict = runner.invoke(app, ["check", str(source), "-f", "openai-chat", "--strict",
                                 "--fail-on", "error"])
    assert strict.exit_code == 1
    assert "strict mode is not possible" in strict.stdout


def test_check_strict_names_a_free_form_argument_and_the_fix(tmp_path: Path) -> None:
    source = tmp_path / "devices.py"
    source.write_text(
        "from toolkeeper import Tool\n\n"
        "configure = Tool(name='configure', description='Configure a device.',\n"
        "    callable=lambda name, options=None: name,\n"
        "    parameters={'type': 'object', 'required': ['name'], 'properties': {\n"
        "        'name': {'type': 'string'}, 'options': {'type': 'object'}}})\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "toolkeeper.cli", "check", f"{source}:configure", "-f",
         "openai-chat", "--strict", "--fail-on", "error"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "400"})
    assert result.returncode == 1, result.stdout + result.stderr
    line = " ".join(result.stdout.split())
    assert "parameters.options is a free-form object" in line
    assert "declare its keys" in line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["schema", "no_such_module_xyz:obj"], "cannot import module 'no_such_module_xyz'"),
        (["schema", f"{EXAMPLE}:missing"], "has no attribute 'missing'"),
        (["schema", f"{EXAMPLE}:Units"], "not a tool"),
        (["schema", EXAMPLE, "-f", "cobol"], "unknown API format 'cobol'"),
        (["check", "nofile.py"], "no such file"),
    ],
)
def test_bad_targets_give_a_clear_error_and_exit_2(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_console_script_runs_as_a_real_process() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "toolkeeper", "schema", f"{EXAMPLE}:get_forecast", "-f", "mcp"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["outputSchema"]["properties"]["city"] == {"type": "string"}


def _user_module(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_syntax_error_in_the_users_module_is_one_line_with_file_and_line(tmp_path: Path) -> None:
    target = _user_module(tmp_path, "broken.py", "from toolkeeper import tool\n\n"
                                                 "def f(x:\n    return x\n")
    result = subprocess.run([sys.executable, "-m", "toolkeeper.cli", "schema", target],
                            capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {target}:3: syntax error: '(' was never closed"]
    assert "Traceback" not in result.stderr


def test_an_error_raised_while_importing_names_the_users_line(tmp_path: Path) -> None:
    target = _user_module(tmp_path, "raises.py", "import json\n\nCONFIG = json.loads('{')\n")
    result = subprocess.run([sys.executable, "-m", "toolkeeper.cli", "schema", target],
                            capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {target}:3: JSONDecodeError: ") and "--debug" in line
    debug = subprocess.run([sys.executable, "-m", "toolkeeper.cli", "--debug", "schema", target],
                           capture_output=True, text=True, check=False, timeout=60)
    assert debug.returncode == 2 and "Traceback (most recent call last)" in debug.stderr


def test_tools_search_without_a_hit_says_so_and_why() -> None:
    result = runner.invoke(app, ["tools", "search", EXAMPLE, "zebra"], env={"COLUMNS": "300"})
    assert result.exit_code == 0
    assert "no tool matches 'zebra'" in result.stdout
    off = runner.invoke(app, ["tools", "search", EXAMPLE, "zebra"],
                        env={"COLUMNS": "300", "TOOLKEEPER_SEMANTIC_SEARCH": "off"})
    assert "ranked by words only: TOOLKEEPER_SEMANTIC_SEARCH turns semantic search off" in (
        " ".join(off.stdout.split()))


@pytest.mark.parametrize("semantic", ["on", "off"])
def test_the_readme_search_for_a_storm_warning_finds_the_alert_tool(
        semantic: str, tmp_path: Path) -> None:
    """`toolkeeper tools search examples/weather.py "storm warning"`, as the README shows it:
    the alert tool comes first, by meaning with the semantic extra, by words without it."""
    env = {**os.environ, "TOOLKEEPER_CACHE_DIR": str(tmp_path), "COLUMNS": "200",
           "TOOLKEEPER_SEMANTIC_SEARCH": semantic}
    done = subprocess.run([sys.executable, "-m", "toolkeeper.cli", "tools", "search", EXAMPLE,
                           "storm warning"], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.lstrip("│ ").startswith("1 ")]
    assert rows and "broadcast_alert" in rows[0], done.stdout
    assert ("semantic" in rows[0]) == (semantic == "on"), done.stdout


def _commands_panel(help_text: str) -> list[tuple[str, str]]:
    """The rows of ``--help``'s Commands panel: (name, summary); a row that continues the one
    before has no name."""
    lines = help_text.splitlines()
    start = next(i for i, line in enumerate(lines) if "─ Commands ─" in line)
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("╰"):
            break
        inner = line.strip("│ ")
        name, _, rest = inner.partition(" ")
        rows.append((name if line.startswith("│ ") and not line.startswith("│  ") else "",
                     rest.strip()))
    return rows


def test_help_lists_every_registered_command_with_its_one_line_summary() -> None:
    done = toolkeeper("--help", columns=80)
    assert done.returncode == 0, done.stderr
    rows = _commands_panel(done.stdout)
    registered = [(c.name or getattr(c.callback, "__name__", ""), c.short_help)
                  for c in app.registered_commands] + [
        (g.name, g.short_help) for g in app.registered_groups]
    assert all(name for name, _ in rows), f"a summary takes more than one line:\n{done.stdout}"
    assert rows == registered, done.stdout
    assert all(summary and summary.endswith(".") for _, summary in rows), rows


def test_tokens_list_before_any_serve_says_so_and_makes_no_state(tmp_path: Path) -> None:
    state = tmp_path / "never-served"
    done = toolkeeper("tokens", "list", "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("no client tokens yet: ") and "┃" not in done.stdout
    assert not state.exists()  # listing made nothing: a state dir is serve's to make


def _commands(command: object, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    """Every command and group of the CLI with the words that reach it."""
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        found += _commands(sub, (*path, name))
    return found


def test_help_shows_config_tables_in_brackets_as_written() -> None:
    """Help names config tables (``[security]``, ``[[mcp.servers]]``): they are shown as
    written, not read as terminal markup and dropped."""
    shown = []
    for path, command in _commands(get_command(app)):
        texts = [getattr(command, "help", None) or ""]
        texts += [getattr(p, "help", None) or "" for p in getattr(command, "params", [])]
        written = " ".join(texts).replace("\\[", "[")  # rich's escape of a bracket
        tables = set(re.findall(r"\[\[?[\w.]+\]\]?", written))
        if not tables:
            continue
        done = toolkeeper(*path, "--help", columns=400)
        assert done.returncode == 0, done.stderr
        missing = {t for t in tables if t not in done.stdout}
        assert not missing, f"toolkeeper {' '.join(path)} --help drops {missing}:\n{done.stdout}"
        shown.append(path)
    assert ("serve",) in shown and ("policy", "show") in shown, shown


@pytest.mark.parametrize("command", [("tokens", "list"), ("audit",),
                                     ("serve", EXAMPLE, "--no-builtins", "--port", "0")])
def test_a_store_nobody_answers_at_is_one_line(command: tuple[str, ...], tmp_path: Path) -> None:
    """A ``--store`` URL where no PostgreSQL listens: one line naming the store and what to
    check — no traceback, no log line of each retry of a connection pool."""
    with socket.socket() as closed:  # bound, never listening: a connection to it is refused
        closed.bind(("127.0.0.1", 0))
        url = f"postgresql://nobody@127.0.0.1:{closed.getsockname()[1]}/toolkeeper"
        done = toolkeeper(*command, "--store", url, "--state-dir", str(tmp_path / "state"),
                          cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: cannot connect to the PostgreSQL store at {url}: "), lines
    assert "check the URL" in lines[0], lines


@pytest.mark.parametrize(("config", "expected"), [
    ("[server]\nbogus = 1\n", "bad.toml:2: server.bogus: unknown key ([server] accepts: oauth, "),
    ("[servr]\nport = 1\n", "bad.toml:1: servr: unknown key; did you mean [server]? (the top "
                            "level accepts: locale, "),
])
@pytest.mark.parametrize("command", [("serve",), ("tools", "explain")])
def test_a_bad_config_key_is_one_line_naming_the_file_the_key_and_the_keys_there_are(
        tmp_path: Path, config: str, expected: str, command: tuple[str, ...]) -> None:
    (tmp_path / "bad.toml").write_text(config)
    result = toolkeeper(*command, "--config", "bad.toml", cwd=tmp_path, columns=400)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("error: invalid configuration: " + expected), result.stderr


@pytest.mark.parametrize(("args", "expected"), [
    (("audit", "--limit", "-1"), "--limit must be a number of rows from 1 to 100000 (got -1)"),
    (("audit", "--limit", "0"), "--limit must be a number of rows from 1 to 100000 (got 0)"),
    (("tools", "search", "tools.py", "add", "--limit", "0"),
     "--limit must be a number of tools from 1 to 1000 (got 0)"),
    (("upstream", "login", "docs", "--timeout", "-1"),
     "--timeout must be a number of seconds from 1 to 86400 (got -1)"),
])
def test_a_count_or_duration_out_of_range_is_refused_in_one_line(
        tmp_path: Path, args: tuple[str, ...], expected: str) -> None:
    (tmp_path / "tools.py").write_text("from toolkeeper import tool\n\n@tool\n"
                                       "def add(a: int) -> int:\n    return a\n")
    state = () if args[0] == "tools" else ("--state-dir", str(tmp_path / "state"))
    result = toolkeeper(*args, *state, cwd=tmp_path, columns=400)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.strip() == f"error: {expected}"
