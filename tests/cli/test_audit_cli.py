"""``toolkeeper audit`` lists and filters the audit log of a real SQLite file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
from typer.testing import CliRunner

from toolkeeper import ToolCall, ToolInvoker, tool
from toolkeeper.cli.main import app
from toolkeeper.invoke.audit import SqliteAuditLog

from .command import toolkeeper

runner = CliRunner()


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


def fill(db: Path) -> None:
    inv = ToolInvoker([echo], audit=SqliteAuditLog(db))

    async def run() -> None:
        async with inv.open_session() as session:
            await inv.invoke(ToolCall(id="1", name="echo", arguments={"text": "hi"}), session=session)
            await inv.invoke(ToolCall(id="2", name="echo", arguments={}), session=session)

    anyio.run(run)


def test_audit_lists_and_filters(tmp_path: Path) -> None:
    db = tmp_path / "toolkeeper.db"
    fill(db)
    everything = runner.invoke(app, ["audit", "--db", str(db)], env={"COLUMNS": "200"})
    assert everything.exit_code == 0, everything.output
    assert "2 invocation(s)" in everything.stdout and "invalid_arguments" in everything.stdout
    errors = runner.invoke(app, ["audit", "--db", str(db), "--status", "error", "--json"])
    assert errors.exit_code == 0, errors.output
    assert '"error_code": "invalid_arguments"' in errors.stdout
    assert '"status": "ok"' not in errors.stdout
    lines = errors.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["status"] == "error"  # one object per line


def test_audit_without_a_database_says_what_to_do(tmp_path: Path) -> None:
    result = runner.invoke(app, ["audit", "--db", str(tmp_path / "none.db")], env={"COLUMNS": "300"})
    assert result.exit_code == 2 and "pass --db PATH" in " ".join(result.stderr.split())


def fill_two_sessions(db: Path) -> str:
    """One call in an anonymous library session, one as client 'ci'; the first session's id."""
    inv = ToolInvoker([echo], audit=SqliteAuditLog(db))
    ids: list[str] = []

    async def run() -> None:
        async with inv.open_session() as session:
            ids.append(session.id)
            await inv.invoke(ToolCall(id="1", name="echo", arguments={"text": "[bold red]x[/]"}),
                             session=session)
        async with inv.open_session(session_id="client-ci") as session:
            await inv.invoke(ToolCall(id="2", name="echo", arguments={"text": "ci"}),
                             session=session)

    anyio.run(run)
    return ids[0]


def audit_rows(*args: str, columns: int = 300) -> tuple[int, str, str]:
    result = runner.invoke(app, ["audit", *args], env={"COLUMNS": str(columns)})
    return result.exit_code, result.stdout, result.stderr


def test_audit_reads_the_database_in_the_state_dir(tmp_path: Path) -> None:
    fill(tmp_path / "toolkeeper.db")
    code, stdout, stderr = audit_rows("--state-dir", str(tmp_path))
    assert code == 0, stderr
    assert "2 invocation(s)" in stdout


def test_the_session_column_shows_what_the_session_filter_takes_at_80_columns(
        tmp_path: Path) -> None:
    library_session = fill_two_sessions(tmp_path / "toolkeeper.db")
    code, table, _ = audit_rows("--state-dir", str(tmp_path), "--wide", columns=80)
    assert code == 0
    # an id may end in "-": bounded by what is not part of an id, not by \b
    shown = re.findall(r"(?<![\w-])(ses_[\w-]+|client-ci)(?![\w-])", table)
    assert sorted(shown) == sorted([library_session, "client-ci"])  # whole, on one line
    for session in shown:
        code, out, _ = audit_rows("--state-dir", str(tmp_path), "--session", session, "--json")
        (entry,) = [json.loads(line) for line in out.splitlines()]
        assert code == 0 and entry["session_id"] == session


def test_the_client_column_shows_what_the_client_filter_takes_at_80_columns(
        tmp_path: Path) -> None:
    library_session = fill_two_sessions(tmp_path / "toolkeeper.db")
    code, table, _ = audit_rows("--state-dir", str(tmp_path), columns=80)
    assert code == 0
    clients = sorted(line.split()[2] for line in table.splitlines()[2:4])
    assert clients == sorted(["ci", library_session]), table  # a library session: its id


def test_client_name_filters_its_session(tmp_path: Path) -> None:
    fill_two_sessions(tmp_path / "toolkeeper.db")
    code, out, _ = audit_rows("--state-dir", str(tmp_path), "--client", "ci", "--json")
    (entry,) = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and entry["session_id"] == "client-ci" and entry["arguments"] == {"text": "ci"}


def test_session_and_client_together_is_a_usage_error(tmp_path: Path) -> None:
    fill_two_sessions(tmp_path / "toolkeeper.db")
    code, _, stderr = audit_rows("--state-dir", str(tmp_path), "--client", "ci", "--session", "x")
    assert code == 2 and len(stderr.strip().splitlines()) == 1


def test_an_unknown_status_is_an_error_naming_the_valid_ones(tmp_path: Path) -> None:
    fill(tmp_path / "toolkeeper.db")
    code, _, stderr = audit_rows("--state-dir", str(tmp_path), "--status", "failed")
    assert code == 2 and "Traceback" not in stderr
    (line,) = stderr.strip().splitlines()
    assert "'failed'" in line
    for status in ("ok", "error", "denied", "pending", "timeout"):
        assert status in line


def test_arguments_that_look_like_markup_are_shown_as_typed(tmp_path: Path) -> None:
    fill_two_sessions(tmp_path / "toolkeeper.db")
    _, table, _ = audit_rows("--state-dir", str(tmp_path))
    assert "[bold red]x[/]" in table


def test_without_state_dir_audit_reads_serves_per_user_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "xdg" / "toolkeeper"
    state.mkdir(parents=True)
    fill(state / "toolkeeper.db")
    result = runner.invoke(app, ["audit"], env={"COLUMNS": "300",
                                                "XDG_STATE_HOME": str(tmp_path / "xdg")})
    assert result.exit_code == 0 and "2 invocation(s)" in result.stdout


def fill_as_a_client(db: Path) -> None:
    """Two calls of client 'default': one that ran with long arguments, one refused."""
    inv = ToolInvoker([broadcast_storm_alert], audit=SqliteAuditLog(db))

    async def run() -> None:
        async with inv.open_session(session_id="client-default") as session:
            await inv.invoke(ToolCall(id="1", name="broadcast_storm_alert",
                                      arguments={"message": "Storm warning " * 20}),
                             session=session)
            await inv.invoke(ToolCall(id="2", name="broadcast_storm_alert", arguments={}),
                             session=session)

    anyio.run(run)


@tool
def broadcast_storm_alert(message: str) -> str:
    """Broadcast a storm alert."""
    return message


def test_audit_at_80_columns_keeps_time_client_tool_and_status_whole(tmp_path: Path) -> None:
    fill_as_a_client(tmp_path / "toolkeeper.db")
    done = toolkeeper("audit", "--state-dir", str(tmp_path), columns=80)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(map(len, lines)) <= 80 and "…" not in done.stdout, done.stdout
    header, rows = lines[0].split(), [line.split() for line in lines[2:4]]
    assert header == ["time", "client", "tool", "status"], done.stdout
    for row in rows:
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", row[0]) and re.fullmatch(r"\d\d:\d\d:\d\d", row[1])
        assert row[2:4] == ["default", "broadcast_storm_alert"], done.stdout
    assert [row[4:] for row in rows] == [["error", "invalid_arguments"], ["ok"]], done.stdout
    assert "--wide" in lines[-1] and "2 invocation(s)" in lines[-1]


def test_audit_wide_shows_every_column_whole_even_at_80_columns(tmp_path: Path) -> None:
    fill_as_a_client(tmp_path / "toolkeeper.db")
    done = toolkeeper("audit", "--state-dir", str(tmp_path), "--wide", columns=80)
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[1]
    for column in ("time", "session", "tool", "status", "code", "ms", "arguments", "approval"):
        assert f" {column} " in header, done.stdout
    assert "client-default" in done.stdout and "invalid_arguments" in done.stdout
    assert '{"message": "Storm warning Storm' in done.stdout  # arguments, not an ellipsis


def test_audit_before_any_serve_says_nothing_is_recorded_yet_and_where(tmp_path: Path) -> None:
    state = tmp_path / "never-served"
    done = toolkeeper("audit", "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    (line,) = done.stdout.replace("\n", " ").strip().split("\n")
    assert line.startswith("nothing recorded yet: ") and str(state / "toolkeeper.db") in line
    assert not state.exists()  # reading never makes the state dir
    quiet = toolkeeper("audit", "--state-dir", str(state), "--json")
    assert (quiet.returncode, quiet.stdout) == (0, ""), quiet.stderr  # stdout is JSON only
    assert quiet.stderr.startswith("nothing recorded yet: ")
