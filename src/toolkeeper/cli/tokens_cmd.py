"""``toolkeeper tokens add|list|revoke``: one bearer token per client of ``toolkeeper serve``,
and one per named operator (``--operator``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ..errors import ToolkeeperError
from ..server.clients import ClientTokens
from .report import StateDir, Store, fail, kept, out, state_dir_of, store_target

__all__ = ["tokens_app"]

tokens_app = typer.Typer(help="Manage one bearer token per client of toolkeeper serve.",
                         no_args_is_help=True)


def _tokens(state_dir: Path | None, store: str | None) -> ClientTokens:
    return ClientTokens(store_target(store, state_dir_of(state_dir)))


@tokens_app.command("add")
def add(name: str, state_dir: StateDir = None, store: Store = None,
        operator: Annotated[bool, typer.Option(
            "--operator", help="A named operator's token (a person who decides approvals on "
            "the page and the API, named in the audit as operator:NAME), not a client's."
        )] = False) -> None:
    """Make a token for client NAME (or, with --operator, for the person NAME who decides) and
    print it (it is shown only this once)."""
    try:
        token = _tokens(state_dir, store).add(name, operator=operator)
    except ToolkeeperError as exc:
        raise fail(exc) from exc
    out.print(token, markup=False, highlight=False)


@tokens_app.command("list")
def list_tokens(state_dir: StateDir = None, store: Store = None) -> None:
    """The clients that have a token (never the tokens themselves)."""
    if store is None and not kept(state_dir_of(state_dir), nothing="no client tokens yet"):
        return  # reading makes no state: serve makes it, with the client 'default'
    entries = _tokens(state_dir, store).list()
    if not entries:
        out.print("no client has a token yet: toolkeeper serve makes one for the client "
                  "'default' when it starts, toolkeeper tokens add NAME another", markup=False,
                  highlight=False)
        return
    table = Table("name", "role", "created")
    for entry in entries:
        table.add_row(entry.name, "operator" if entry.operator else "client",
                      time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.created_at)))
    out.print(table)


@tokens_app.command("revoke")
def revoke(name: str, state_dir: StateDir = None, store: Store = None) -> None:
    """Revoke NAME's token (a client's or a named operator's): its requests are refused from
    now on."""
    if not _tokens(state_dir, store).revoke(name):
        raise fail(f"{name!r} has no token; see toolkeeper tokens list")
    out.print(f"revoked the token of {name}", markup=False, highlight=False)
