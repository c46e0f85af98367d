"""``toolkeeper tools list|show|search|browse`` over a toolbox given by a module path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolkeeper.cli.main import app
from toolkeeper.gateway.pins import SqlitePins

from .command import toolkeeper

runner = CliRunner()
MODULE = '''
from toolkeeper import tool
from toolkeeper.toolbox import Toolbox

@tool(category="communication", tags={"email"})
def send_email(to: str) -> str:
    """Send an email to someone."""
    return to

@tool(category="data/visualization")
def plot(values: list[float]) -> str:
    """Plot a chart."""
    return "ok"

box = Toolbox([send_email, plot])
box.disable("plot", reason="renderer offline")
'''


def module(tmp_path: Path) -> str:
    path = tmp_path / "catalog_mod.py"
    path.write_text(MODULE)
    return f"{path}:box"


def test_list_shows_status_and_reason(tmp_path: Path) -> None:
    result = runner.invoke(app, ["tools", "list", module(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "send_email" in result.stdout and "communication" in result.stdout
    assert "disabled: renderer offline" in result.stdout


def test_search_ranks_with_signals(tmp_path: Path) -> None:
    result = runner.invoke(app, ["tools", "search", module(tmp_path), "email someone"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "send_email" in result.stdout and "bm25" in result.stdout


def test_show_prints_the_declaration_and_unknown_names_fail(tmp_path: Path) -> None:
    result = runner.invoke(app, ["tools", "show", module(tmp_path), "send_email", "-f", "mcp"])
    assert result.exit_code == 0, result.output
    assert '"inputSchema"' in result.stdout
    missing = runner.invoke(app, ["tools", "show", module(tmp_path), "send_emale"])
    assert missing.exit_code == 2
    assert "did you mean 'send_email'" in missing.stderr


def test_show_of_an_unknown_name_lists_the_tools_there_are(tmp_path: Path) -> None:
    target = module(tmp_path)
    result = toolkeeper("tools", "show", target, "nope", columns=400)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"error: no tool 'nope' in {target}; its tools: plot, send_email"
    close = toolkeeper("tools", "show", target, "send_emale", columns=400)
    assert close.stderr.strip().endswith(
        "no tool 'send_emale' in " + target + " (did you mean 'send_email'?); "
        "its tools: send_email, plot")


def test_browse_prints_the_category_tree(tmp_path: Path) -> None:
    result = runner.invoke(app, ["tools", "browse", module(tmp_path), "communication"])
    assert result.exit_code == 0, result.output
    assert "communication" in result.stdout and "send_email" in result.stdout
    assert "plot" not in result.stdout


def test_tools_explain_lists_included_and_excluded_with_reasons(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    config = tmp_path / "toolkeeper.toml"
    config.write_text('[security]\nworkspace = "ws"\n[http_request]\nenabled = true\n')
    result = runner.invoke(app, ["tools", "explain", "--config", str(config)],
                           env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "http_request" in result.stdout and "http_request.enabled = true" in result.stdout
    assert "web_fetch.enabled is not set" in result.stdout and "excluded" in result.stdout


def test_tools_explain_says_what_the_gateway_relays_of_each_upstream(tmp_path: Path) -> None:
    config = tmp_path / "toolkeeper.toml"
    config.write_text('[mcp]\nenabled = true\n[[mcp.servers]]\nname = "notes"\n'
                      'command = "python3"\nsampling = true\nlogs = false\n'
                      '[[mcp.servers]]\nname = "tracker"\nurl = "https://t.example/mcp"\n')
    result = runner.invoke(app, ["tools", "explain", "--config", str(config)],
                           env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    rows = {cells[0]: cells[1:] for line in result.stdout.splitlines()
            if len(cells := [c.strip() for c in line.strip("│┃ ").split("│")]) == 7}
    assert rows["notes"] == ["yes", "relayed", "relayed", "not relayed",
                             "relayed to the calling client", "refused"]
    assert rows["tracker"] == ["yes", "relayed", "relayed", "relayed", "refused", "refused"]


def test_doctor_reports_the_sandbox() -> None:
    result = runner.invoke(app, ["doctor"], env={"COLUMNS": "200"})
    rows = _rows(result.stdout)
    assert rows["bubblewrap"].startswith("ok") and rows["sandbox used"].startswith("ok bwrap")
    assert "openat2 (file tools)" in rows and "per-call cgroups" in rows
    assert rows["user"].startswith("warning" if os.geteuid() == 0 else "ok")
    assert result.exit_code == 0


def test_doctor_tells_which_backend_is_really_there(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without bubblewrap, doctor says so and names the Landlock fallback it will use."""
    from toolkeeper import sandbox
    from toolkeeper.cli import doctor_cmd
    from toolkeeper.sandbox import detect

    missing = sandbox.SandboxReport(backend="bwrap", available=False,
                                    detail="bwrap is not installed (Debian: apt-get install bubblewrap)")
    monkeypatch.setattr(doctor_cmd, "probe_bwrap", lambda: missing)
    monkeypatch.setattr(detect, "probe_bwrap", lambda: missing)
    detect.probe.cache_clear()
    try:
        rows = _rows(runner.invoke(app, ["doctor"], env={"COLUMNS": "250"}).stdout)
    finally:
        detect.probe.cache_clear()
    assert rows["bubblewrap"].startswith("missing bwrap is not installed")
    assert rows["sandbox used"].startswith("ok landlock")


def _rows(table: str) -> dict[str, str]:
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) == 3:
            rows[cells[0]] = f"{cells[1]} {cells[2]}"
    return rows


def test_pins_without_any_pin_says_so_and_how_a_tool_gets_pinned(tmp_path: Path) -> None:
    SqlitePins(tmp_path / "toolkeeper.db")  # a server's state, no upstream listed yet
    done = toolkeeper("tools", "pins", "--state-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert said.startswith("no pins yet: only the tools of upstream MCP servers are pinned")
    assert "[mcp] servers" in said and "┃" not in done.stdout  # no empty table
    fresh = toolkeeper("tools", "pins", "--state-dir", str(tmp_path / "never-served"))
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout.startswith("no pins yet: ") and "[mcp] servers" in fresh.stdout


def test_tools_explain_names_lines_under_commented_headers_before_the_workspace_exists(
        tmp_path: Path) -> None:
    """A header with a comment after it (as the documented example writes them) still names
    the line that decided, and a workspace not created yet is a reason, not a traceback (as
    root, commands run as another uid, whose access to the workspace is checked)."""
    config = tmp_path / "toolkeeper.toml"
    config.write_text('[security]\nworkspace = "not-yet"\n\n[web_fetch]      # pages as text\n'
                      "enabled = true\n")
    done = toolkeeper("tools", "explain", "--config", str(config), columns=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    rows = {line.split("│")[1].strip(): line for line in done.stdout.splitlines()
            if line.startswith("│") and line.split("│")[1].strip()}
    assert f"web_fetch.enabled ({config}:5)" in rows["web_fetch"], rows["web_fetch"]
