"""``toolkeeper audit`` lists and filters the audit log of a real SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from typer.testing import CliRunner

from toolkeeper import ToolCall, ToolInvoker, tool
from toolkeeper.cli.main import app
from toolkeeper.invoke.audit import SqliteAuditLog

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
