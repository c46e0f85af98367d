"""What ``toolkeeper serve`` offers as MCP prompts: the prompts a tools module declares with
``@prompt`` (arguments from the signature, like a tool's; text, images and embedded
resources in the messages) and the skills (their ``arguments`` filled into the
instructions)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from ..core.context import ToolContext
from ..core.results import TextBlock
from ..errors import ToolkeeperError
from ..formats.mcp import content_block
from ..skills.skill import Skill
from ..tools.tool import Tool
from .resources import Completions, complete_from

__all__ = ["Prompt", "PromptNotFound", "Prompts", "prompt"]


class PromptNotFound(LookupError):
    """No prompt with that name."""


@dataclass(frozen=True, kw_only=True)
class Prompt:
    """A prompt a tools module offers. ``render`` gets the arguments (strings) and returns a
    ``str`` (one user message), a content block, or a list of them or of ``(role, content)``
    pairs."""

    name: str
    render: Callable[..., Any]
    description: str = ""
    arguments: tuple[dict[str, Any], ...] = ()
    completions: Completions = field(default_factory=dict)
    ctx_param: str | None = None
    """The parameter that takes a ``ToolContext`` (to ask the client, as a tool does)."""

    def listing(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name}
        if self.description:
            entry["description"] = self.description
        if self.arguments:
            entry["arguments"] = list(self.arguments)
        return entry


@overload
def prompt(fn: Callable[..., Any], /) -> Prompt: ...


@overload
def prompt(*, name: str | None = None, description: str | None = None,
           completions: Completions | None = None) -> Callable[[Callable[..., Any]], Prompt]: ...


def prompt(fn: Callable[..., Any] | None = None, /, *, name: str | None = None,
           description: str | None = None, completions: Completions | None = None
           ) -> Prompt | Callable[[Callable[..., Any]], Prompt]:
    """Declare a function as an MCP prompt (``@prompt`` or ``@prompt(...)``): its parameters
    are the prompt's arguments (documented in the docstring, required unless they have a
    default); ``completions`` offers values for them."""
    def wrap(func: Callable[..., Any]) -> Prompt:
        shape = Tool.from_function(func, name=name, description=description)
        required = set(shape.parameters.get("required", ()))
        arguments = tuple(
            {k: v for k, v in {"name": arg, "description": spec.get("description"),
                               "required": arg in required}.items() if v is not None}
            for arg, spec in shape.parameters.get("properties", {}).items())
        takes_ctx = [n for n, p in inspect.signature(func).parameters.items()
                     if n == "ctx" or "ToolContext" in str(p.annotation)]
        return Prompt(name=shape.name, render=func,
                      description=shape.description, arguments=arguments,
                      completions=completions or {},
                      ctx_param=takes_ctx[0] if takes_ctx else None)
    return wrap(fn) if fn is not None else wrap


class Prompts:
    """The prompts one server offers: declared ones, then the skills."""

    def __init__(self, declared: Sequence[Prompt] = (), *, skills: Sequence[Skill] = ()
                 ) -> None:
        self.by_name = {p.name: p for p in [*(_from_skill(s) for s in skills), *declared]}

    def listing(self) -> list[dict[str, Any]]:
        return [p.listing() for _, p in sorted(self.by_name.items())]

    async def get(self, name: str, arguments: Mapping[str, str], ctx: ToolContext | None = None
                  ) -> dict[str, Any]:
        """``prompts/get``: the description and the messages, as MCP data (a prompt that takes
        a ``ctx`` gets ``ctx``)."""
        found = self.by_name.get(name)
        if found is None:
            known = ", ".join(sorted(self.by_name)) or "none"
            raise PromptNotFound(f"no prompt named {name!r} (prompts: {known})")
        missing = [a["name"] for a in found.arguments
                   if a.get("required") and a["name"] not in arguments]
        if missing:
            raise ToolkeeperError(f"prompt {name!r} needs the argument {missing[0]!r}")
        extra = {found.ctx_param: ctx} if found.ctx_param and ctx is not None else {}
        value = found.render(**arguments, **extra)
        if inspect.isawaitable(value):
            value = await value
        out: dict[str, Any] = {"messages": [_message(item) for item in _items(value)]}
        if found.description:
            out["description"] = found.description
        return out

    def complete(self, name: str, argument: str, typed: str) -> list[str]:
        found = self.by_name.get(name)
        return complete_from(found.completions, argument, typed) if found else []


def _items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) and not _is_pair(value) else [value]


def _is_pair(value: Any) -> bool:
    return isinstance(value, tuple) and len(value) == 2 and value[0] in ("user", "assistant")


def _message(item: Any) -> dict[str, Any]:
    role, content = item if _is_pair(item) else ("user", item)
    block = TextBlock(text=content) if isinstance(content, str) else content
    return {"role": role, "content": content_block(block)}


def _from_skill(skill: Skill) -> Prompt:
    arguments = tuple({"name": a, "required": True} for a in skill.arguments)

    def render(**values: str) -> str:
        text = skill.prompt()
        for key, value in values.items():
            text = text.replace("{" + key + "}", value)
        return text

    return Prompt(name=skill.name, render=render, description=skill.description,
                  arguments=arguments)
