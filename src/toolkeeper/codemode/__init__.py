"""Code mode: model-written scripts that call tools, run in an OS sandbox, every call through
the invoker."""

from .chain import ToolChainTool

__all__ = ["ToolChainTool"]
