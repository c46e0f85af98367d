"""What toolregistry's registry returns for a call: ``ToolCallResult`` (the value as text),
``ErrorResult`` (``"ExceptionType: detail"``) and ``ResultList`` (a list also indexed by call
id); the value's text as toolregistry writes it; and the cut of a result over its size."""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import SupportsIndex, cast, overload
from uuid import UUID

from pydantic_core import PydanticSerializationError, to_jsonable_python

from ...core.results import ToolResult, to_tool_result

__all__ = ["ErrorResult", "ResultList", "ToolCallResult", "encode_result", "error_label",
           "running_encoded", "truncate"]

_PLAIN = (str, Path, Decimal, UUID, date, time)
_LABELS = {"unknown_tool": "KeyError", "disabled": "RuntimeError", "denied": "PermissionError",
           "timeout": "TimeoutError", "invalid_arguments": "ValueError",
           "malformed_call": "ValueError", "policy_violation": "PermissionError"}


@dataclass(frozen=True)
class BaseResult:
    """The call id and the tool's name."""

    id: str
    name: str


@dataclass(frozen=True)
class ToolCallResult(BaseResult):
    """A call that succeeded: ``result`` is the tool's value as text."""

    result: str | list[object] = ""

    def __str__(self) -> str:
        return str(self.result)


@dataclass(frozen=True)
class ErrorResult(BaseResult):
    """A call that failed: ``message`` is ``"ExceptionType: detail"``."""

    message: str = ""

    def __str__(self) -> str:
        return self.message


class ResultList(list[ToolCallResult | ErrorResult]):
    """The results in call order; ``results["call_1"]`` and ``"call_1" in results`` look one
    up by call id."""

    def __init__(self, items: list[ToolCallResult | ErrorResult] | None = None) -> None:
        super().__init__(items or [])
        self._index = {r.id: i for i, r in enumerate(self)}

    def by_id(self, call_id: str) -> ToolCallResult | ErrorResult:
        """The result of one call.

        Raises:
            KeyError: no result has this id.
        """
        index = self._index.get(call_id)
        if index is None:
            raise KeyError(f"No result for tool call ID: {call_id!r}")
        return list.__getitem__(self, index)

    @overload
    def __getitem__(self, key: str) -> ToolCallResult | ErrorResult: ...
    @overload
    def __getitem__(self, key: SupportsIndex) -> ToolCallResult | ErrorResult: ...
    @overload
    def __getitem__(self, key: slice) -> list[ToolCallResult | ErrorResult]: ...

    def __getitem__(self, key: str | SupportsIndex | slice
                    ) -> ToolCallResult | ErrorResult | list[ToolCallResult | ErrorResult]:
        if isinstance(key, str):
            return self.by_id(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            return key in self._index
        return super().__contains__(key)


def encode_result(value: object, tool_name: str = "") -> str:
    """A tool's value as toolregistry sends it: a string as it is, a path, decimal, UUID, date
    or time as ``str()``, an enum as its value's JSON, anything else as JSON (dataclasses,
    pydantic models, objects with ``to_dict``/``tolist``, bytes in base64).

    Raises:
        TypeError: the value has no JSON form (the message names the tool and the type).
    """
    if isinstance(value, Enum):
        return json.dumps(to_jsonable_python(value.value, fallback=_fallback))
    if isinstance(value, _PLAIN) and not isinstance(value, datetime):
        return str(value)
    try:
        return json.dumps(to_jsonable_python(value, fallback=_fallback, bytes_mode="base64"))
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        raise TypeError(f"Tool {tool_name!r} returned a value that cannot be encoded to JSON "
                        f"({exc}). Add a to_dict() or model_dump() method to the returned type, "
                        "expose tolist(), or return a str.") from exc


def _fallback(value: object) -> object:
    for attr in ("model_dump", "to_dict", "dict", "tolist"):
        method = getattr(value, attr, None)
        if callable(method):
            return method()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def truncate(text: str, max_size: int | None) -> str:
    """``text`` cut to ``max_size`` characters, head and tail kept around a marker, under a
    header saying how long it was."""
    if max_size is None or len(text) <= max_size:
        return text
    marker = f"\n... (truncated {len(text) - max_size} chars) ...\n"
    available = max_size - len(marker)
    if available <= 0:
        content = text[:max_size]
    else:
        head = available // 2
        content = text[:head] + marker + text[len(text) - (available - head):]
    return f"[Truncated: {len(text)} chars -> {len(content)} chars]\n{content}"


def error_label(code: str | None) -> str:
    """The exception name toolregistry puts before a refusal of this kind."""
    return _LABELS.get(code or "", "RuntimeError")


def running_encoded(func: Callable[..., object], tool_name: str, is_async: bool
                    ) -> Callable[..., object]:
    """``func`` answering with its value's text as toolregistry writes it, or with
    ``"ExceptionType: Error executing <tool>: <detail>"`` when it raises."""
    if is_async:
        @functools.wraps(func)
        async def call_async(*args: object, **kwargs: object) -> ToolResult:
            try:
                made = cast(Awaitable[object], func(*args, **kwargs))  # an async function's
                return _text(encode_result(await made, tool_name))
            except Exception as exc:
                return _failed(exc, tool_name)
        return call_async

    @functools.wraps(func)
    def call(*args: object, **kwargs: object) -> ToolResult:
        try:
            return _text(encode_result(func(*args, **kwargs), tool_name))
        except Exception as exc:
            return _failed(exc, tool_name)
    return call


def _text(text: str) -> ToolResult:
    return to_tool_result(text)


def _failed(exc: Exception, tool_name: str) -> ToolResult:
    return ToolResult.error(f"{type(exc).__qualname__}: Error executing {tool_name}: {exc}")
