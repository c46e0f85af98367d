"""``toolkeeper approvals list|show|approve|deny|login-url``: answer the requests
``toolkeeper serve`` keeps, from another terminal (the same rules as the page: the first
decision wins; a decided request cannot be decided again)."""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path
from typing import Annotated

import anyio
import typer
from rich.table import Table

from ..approval.pg import is_url
from ..approval.store import PostgresApprovalStore, SqliteApprovalStore
from ..builtins.fs import visible
from ..errors import ToolkeeperError
from ..invoke.audit import SqliteAuditLog
from ..server.auth import WebSessions
from ..server.clients import OPERATOR
from ..server.decide import DecisionError, decide
from ..server.views import approval_json, client_of, shown_json
from .report import Store, fail, out, store_target

__all__ = ["approvals_app"]

approvals_app = typer.Typer(help="List and decide the approval requests of toolkeeper serve.",
                            no_args_is_help=True)
StateDir = Annotated[Path, typer.Option(help="The state directory of toolkeeper serve.")]


def _store(state_dir: Path, store: str | None) -> SqliteApprovalStore:
    db = store_target(store, state_dir, create=False)
    try:
        return PostgresApprovalStore(str(db)) if is_url(db) else SqliteApprovalStore(db)
    except ToolkeeperError as exc:
        raise fail(exc) from exc


@approvals_app.command("list")
def list_pending(
    state_dir: StateDir = Path(".toolkeeper"),
    store: Store = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON, as the HTTP API gives it.")
                       ] = False,
    state: Annotated[str, typer.Option(help="pending, approved, denied, executing, done… "
                                            "or 'all'.")] = "pending",
) -> None:
    """The requests (pending by default), with the exact arguments that would run."""
    listed = _store(state_dir, store).requests(state=None if state == "all" else state)
    if as_json:
        print(json.dumps({"approvals": [approval_json(s) for s in listed]}, indent=1))
        return
    table = Table("id", "tool", "risk", "state", "client", "age", "arguments")
    for stored in listed:
        request = stored.request
        age = f"{time.time() - request.created_at:.0f} s"
        table.add_row(request.id, visible(request.tool), request.risk.value, stored.state,
                      visible(client_of(request.session_id)), age,
                      shown_json(request.arguments))
    out.print(table)


@approvals_app.command("show")
def show(request_id: str, state_dir: StateDir = Path(".toolkeeper"), store: Store = None
         ) -> None:
    """One request in full: its arguments, decision and result, as JSON."""
    stored = _store(state_dir, store).get(request_id)
    if stored is None:
        raise fail(f"no approval request {request_id!r}; see toolkeeper approvals list")
    print(json.dumps(approval_json(stored), indent=1, ensure_ascii=True))


def _decide(request_id: str, choice: str, message: str, state_dir: Path,
            store: str | None) -> None:
    approvals = _store(state_dir, store)
    audit = SqliteAuditLog(approvals.db)
    try:
        stored = anyio.run(partial(decide, approvals, audit, OPERATOR, request_id, choice,
                                   message=message, approver="cli"))
    except DecisionError as exc:
        raise fail(exc) from exc
    out.print(f"{request_id}: {stored.state}", markup=False, highlight=False)


Message = Annotated[str, typer.Option(help="Shown to the model (with a denial).")]


@approvals_app.command("approve")
def approve(request_id: str, message: Message = "",
            session: Annotated[bool, typer.Option(
                "--session", help="Approve this tool for the rest of the session.")] = False,
            state_dir: StateDir = Path(".toolkeeper"), store: Store = None) -> None:
    """Approve one request (the first decision wins); the waiting call runs it once."""
    _decide(request_id, "approve_session" if session else "approve", message, state_dir, store)


@approvals_app.command("deny")
def deny(request_id: str, message: Message = "",
         state_dir: StateDir = Path(".toolkeeper"), store: Store = None) -> None:
    """Deny one request (the first decision wins); the model gets the message."""
    _decide(request_id, "deny", message, state_dir, store)


@approvals_app.command("decide")
def decide_cmd(
    request_id: str,
    decision: Annotated[str, typer.Argument(help="approve or deny")],
    message: Message = "",
    state_dir: StateDir = Path(".toolkeeper"),
    store: Store = None,
) -> None:
    """Approve or deny one request (the same as approve / deny)."""
    if decision not in ("approve", "deny"):
        raise fail("the decision is 'approve' or 'deny'")
    _decide(request_id, decision, message, state_dir, store)


@approvals_app.command("login-url")
def login_url(
    url: Annotated[str, typer.Option(help="The server's address.")] = "http://127.0.0.1:8765",
    state_dir: StateDir = Path(".toolkeeper"),
    store: Store = None,
) -> None:
    """A new one-time link that logs a browser in to the approval page (valid 15 minutes)."""
    code = WebSessions(store_target(store, state_dir, create=False)).login_code()
    print(f"{url.rstrip('/')}/login?code={code}")
