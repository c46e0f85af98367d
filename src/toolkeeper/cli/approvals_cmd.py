"""``toolkeeper approvals list|decide``: answer the requests ``toolkeeper serve`` keeps, from
another terminal. The first decision wins; a decided request cannot be decided again."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ..approval.models import ApprovalDecision
from ..approval.store import SqliteApprovalStore
from ..builtins.fs import visible
from .report import fail, out

__all__ = ["approvals_app"]

approvals_app = typer.Typer(help="List and decide the approval requests of toolkeeper serve.",
                            no_args_is_help=True)
StateDir = Annotated[Path, typer.Option(help="The state directory of toolkeeper serve.")]


def _store(state_dir: Path) -> SqliteApprovalStore:
    db = state_dir / "toolkeeper.db"
    if not db.exists():
        raise fail(f"no state at {db}; pass the --state-dir toolkeeper serve uses")
    return SqliteApprovalStore(db)


@approvals_app.command("list")
def list_pending(state_dir: StateDir = Path(".toolkeeper")) -> None:
    """The pending requests, with the exact arguments that would run."""
    table = Table("id", "tool", "risk", "session", "age", "arguments")
    for request in _store(state_dir).pending():
        age = f"{time.time() - request.created_at:.0f} s"
        arguments = visible(json.dumps(request.arguments, ensure_ascii=False, indent=1))
        table.add_row(request.id, request.tool, request.risk.value, request.session_id, age,
                      arguments)
    out.print(table)


@approvals_app.command("decide")
def decide(
    request_id: str,
    decision: Annotated[str, typer.Argument(help="approve or deny")],
    message: Annotated[str, typer.Option(help="Shown to the model with a denial.")] = "",
    state_dir: StateDir = Path(".toolkeeper"),
) -> None:
    """Approve or deny one request (the first decision wins)."""
    if decision not in ("approve", "deny"):
        raise fail("the decision is 'approve' or 'deny'")
    store = _store(state_dir)
    if store.get(request_id) is None:
        raise fail(f"no approval request {request_id!r}; see toolkeeper approvals list")
    outcome = "approved" if decision == "approve" else "denied"
    if not store.decide(ApprovalDecision(request_id=request_id, outcome=outcome,
                                         message=message, approver="cli")):
        raise fail(f"request {request_id} was already decided; a decision is final")
    out.print(f"{request_id}: {outcome}", markup=False, highlight=False)
