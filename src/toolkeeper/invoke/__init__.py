"""The call side: ``ToolCall``, ``ToolInvoker`` (the one door), sessions, policy and results."""

from ..core.call import CallProblem, ToolCall
from .invoker import ToolInvoker, execute_tool_calls
from .policy import ChainPolicy
from .results import ChainCallRecord, ChainFile, ChainRunResult, InvocationResult
from .session import InvokerSession

__all__ = [
    "CallProblem",
    "ChainCallRecord",
    "ChainFile",
    "ChainPolicy",
    "ChainRunResult",
    "InvocationResult",
    "InvokerSession",
    "ToolCall",
    "ToolInvoker",
    "execute_tool_calls",
]
