"""``toolkeeper audit``: list and filter the invocation audit log."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, get_args

import typer
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ..builtins.fs import visible
from ..errors import StoreError
from ..invoke.audit import AuditEntry, PostgresAuditLog, SqliteAuditLog
from ..invoke.results import RecordStatus
from ..server.views import client_of
from .report import Db, StateDir, Store, err, fail, in_range, kept, out, state_dir_of, store_target

__all__ = ["STATUSES", "audit"]

STATUSES: tuple[str, ...] = get_args(RecordStatus)
"""Every status the audit log records."""
_COMPACT = 4
"""Columns of the table a narrow terminal gets."""


def audit(
    state_dir: StateDir = None,
    db: Db = None,
    tool: Annotated[str | None, typer.Option(help="Only this tool.")] = None,
    status: Annotated[str | None, typer.Option(
        help=f"Only this status: {', '.join(STATUSES)}.")] = None,
    session: Annotated[str | None, typer.Option(
        help="Only this session, as the session column shows it.")] = None,
    client: Annotated[str | None, typer.Option(
        help="Only this client's calls (its session is client-NAME).")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    wide: Annotated[bool, typer.Option("--wide", help="Every column (session, duration, "
                                       "arguments, approval), however narrow the terminal.")
                    ] = False,
    store: Store = None,
) -> None:
    """List the calls the audit log recorded, newest first."""
    in_range("--limit", limit, 1, 100_000, "a number of rows")
    if status is not None and status not in STATUSES:
        raise fail(f"unknown status {status!r}: use one of {', '.join(STATUSES)}")
    if session is not None and client is not None:
        raise fail("give --session or --client, not both (--client NAME is --session "
                   "client-NAME)")
    if client is not None:
        session = f"client-{client}"
    if store is None and db is None and not kept(state_dir_of(state_dir),
                                                 nothing="nothing recorded yet",
                                                 to=err if as_json else out):
        return
    try:
        log = _log(state_dir, db, store)
        entries = log.query(tool=tool, status=status, session_id=session, limit=limit)
    except StoreError as exc:
        raise fail(exc) from exc
    _show(entries, as_json=as_json, wide=wide)


def _show(entries: list[AuditEntry], *, as_json: bool, wide: bool) -> None:
    if as_json:
        for entry in entries:
            # one object per line, as the help says (rich's print_json would indent it)
            print(json.dumps({k: getattr(entry, k) for k in entry.__slots__}, default=str,
                             ensure_ascii=False))
        return
    table, width = _tables(entries, wide=wide)
    (out if width is None else Console(width=width)).print(table)
    more = "" if len(table.columns) > _COMPACT else " (--wide adds session, ms, arguments, approval)"
    out.print(f"{len(entries)} invocation(s){more}", markup=False, highlight=False)


def _log(state_dir: Path | None, db: Path | None, store: str | None) -> SqliteAuditLog:
    """The audit log of ``--store``, else of ``--db``, else of the state dir's database."""
    if store is None and db is not None:
        if not db.is_file():
            raise fail(f"no audit database at {db}; pass --db PATH or the --state-dir "
                       "toolkeeper serve uses")
        return SqliteAuditLog(db)
    target = store_target(store, state_dir_of(state_dir), create=False)
    return PostgresAuditLog(str(target)) if store is not None else SqliteAuditLog(target)


def _tables(entries: list[AuditEntry], *, wide: bool) -> tuple[Table, int | None]:
    """The table and the width to print it at. Every column when the terminal has room for
    them all, or when ``--wide`` asks (then at their full width, wider than the terminal if
    need be: for a pager or a file); else the columns a person reads first — time, client,
    tool, what happened — each whole, none cut to an ellipsis."""
    full = _table(entries)
    natural = Measurement.get(out, out.options.update_width(10**6), full).maximum
    if wide:
        return full, max(natural, out.width)
    return (full, None) if natural <= out.width else (_compact(entries), None)


def _table(entries: list[AuditEntry]) -> Table:
    """The entries as rows: the session whole (what ``--session`` takes), every model-chosen
    value with its control and invisible characters escaped."""
    table = Table("time", "session", "tool", "status", "code", "ms", "arguments", "approval")
    table.columns[1].no_wrap = True
    for column in (table.columns[4], table.columns[7]):  # squeezed, folded: never cut
        column.overflow = "fold"
    for e in entries:
        args = visible(json.dumps(e.arguments, ensure_ascii=False))
        cells = (_when(e), visible(e.session_id),
                 visible(e.tool), e.status, e.error_code or "", f"{e.duration_ms:.1f}",
                 args if len(args) <= 60 else args[:57] + "...", e.approval_id or "")
        table.add_row(*(Text(cell) for cell in cells))  # Text: no markup in what a model chose
    return table


def _compact(entries: list[AuditEntry]) -> Table:
    """Time, client, tool and outcome: no cell cut to an ellipsis (a long one folds)."""
    table = Table("time", "client", "tool", "status", box=box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False)
    table.columns[0].no_wrap = True
    for column in table.columns[1:]:
        column.overflow = "fold"
    for e in entries:
        outcome = " ".join(part for part in (e.status, e.error_code, _decided(e)) if part)
        cells = (_when(e), visible(client_of(e.session_id)), visible(e.tool), outcome)
        table.add_row(*(Text(cell) for cell in cells))
    return table


def _when(entry: AuditEntry) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.ts))


def _decided(entry: AuditEntry) -> str:
    """The person's decision on the call, when one was asked: ``approved by NAME``."""
    if entry.decision is None:
        return ""
    return f"{entry.decision} by {visible(entry.approver)}" if entry.approver else entry.decision
