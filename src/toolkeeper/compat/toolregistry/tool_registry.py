"""``ToolRegistry`` as toolregistry documents it, over toolkeeper.

The surface and the defaults are toolregistry's: ``ToolRegistry(name=None, *,
default_max_result_size=None, think_augment=False, name_sep="-")``; ``get_schemas`` sorted by
name without ``toolcall_reason`` unless asked; ``execute_tool_calls`` reads a list of calls in any
provider's shape and returns a ``ResultList`` of ``ToolCallResult``/``ErrorResult``. Underneath,
every call goes through toolkeeper's ``ToolInvoker`` — validated against the tool's schema,
within its timeout, traced — and every declaration is toolkeeper's export.
"""

from __future__ import annotations

import json
import secrets
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypedDict, Unpack

from ...core.call import ToolCall
from ...core.json import JsonObject
from ...errors import UsageError
from ...formats import WireNames, export
from ...invoke.invoker import ToolInvoker
from ...invoke.results import InvocationResult
from ...toolbox.toolbox import Toolbox
from ...tools.runner import run_coroutine_sync
from ...tools.tool import Tool as CoreTool
from .calls import api_format as canonical_format
from .calls import messages, read_call
from .classes import class_methods, class_namespace, detect_source
from .metadata import ToolTag
from .namespaces import NameSeparator, Namespaces
from .results import (
    ErrorResult,
    ResultList,
    ToolCallResult,
    error_label,
    running_encoded,
    truncate,
)
from .tool import Tool

__all__ = ["ToolRegistry"]

Result = ToolCallResult | ErrorResult
_MISSING = object()
_NOT_HERE = {"mcp": "toolkeeper.gateway.MCPGateway (or toolkeeper serve's [[mcp_servers]])",
             "openapi": "a toolkeeper Tool per operation", "langchain": "toolkeeper.adapters"}


class ClassOptions(TypedDict, total=False):
    """What registering a class's methods takes besides the class."""

    traverse_mro: bool
    constructor_kwargs: Mapping[str, object] | None
    with_namespace: bool | str
    """The earlier name of ``namespace`` (deprecated by toolregistry)."""


class FromClassOptions(TypedDict, total=False):
    """What the deprecated ``register_from_class`` passes on to ``register``."""

    with_namespace: bool | str
    allow_replace: bool


class RegisterOptions(ClassOptions, total=False):
    """``register``'s keyword options, for ``register_async``."""

    source: str | None
    namespace: bool | str | None
    method_name: str | None
    allow_replace: bool


class SchemaOptions(TypedDict, total=False):
    """``get_schemas``'s keyword options, for ``get_tools_json``."""

    api_format: str
    tags: set[str | ToolTag] | None
    exclude_tags: set[str | ToolTag] | None
    sort: bool
    include_deferred: bool


class _Door:
    """The registry's tools as toolkeeper runs them: one invoker over their toolkeeper tools
    (each answering with toolregistry's text), and each format's name table to read calls."""

    def __init__(self, tools: list[Tool]) -> None:
        self.tools = tools
        self.invoker = ToolInvoker(Toolbox([_running(t) for t in tools]))
        self._names: dict[str, WireNames] = {}

    def names(self, api_format: str) -> WireNames:
        if api_format not in self._names:
            self._names[api_format] = export([t.core for t in self.tools], api_format).names
        return self._names[api_format]


def _running(tool: Tool) -> CoreTool:
    core = tool.core
    func = core.callable if core.callable is not None else tool.callable
    return core.replace(callable=running_encoded(func, tool.name, core.is_async),
                        metadata=core.metadata.model_copy(update={"max_result_size": None}))


class ToolRegistry(Namespaces):
    """Tools by name, declared for providers and run through toolkeeper's invoker."""

    def __init__(self, name: str | None = None, *, default_max_result_size: int | None = None,
                 think_augment: bool = False, tool_discovery: bool = False,
                 name_sep: NameSeparator = "-") -> None:
        if tool_discovery:
            raise UsageError("tool_discovery is toolregistry's own search tool, not offered "
                             "here; toolkeeper's is registry.toolbox.with_tool_search()")
        super().__init__(name_sep)
        self.name = name if name is not None else f"reg_{secrets.token_hex(2)}"
        self._execution_mode: Literal["thread", "process"] = "process"
        self._default_max_result_size = default_max_result_size
        self._think_augment = think_augment
        self._door: _Door | None = None

    # -- dunder methods -----------------------------------------------------------------

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def __repr__(self) -> str:
        return json.dumps(self.get_schemas(), indent=2)

    __str__ = __repr__

    def __getitem__(self, key: str) -> Callable[..., Any] | None:
        return self.get_callable(key)

    def __enter__(self) -> ToolRegistry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ToolRegistry:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self, wait: bool = False) -> None:
        """Nothing to release: calls run on toolkeeper's worker threads, which need no pool
        of the registry's own."""

    async def close_async(self, wait: bool = False) -> None:
        self.close(wait)

    # -- registration -------------------------------------------------------------------

    def register(self, target: object = _MISSING, description: str | None = None,
                 name: str | None = None, *, source: str | None = None,
                 namespace: bool | str | None = None, method_name: str | None = None,
                 allow_replace: bool = False, **kwargs: Unpack[ClassOptions]) -> Tool | None:
        """Register a function or ``Tool`` (``native``), or a class's or instance's methods
        (``class``: ``traverse_mro``, ``constructor_kwargs``); returns what was registered.

        Raises:
            TypeError: a target whose kind cannot be told (pass ``source=``).
            ValueError: an unknown source, or ``namespace=True`` for a function.
            UsageError: a source this import does not offer (MCP, OpenAPI, LangChain), naming
                toolkeeper's own.
        """
        if target is _MISSING:
            raise TypeError("register() missing required argument: 'target'")
        if "with_namespace" in kwargs:
            warnings.warn("with_namespace is deprecated, use namespace instead.",
                          DeprecationWarning, stacklevel=2)
            namespace = kwargs.pop("with_namespace")  # toolregistry's earlier name
        resolved = source or ("native" if isinstance(target, Tool) else detect_source(target))
        if resolved == "native":
            return self._register_native(target, description, name, namespace, method_name,
                                         allow_replace)
        if resolved == "class":
            self._register_class(target, namespace, allow_replace, **kwargs)
            return None
        if resolved in _NOT_HERE:
            raise UsageError(f"source={resolved!r} is not offered by toolkeeper's toolregistry "
                             f"import; toolkeeper's own is {_NOT_HERE[resolved]}")
        raise ValueError(f"Unknown source: {resolved!r}. Supported values: 'native', 'class', "
                         "'mcp', 'openapi', 'langchain'.")

    async def register_async(self, target: object = _MISSING, description: str | None = None,
                             name: str | None = None, **options: Unpack[RegisterOptions]
                             ) -> Tool | None:
        """``register`` from async code."""
        if target is _MISSING:
            raise TypeError("register_async() missing required argument: 'target'")
        return self.register(target, description, name, **options)

    def _register_native(self, target: object, description: str | None, name: str | None,
                         namespace: bool | str | None, method_name: str | None,
                         allow_replace: bool) -> Tool:
        if namespace is True:
            raise ValueError("namespace=True is not supported for native function "
                             "registration; pass a string namespace instead.")
        if isinstance(target, CoreTool):
            raise UsageError(f"'{target.name}' is a toolkeeper Tool: it belongs in a toolkeeper "
                             "Toolbox; register the function it wraps here")
        ns = self._namespace_of(namespace if isinstance(namespace, str) else None)
        if isinstance(target, Tool):
            tool = target.update_namespace(ns, force=True, sep=self.name_sep)
        elif not callable(target):
            raise TypeError(f"cannot register {target!r}: pass a function, a Tool, or a class or "
                            "instance with source='class'")
        else:
            tool = Tool.from_function(target, name=name, description=description, namespace=ns,
                                      method_name=method_name, sep=self.name_sep)
        existing = self._tools.get(tool.name)
        self._tools[tool.name] = tool
        if existing is not None and existing != tool and not allow_replace:
            warnings.warn(f"Tool {tool.name!r} was already registered; the previous definition "
                          "was discarded. Pass allow_replace=True to acknowledge replacement.",
                          UserWarning, stacklevel=3)
        return tool

    def _register_class(self, target: object, namespace: bool | str | None,
                        allow_replace: bool, **options: Unpack[ClassOptions]) -> None:
        ns = class_namespace(target, namespace)
        for method, func in class_methods(target, traverse_mro=options.get("traverse_mro", True),
                                          constructor_kwargs=options.get("constructor_kwargs")):
            self._register_native(func, None, None, ns, method, allow_replace)

    def register_from_class(self, cls: type | object, namespace: bool | str = False,
                            traverse_mro: bool = True,
                            constructor_kwargs: Mapping[str, object] | None = None,
                            **kwargs: Unpack[FromClassOptions]) -> None:
        """Deprecated: ``register(cls, source="class", ...)``."""
        warnings.warn("register_from_class() is deprecated, use register(cls, source='class', "
                      "...) instead.", DeprecationWarning, stacklevel=2)
        self.register(cls, source="class", namespace=namespace, traverse_mro=traverse_mro,
                      constructor_kwargs=constructor_kwargs, **kwargs)

    async def register_from_class_async(self, cls: type | object,
                                        namespace: bool | str = False,
                                        traverse_mro: bool = True,
                                        constructor_kwargs: Mapping[str, object] | None = None,
                                        **kwargs: Unpack[FromClassOptions]) -> None:
        """Deprecated: ``await register_async(cls, source="class", ...)``."""
        warnings.warn("register_from_class_async() is deprecated, use register_async(cls, "
                      "source='class', ...) instead.", DeprecationWarning, stacklevel=2)
        self.register(cls, source="class", namespace=namespace, traverse_mro=traverse_mro,
                      constructor_kwargs=constructor_kwargs, **kwargs)

    # -- enable / disable ---------------------------------------------------------------

    def disable(self, name: str, reason: str = "") -> None:
        """Disable a tool or a namespace (its calls are refused with the reason)."""
        self._disabled[name] = reason

    def enable(self, name: str) -> None:
        self._disabled.pop(name, None)

    def is_enabled(self, tool_name: str) -> bool:
        return self.get_disable_reason(tool_name) is None

    def get_disable_reason(self, tool_name: str) -> str | None:
        if tool_name in self._disabled:
            return self._disabled[tool_name]
        tool = self._tools.get(tool_name)
        if tool is not None and tool.namespace:
            return self._disabled.get(tool.namespace)
        return None

    def disable_by_tags(self, tags: set[str | ToolTag], *, match: Literal["any", "all"] = "any",
                        reason: str = "Disabled by tag filter") -> list[str]:
        """Disable the enabled tools with any (``match="all"``: all) of ``tags``; returns
        their names."""
        wanted = {str(t.value if isinstance(t, ToolTag) else t) for t in tags}
        if not wanted:
            return []
        hit = [name for name, tool in self._tools.items() if self.is_enabled(name)
               and (wanted <= tool.metadata.all_tags if match == "all"
                    else wanted & tool.metadata.all_tags)]
        for name in hit:
            self.disable(name, reason=reason)
        return hit

    def get_tools_status(self) -> list[dict[str, object]]:
        """Each tool's state: name, enabled, reason, namespace, sorted tags, locality,
        is_async, source, source_detail, think_augment, defer, title, execution_hints."""
        return [{"name": name, "enabled": self.is_enabled(name),
                 "reason": self.get_disable_reason(name), "namespace": tool.namespace,
                 "tags": sorted(tool.metadata.all_tags), "locality": tool.metadata.locality,
                 "is_async": tool.metadata.is_async, "source": tool.metadata.source,
                 "source_detail": tool.metadata.source_detail,
                 "think_augment": tool.metadata.think_augment, "defer": tool.metadata.defer,
                 "title": tool.metadata.title, "execution_hints": tool.execution_hints}
                for name, tool in self._tools.items()]

    def enable_think_augment(self) -> None:
        """Offer ``toolcall_reason`` on every tool whose metadata does not say otherwise."""
        self._think_augment = True

    def disable_think_augment(self) -> None:
        self._think_augment = False

    # -- listing ------------------------------------------------------------------------

    def list_tools(self, include_disabled: bool = False) -> list[str]:
        return [n for n in self._tools if include_disabled or self.is_enabled(n)]

    def get_available_tools(self) -> list[str]:
        warnings.warn("get_available_tools() is deprecated, use list_tools() instead.",
                      DeprecationWarning, stacklevel=2)
        return self.list_tools()

    def list_all_tools(self) -> list[str]:
        warnings.warn("list_all_tools() is deprecated, use list_tools(include_disabled=True) "
                      "instead.", DeprecationWarning, stacklevel=2)
        return self.list_tools(include_disabled=True)

    def get_tool(self, tool_name: str) -> Tool | None:
        return self._tools.get(tool_name)

    def get_callable(self, tool_name: str) -> Callable[..., Any] | None:
        tool = self._tools.get(tool_name)
        return tool.callable if tool is not None else None

    def get_schemas(self, tool_name: str | None = None, *, api_format: str = "openai-chat",
                    tags: set[str | ToolTag] | None = None,
                    exclude_tags: set[str | ToolTag] | None = None, sort: bool = True,
                    include_deferred: bool = True) -> list[JsonObject]:
        """Declarations of the enabled tools (or of ``tool_name``), filtered by tags, sorted by
        name unless ``sort=False``; ``toolcall_reason`` per the tool's ``think_augment``, else
        the registry's (off unless ``think_augment=True`` or ``enable_think_augment()``)."""
        fmt = canonical_format(api_format)
        if tool_name:
            found = self.get_tool(tool_name)
            tools = [found] if found is not None else []
        else:
            tools = self._selected(tags, exclude_tags, include_deferred)
            if sort:
                tools.sort(key=lambda t: t.name)
        return [t.get_schema(fmt, _think_augment=self._thinks(t)) for t in tools]

    def get_tools_json(self, tool_name: str | None = None, **options: Unpack[SchemaOptions]
                       ) -> list[JsonObject]:
        warnings.warn("get_tools_json() is deprecated, use get_schemas() instead.",
                      DeprecationWarning, stacklevel=2)
        return self.get_schemas(tool_name, **options)

    def _selected(self, tags: set[str | ToolTag] | None, exclude: set[str | ToolTag] | None,
                  include_deferred: bool) -> list[Tool]:
        wanted = {str(t.value if isinstance(t, ToolTag) else t) for t in tags or ()}
        unwanted = {str(t.value if isinstance(t, ToolTag) else t) for t in exclude or ()}
        return [t for t in self._tools.values() if self.is_enabled(t.name)
                and (include_deferred or not t.metadata.defer)
                and (tags is None or t.metadata.all_tags & wanted)
                and not t.metadata.all_tags & unwanted]

    def _thinks(self, tool: Tool) -> bool:
        own = tool.metadata.think_augment
        return self._think_augment if own is None else own

    @property
    def toolbox(self) -> Toolbox:
        """The enabled tools as a toolkeeper ``Toolbox`` (``toolcall_reason`` as the registry
        offers it), for ``ToolInvoker``, ``toolkeeper serve`` and toolkeeper's views."""
        return Toolbox([t.core.replace(metadata=t.core.metadata.model_copy(
            update={"think_augment": self._thinks(t)})) for t in self._tools.values()
            if self.is_enabled(t.name)])

    # -- execution ----------------------------------------------------------------------

    def set_default_execution_mode(self, mode: Literal["thread", "process"]) -> None:
        """Kept for toolregistry programs; calls run where toolkeeper's invoker runs them
        (sync tools on worker threads, async ones on the event loop) in either mode.

        Raises:
            ValueError: a mode other than ``thread`` or ``process``.
        """
        if mode not in ("thread", "process"):
            raise ValueError("Invalid mode. Choose 'thread' or 'process'.")
        self._execution_mode = mode

    def set_execution_mode(self, mode: Literal["thread", "process"]) -> None:
        warnings.warn("set_execution_mode() is deprecated, use set_default_execution_mode() "
                      "instead.", DeprecationWarning, stacklevel=2)
        self.set_default_execution_mode(mode)

    def execute_tool_calls(self, tool_calls: Sequence[object],
                           execution_mode: Literal["process", "thread"] | None = None
                           ) -> ResultList:
        """Run a model's calls (OpenAI, Responses, Anthropic, Gemini or Google Interactions
        shapes, told apart per call) through toolkeeper's invoker; results in call order.

        Raises:
            TypeError: a call in none of those shapes.
        """
        result: ResultList = run_coroutine_sync(self.aexecute_tool_calls(tool_calls,
                                                                          execution_mode))
        return result

    async def aexecute_tool_calls(self, tool_calls: Sequence[object],
                                  execution_mode: Literal["process", "thread"] | None = None
                                  ) -> ResultList:
        """``execute_tool_calls`` from async code."""
        door = self._current_door()
        calls = [read_call(c, door.names, i) for i, c in enumerate(tool_calls)]
        return ResultList(await self._run(door, calls, batch=True))

    def invoke(self, tool_name: str, kwargs: Mapping[str, object], *,
               invocation_id: str | None = None,
               execution_mode: Literal["thread", "process"] | None = None) -> Result:
        """Run one tool; a ``ToolCallResult`` or an ``ErrorResult``, never an exception."""
        result: Result = run_coroutine_sync(self.ainvoke(tool_name, kwargs,
                                                         invocation_id=invocation_id))
        return result

    async def ainvoke(self, tool_name: str, kwargs: Mapping[str, object], *,
                      invocation_id: str | None = None,
                      execution_mode: Literal["thread", "process"] | None = None) -> Result:
        call_id = invocation_id or f"tr_sig_{secrets.token_hex(4)}"
        call = ToolCall(id=call_id, name=tool_name, arguments=dict(kwargs))
        (result,) = await self._run(self._current_door(), [call], batch=False)
        return result

    async def _run(self, door: _Door, calls: list[ToolCall], *, batch: bool) -> list[Result]:
        refused = [self._refusal(c, batch) for c in calls]
        runnable = [c for c, r in zip(calls, refused, strict=True) if r is None]
        async with door.invoker.open_session() as session:
            if all(self._tools[c.name].metadata.is_concurrency_safe for c in runnable):
                done = await door.invoker.invoke_many(runnable, session=session)
            else:  # toolregistry runs the whole batch in order when one tool is unsafe
                done = [await door.invoker.invoke(c, session=session) for c in runnable]
            outcomes = iter(done)
        return [r if r is not None else self._result(c, next(outcomes))
                for c, r in zip(calls, refused, strict=True)]

    def _refusal(self, call: ToolCall, batch: bool) -> ErrorResult | None:
        prefix = "Error: " if batch else ""
        if call.name not in self._tools:
            message = f"KeyError: {prefix}{KeyError(f'Tool {call.name!r} is not registered')}"
            return ErrorResult(id=call.id, name=call.name, message=message)
        reason = self.get_disable_reason(call.name)
        if reason is not None:
            return ErrorResult(id=call.id, name=call.name, message=f"RuntimeError: {prefix}Tool "
                               f"'{call.name}' is disabled: {reason or 'Tool is disabled'}")
        return None

    def _result(self, call: ToolCall, outcome: InvocationResult) -> Result:
        if outcome.status == "ok":
            return ToolCallResult(id=call.id, name=call.name,
                                  result=truncate(outcome.text, self._max_size(call.name)))
        code = outcome.result.error_code if outcome.result is not None else None
        if code == "tool_raised":
            message = outcome.text  # "ExceptionType: Error executing <tool>: ..."
        elif code == "timeout":
            message = f"TimeoutError: Error: Tool '{call.name}' timed out"
        else:
            message = f"{error_label(code)}: {outcome.text}"
        return ErrorResult(id=call.id, name=call.name, message=message)

    def _max_size(self, tool_name: str) -> int | None:
        own = self._tools[tool_name].metadata.max_result_size
        return own if own is not None else self._default_max_result_size

    def _current_door(self) -> _Door:
        tools = list(self._tools.values())
        door = self._door
        if door is None or len(door.tools) != len(tools) or any(
                a is not b for a, b in zip(door.tools, tools, strict=True)):
            door = self._door = _Door(tools)
        return door

    def build_tool_call_messages(self, tool_calls: Sequence[object], results: Sequence[Result],
                                 api_format: str = "openai-chat") -> list[JsonObject]:
        """The assistant's turn asking for ``tool_calls`` and the turn carrying ``results``,
        in ``api_format``, ready to append to the conversation."""
        fmt = canonical_format(api_format)
        door = self._current_door()
        calls = [read_call(c, door.names, i) for i, c in enumerate(tool_calls)][:len(results)]
        calls = [ToolCall(id=r.id, name=c.name, arguments=c.arguments, wire_name=c.wire_name,
                          raw_arguments=c.raw_arguments) for c, r in zip(calls, results, strict=True)]
        shown = [(str(r), isinstance(r, ErrorResult)) for r in results[:len(calls)]]
        return messages(fmt, calls, shown)

    def recover_tool_call_assistant_message(self, tool_calls: Sequence[object],
                                            results: Sequence[Result],
                                            api_format: str = "openai-chat") -> list[JsonObject]:
        warnings.warn("recover_tool_call_assistant_message() is deprecated, use "
                      "build_tool_call_messages() instead.", DeprecationWarning, stacklevel=2)
        return self.build_tool_call_messages(tool_calls, results, api_format)
