"""What a tool's task support (``execution.taskSupport``) allows a 2025-11-25 call, as that
revision says: a client asks for a task itself (``params.task``), so a tool that does not run
as one (``forbidden``, the default) is refused when asked to, and a tool that runs only as one
(``required``) is refused when called plainly — both with -32601 (method not found), naming
the tool and how to call it.

A call that may wait for a person is what tasks are for: to a client that declared tasks at
its handshake (``capabilities.tasks``), a tool its author left ``forbidden`` whose calls may
wait for a person at this server (``may_wait``) is listed as ``optional`` (``offered``),
and a call of it with ``params.task`` is a task. Other clients' listings say what the author
declared: a client that cannot follow a task is never told it could make one. What a client
declared at its handshake is known only on a connection that keeps its session (stdio, HTTP
with ``--sessions``); answering HTTP statelessly, every client is listed the declarations."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from ..approval.service import ApprovalService
from ..core.spec import ToolLike
from ..invoke.invoker import ToolInvoker
from ..invoke.session import InvokerSession
from .wire import METHOD_NOT_FOUND

__all__ = ["listed", "may_wait", "offered", "refusal", "tasks_client"]


def refusal(tool: str, support: str, asked: bool) -> MCPError | None:
    """Why a 2025-11-25 call of ``tool`` (declared ``support``) that did (``asked``) or did
    not ask to run as a task is refused, else ``None``."""
    if asked and support == "forbidden":
        return MCPError(code=METHOD_NOT_FOUND, message=(
            f"tool {tool!r} does not run as a task (its execution.taskSupport is "
            "'forbidden'): call it without params.task. Its author declares it "
            '@tool(task_support="optional") for it to run as one'),
            data={"taskSupport": support})
    if not asked and support == "required":
        return MCPError(code=METHOD_NOT_FOUND, message=(
            f"tool {tool!r} runs only as a task (its execution.taskSupport is 'required'): "
            'call it with params.task (e.g. {"ttl": 60000}), then follow the task with '
            "tasks/get and tasks/result"), data={"taskSupport": support})
    return None


def tasks_client(ctx: Any) -> bool:
    """Whether the client of ``ctx`` declared tasks (``capabilities.tasks``) at its
    2025-11-25 handshake."""
    found = getattr(getattr(ctx, "session", None), "client_capabilities", None)
    return getattr(found, "tasks", None) is not None


def may_wait(invoker: ToolInvoker, session: InvokerSession, tool: ToolLike | None, *,
             exactly: bool = True) -> bool:
    """Whether a call of ``tool`` in ``session`` may wait for a person: requests are kept in a
    store, and the tool needs approval under the session's policy (its risk, its own ask) or
    the operator's policies govern and one that can apply to it asks (``@ask``). Not
    ``exactly``: any tool while policies govern (a rule may be written at any time) — what a
    call is held to, so that a listing made before a rule was removed stays true."""
    if tool is None or invoker.approvals.store is None:
        return False
    if ApprovalService.needs_approval(tool, policy=session.policy, chain=False):
        return True
    policies = invoker.policies
    if policies is None or not policies.governs:
        return False
    return not exactly or any(found.ask for found in policies.candidates(tool))


def offered(support: str, waits: bool) -> str:
    """The task support a tasks client is told of (and held to): a ``forbidden`` tool whose
    call may wait for a person (``waits``) runs as a task when asked; ``optional`` and
    ``required`` stay as their author declared them."""
    return "optional" if support == "forbidden" and waits else support


def listed(result: BaseModel | dict[str, Any] | None,
           waits: Callable[[str], bool]) -> BaseModel | dict[str, Any] | None:
    """A ``tools/list`` result as a tasks client reads it: each tool whose wire name
    ``waits`` (may wait for a person) and that its author left ``forbidden`` is listed with
    ``execution.taskSupport`` ``optional``."""
    dump = getattr(result, "model_dump", None)
    found = dump(by_alias=True, mode="json", exclude_none=True) if callable(dump) else result
    if not isinstance(found, Mapping) or not isinstance(found.get("tools"), list):
        return result
    tools = [_as_offered(tool, waits) for tool in found["tools"]]
    return {**found, "tools": tools}


def _as_offered(tool: Any, waits: Callable[[str], bool]) -> Any:
    if not isinstance(tool, Mapping):
        return tool
    declared = tool.get("execution")
    execution: Mapping[str, Any] = declared if isinstance(declared, Mapping) else {}
    support = str(execution.get("taskSupport") or "forbidden")
    if offered(support, waits(str(tool.get("name")))) == support:
        return tool
    return {**tool, "execution": {**execution, "taskSupport": "optional"}}
