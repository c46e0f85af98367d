"""MCP tasks on the wire, for both revisions (``tasks.py``, ``legacy_tasks.py``): the
extension's name, a task's TTL and poll interval, the requests' parameters, whether a client
declared the extension, a tool's task support, and a task as ``tasks/get`` answers it."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import mcp_types as types
from pydantic import Field

from ..approval.sqlite import Database
from ..invoke.invoker import ToolInvoker
from ..toolbox.catalog import CatalogBase
from .task_store import TaskRecord
from .wire import Ctx

__all__ = ["ASKED", "EXTENSION", "POLL_MS", "TTL_MS", "Asked", "TaskParams", "UpdateParams",
           "as_asked", "declared", "detailed", "dumped", "envelope", "store_of", "task_support"]

EXTENSION = "io.modelcontextprotocol/tasks"
TTL_MS = 3_600_000
"""How long a task (and its result) is kept after it was made: an hour."""
POLL_MS = 500
"""How often a client is told to poll ``tasks/get``, and how often the replica running a
task reads the store for a cancel or answers made on another replica."""
_CAPS = "io.modelcontextprotocol/clientCapabilities"


class TaskParams(types.RequestParams):
    task_id: str


class UpdateParams(TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict)


@dataclass
class Asked:
    """A 2025-11-25 ``tools/call`` that asked to run as a task (``params.task``): the TTL
    it asked for, and the task it became (its answer is then the task, ``legacy_tasks.py``)."""

    ttl_ms: int
    task: dict[str, Any] | None = None


ASKED: ContextVar[Asked | None] = ContextVar("toolkeeper_asked_task", default=None)
"""Set around a 2025-11-25 task-augmented ``tools/call`` by ``legacy_tasks.LegacyTasks``."""


def declared(ctx: Ctx) -> bool:
    """Whether the client of ``ctx`` declared the tasks extension: on this request (its
    ``_meta``, 2026-07-28) or at its handshake."""
    caps = (ctx.meta or {}).get(_CAPS) if isinstance(ctx.meta, dict) else None
    if isinstance(caps, dict) and isinstance(caps.get("extensions"), dict):
        return EXTENSION in caps["extensions"]
    session = getattr(ctx, "session", None)
    found = getattr(session, "client_capabilities", None)
    extensions = getattr(found, "extensions", None) or {}
    return EXTENSION in extensions


def task_support(catalog: CatalogBase, name: str) -> tuple[str, str]:
    """Whether the tool ``name`` runs as a task (``forbidden``, ``optional``,
    ``required``), and when it becomes one (``call``, ``tool``)."""
    metadata = getattr(catalog.get(name), "metadata", None)
    if metadata is None:
        return "forbidden", "call"
    return metadata.task_support, metadata.task_start


def store_of(invoker: ToolInvoker) -> Database | str:
    """Where tasks are kept: the approval store's database (SQLite or PostgreSQL, which
    replicas share), else a database of this process's own."""
    found = getattr(invoker.approvals.store, "db", None)
    return found if isinstance(found, Database) else ":memory:"


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")


def envelope(task: TaskRecord) -> dict[str, Any]:
    """A task on the wire: its id, status, times and TTL (integer milliseconds)."""
    out: dict[str, Any] = {"taskId": task.id, "status": task.status,
                           "createdAt": _iso(task.created_at),
                           "lastUpdatedAt": _iso(task.updated_at or task.created_at),
                           "ttlMs": task.ttl_ms, "pollIntervalMs": POLL_MS}
    if task.message:
        out["statusMessage"] = task.message
    return out


def detailed(task: TaskRecord) -> dict[str, Any]:
    """``tasks/get``: the task, with its result once completed, its error once failed and
    the questions still open while it waits for the client."""
    out = envelope(task)
    if task.status == "completed" and task.result is not None:
        out["result"] = task.result
    elif task.status == "failed" and task.error is not None:
        out["error"] = task.error
    elif task.status == "input_required":
        out["inputRequests"] = task.asked
    return out


def as_asked(asked: Asked | None, answer: Any) -> Any:
    """What a 2025-11-25 task-augmented call's handler returns: a task is kept for its
    middleware to answer with (the SDK checks the handler's result is a ``CallToolResult``),
    an empty result in its place."""
    if asked is None or not (isinstance(answer, dict) and answer.get("resultType") == "task"):
        return answer
    asked.task = {k: v for k, v in answer.items() if k != "resultType"}
    return {"content": []}


def dumped(request: Any) -> dict[str, Any]:
    dump = getattr(request, "model_dump", None)
    found = dump(by_alias=True, mode="json", exclude_none=True) if callable(dump) else request
    return found if isinstance(found, dict) else {}
