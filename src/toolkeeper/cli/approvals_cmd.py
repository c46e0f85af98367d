"""``toolkeeper approvals list|show|approve|deny|decide|login-url``: answer the requests
``toolkeeper serve`` keeps, from another terminal (the same rules as the page: the first
decision wins; a decided request cannot be decided again). A request may be named by a unique
prefix of its id, as ``approvals list`` shows it."""

from __future__ import annotations

import json
import os
import textwrap
import time
from functools import partial
from pathlib import Path
from typing import Annotated, get_args

import anyio
import typer
from rich.markup import escape

from ..approval.pg import is_url
from ..approval.store import PostgresApprovalStore, SqliteApprovalStore, State, StoredApproval
from ..builtins.fs import visible
from ..errors import ToolkeeperError
from ..invoke.audit import SqliteAuditLog
from ..server.auth import WebSessions
from ..server.clients import OPERATOR, ClientTokens
from ..server.decide import DecisionError, decide
from ..server.views import approval_json, client_of, shown_json
from .report import Db, StateDir, Store, err, fail, kept, out, state_dir_of, store_target
from .state import SERVER_FILE

__all__ = ["approvals_app"]

approvals_app = typer.Typer(help="List and decide the approval requests of toolkeeper serve.",
                            no_args_is_help=True)
STATES: tuple[str, ...] = get_args(State)
PREFIX_MIN = 4
"""Characters of an id (after ``apr_``) a prefix must give: a shorter one would pick a request
by accident more often than by intent."""
_SCAN = 100_000
_CANDIDATES = 5
RequestId = Annotated[str, typer.Argument(
    help="The request's id, or a unique prefix of it (the 'apr_' may be left out).")]


def _store(state_dir: Path | None, store: str | None, db: Path | None) -> SqliteApprovalStore:
    target = store_target(store, state_dir_of(state_dir), create=False, db=db)
    try:
        return PostgresApprovalStore(str(target)) if is_url(target) else \
            SqliteApprovalStore(target)
    except ToolkeeperError as exc:
        raise fail(exc) from exc


@approvals_app.command("list")
def list_pending(
    state_dir: StateDir = None,
    store: Store = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON, as the HTTP API gives it.")
                       ] = False,
    state: Annotated[str, typer.Option(help=f"{', '.join(STATES)}, or 'all'.")] = "pending",
    db: Db = None,
) -> None:
    """The requests (pending by default), with the exact arguments that would run."""
    if state != "all" and state not in STATES:
        raise fail(f"unknown state {state!r}: use one of {', '.join(STATES)}, or all")
    if store is None and db is None and not kept(state_dir_of(state_dir),
                                                 nothing="no approval requests yet",
                                                 to=err if as_json else out):
        if as_json:
            print(json.dumps({"approvals": []}, indent=1))
        return
    listed = _store(state_dir, store, db).requests(state=None if state == "all" else state)
    if as_json:
        print(json.dumps({"approvals": [approval_json(s) for s in listed]}, indent=1))
        return
    for stored in listed:
        _print_request(stored)
    shown = "" if state == "all" else f" {state}"
    out.print(f"{len(listed)}{shown} request(s)", markup=False, highlight=False)


def _print_request(stored: StoredApproval) -> None:
    """One request as a line of facts — its whole id first, so it is never cut at any width —
    and its exact arguments below (long lines fold; nothing is left out)."""
    request = stored.request
    facts = (request.id, visible(request.tool), f"risk {request.risk.value}", stored.state,
             f"client {visible(client_of(request.session_id))}",
             f"{time.time() - request.created_at:.0f} s ago")
    for line in fact_lines(facts, out.width):
        out.print(line, markup=False, highlight=False, overflow="fold")
    out.print(textwrap.indent(shown_json(request.arguments), "    "), markup=False,
              highlight=False, overflow="fold")


def fact_lines(facts: tuple[str, ...], width: int) -> list[str]:
    """Facts two spaces apart, as many to a line as fit in ``width``: a line breaks between two
    facts, never inside one ("client default" stays whole); only a fact longer than a whole
    line is folded."""
    lines = [""]
    for fact in facts:
        joined = f"{lines[-1]}  {fact}" if lines[-1] else fact
        if len(joined) <= width or not lines[-1]:
            lines[-1] = joined
        else:
            lines.append(fact)
    return lines


def resolve(approvals: SqliteApprovalStore, given: str, *, state: str | None) -> str:
    """The id of the request ``given`` names: an id as it is, else the one id in ``state``
    (``None``: any) that starts with ``given`` (or with ``apr_`` + ``given``).

    Raises:
        typer.Exit: (code 2, one line said) too short, no match, or several (listed).
    """
    if approvals.get(given) is not None:
        return given
    if len(given.removeprefix("apr_")) < PREFIX_MIN:
        raise fail(f"{given!r} is too short to name a request: give at least {PREFIX_MIN} "
                   "characters of its id (toolkeeper approvals list shows them)")
    found = [s.request.id for s in approvals.requests(state=state, limit=_SCAN)
             if s.request.id.startswith((given, "apr_" + given))]
    if not found:
        raise fail(_not_found(approvals, given, state))
    if len(found) > 1:
        more = f", … ({len(found)} in all)" if len(found) > _CANDIDATES else ""
        raise fail(f"{given!r} is ambiguous: it starts the ids of {', '.join(found[:_CANDIDATES])}"
                   f"{more}; type more characters of the id")
    return found[0]


def _not_found(approvals: SqliteApprovalStore, given: str, state: str | None) -> str:
    """Why ``given`` names no request in ``state``: it names one in another state, or none."""
    if state is not None:
        other = [s for s in approvals.requests(limit=_SCAN)
                 if s.request.id.startswith((given, "apr_" + given))]
        if len(other) == 1:
            return (f"request {other[0].request.id} is {other[0].state}, not {state}: it was "
                    "already decided, and the first decision stands")
    which = "" if state is None else f"{state} "
    return (f"no {which}approval request {given!r} (no {which}request's id starts with it); "
            "see toolkeeper approvals list --state all")


@approvals_app.command("show")
def show(request_id: RequestId, state_dir: StateDir = None, store: Store = None,
         db: Db = None) -> None:
    """One request in full: its arguments, decision and result, as JSON."""
    approvals = _store(state_dir, store, db)
    stored = approvals.get(resolve(approvals, request_id, state=None))
    if stored is None:
        raise fail(f"no approval request {request_id!r}; see toolkeeper approvals list")
    print(json.dumps(approval_json(stored), indent=1, ensure_ascii=True))


def _decide(request_id: str, choice: str, message: str, state_dir: Path | None,
            store: str | None, db: Path | None) -> None:
    approvals = _store(state_dir, store, db)
    request_id = resolve(approvals, request_id, state="pending")
    audit = SqliteAuditLog(approvals.db)
    try:
        stored = anyio.run(partial(decide, approvals, audit, OPERATOR, request_id, choice,
                                   message=message, approver="cli"))
    except DecisionError as exc:
        raise fail(exc) from exc
    out.print(f"{request_id}: {stored.state}", markup=False, highlight=False)


Message = Annotated[str, typer.Option(help="Shown to the model (with a denial).")]


@approvals_app.command("approve")
def approve(request_id: RequestId, message: Message = "",
            session: Annotated[bool, typer.Option(
                "--session", help="Approve this tool for the rest of the session.")] = False,
            state_dir: StateDir = None, store: Store = None, db: Db = None) -> None:
    """Approve one request (the first decision wins); the waiting call runs it once."""
    _decide(request_id, "approve_session" if session else "approve", message, state_dir, store,
            db)


@approvals_app.command("deny")
def deny(request_id: RequestId, message: Message = "",
         state_dir: StateDir = None, store: Store = None, db: Db = None) -> None:
    """Deny one request (the first decision wins); the model gets the message."""
    _decide(request_id, "deny", message, state_dir, store, db)


@approvals_app.command("decide")
def decide_cmd(
    request_id: RequestId,
    decision: Annotated[str, typer.Argument(help="approve or deny")],
    message: Message = "",
    state_dir: StateDir = None,
    store: Store = None,
    db: Db = None,
) -> None:
    """Approve or deny one request (the same as approve / deny)."""
    if decision not in ("approve", "deny"):
        raise fail("the decision is 'approve' or 'deny'")
    _decide(request_id, decision, message, state_dir, store, db)


@approvals_app.command("login-url")
def login_url(
    url: Annotated[str | None, typer.Option(
        help="The server's address, e.g. http://127.0.0.1:8765 (default: the one the running "
             f"server recorded in STATE_DIR/{SERVER_FILE}).")] = None,
    port: Annotated[int | None, typer.Option(
        help="The port of the server on 127.0.0.1 (instead of --url).", min=1, max=65535)
                    ] = None,
    state_dir: StateDir = None,
    store: Store = None,
    operator: Annotated[str | None, typer.Option(
        "--operator", help="Log in as this named operator (toolkeeper tokens add NAME "
        "--operator): the page's decisions are theirs.")] = None,
) -> None:
    """A new one-time link that logs a browser in to the approval page (valid 15 minutes)."""
    if url is not None and port is not None:
        raise fail("give --url or --port, not both")
    if url is not None and not url.startswith(("http://", "https://")):
        raise fail(f"--url must start with http:// or https://, got {url!r}")
    state = state_dir_of(state_dir)
    base = url or (f"http://127.0.0.1:{port}" if port is not None else None)
    why = ""
    if base is None:
        base, why = running_server(state)
    target = store_target(store, state, create=False)
    if operator is not None and not any(
            t.operator and t.name == operator for t in ClientTokens(target).list()):
        raise fail(f"{operator!r} is not a named operator: make one with toolkeeper tokens "
                   f"add {operator} --operator")
    code = WebSessions(target).login_code(operator or "")
    if base is None:
        err.print(f"note: {escape(why)}, so the server's address is unknown: open this path "
                  "on it, or pass --url http://HOST:PORT (or --port PORT)", soft_wrap=True)
        print(f"/login?code={code}")
        return
    print(f"{base.rstrip('/')}/login?code={code}")


def running_server(state_dir: Path) -> tuple[str | None, str]:
    """The address of the ``toolkeeper serve`` running on ``state_dir``, from the
    ``server.json`` it writes there (``url``, ``pid``, ``started_at``) — or ``None`` and why
    not (no file, an unreadable one, or its process has ended)."""
    path = state_dir / SERVER_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, f"no toolkeeper serve is recorded as running on {state_dir} (no {path})"
    except (OSError, ValueError) as exc:
        return None, f"{path} cannot be read ({exc})"
    found = record if isinstance(record, dict) else {}
    address, pid = found.get("url"), found.get("pid")
    if (not isinstance(address, str) or not address.startswith(("http://", "https://"))
            or type(pid) is not int):
        return None, f"{path} does not name a server (it needs a 'url' and a 'pid')"
    if not _alive(pid):
        return None, (f"the server {path} names ({address}, pid {pid}) is no longer running "
                      "(it did not stop cleanly)")
    return address, ""


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (another user's counts: it is running)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    return True
