"""``toolkeeper audit``: list and filter the invocation audit log."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ..errors import StoreError
from ..invoke.audit import PostgresAuditLog, SqliteAuditLog
from .report import Store

_out = Console()
_err = Console(stderr=True)


def audit(
    db: Annotated[Path, typer.Option("--db", help="The SQLite file.")] = Path("toolkeeper.db"),
    tool: Annotated[str | None, typer.Option(help="Only this tool.")] = None,
    status: Annotated[str | None, typer.Option(
        help="Only this status: ok, error, denied, pending, timeout.")] = None,
    session: Annotated[str | None, typer.Option(help="Only this session id.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    store: Store = None,
) -> None:
    """The most recent invocations, newest first."""
    if store is None and not db.is_file():
        _err.print(f"[bold red]error:[/] no audit database at {db}; pass --db PATH")
        raise typer.Exit(code=2)
    try:
        log = SqliteAuditLog(db) if store is None else PostgresAuditLog(store)
        entries = log.query(tool=tool, status=status, session_id=session,
                                           limit=limit)
    except StoreError as exc:
        _err.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(code=2) from exc
    if as_json:
        for entry in entries:
            # one object per line, as the help says (rich's print_json would indent it)
            print(json.dumps({k: getattr(entry, k) for k in entry.__slots__}, default=str,
                             ensure_ascii=False))
        return
    table = Table("time", "session", "tool", "status", "code", "ms", "arguments", "approval")
    for e in entries:
        args = json.dumps(e.arguments, ensure_ascii=False)
        table.add_row(time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.ts)), e.session_id[-8:],
                      e.tool, e.status, e.error_code or "", f"{e.duration_ms:.1f}",
                      args if len(args) <= 60 else args[:57] + "...", e.approval_id or "")
    _out.print(table)
    _out.print(f"{len(entries)} invocation(s)")
