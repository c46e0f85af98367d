"""The call side: ``ToolCall``, ``ToolInvoker`` (the one door), sessions, policy and results."""

from ..core.call import CallProblem, ToolCall
from .policy import ChainPolicy
from .results import ChainCallRecord, ChainFile, ChainRunResult, InvocationResult

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
]


def __getattr__(name: str) -> object:
    # The invoker imports the catalog, which imports the formats, which import ToolCall from
    # here: load it on first use to keep that cycle open.
    if name == "ToolInvoker":
        from .invoker import ToolInvoker

        return ToolInvoker
    if name == "InvokerSession":
        from .session import InvokerSession

        return InvokerSession
    raise AttributeError(name)
