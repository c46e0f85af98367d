"""Governed tools inside agent frameworks: pydantic-ai, the OpenAI Agents SDK and
LangChain/LangGraph, one module each (``toolkeeper.adapters.pydantic_ai``, ``.openai_agents``,
``.langchain``), each needing its extra. Every call a framework's agent makes goes through
``ToolInvoker.invoke``; a call that needs a person's approval becomes the framework's own
human-in-the-loop request, and the decision made there is recorded in toolkeeper's approval
store and audit log.

This package imports no framework: import the module of the one you use.
"""

from .calls import GovernedCalls

__all__ = ["GovernedCalls"]
