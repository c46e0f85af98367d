"""Built-in guardrails: argument deny-patterns, argument size limits, secret redaction, rate limits."""

from __future__ import annotations

import fnmatch
import re
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ..core.results import FileBlock, TextBlock, ToolResult, dump_json
from .base import GuardrailOutcome, passed, redact, trip

if TYPE_CHECKING:
    from ..core.spec import ToolLike

__all__ = ["ArgumentDenyPatterns", "ArgumentSizeLimit", "RateLimit", "SecretRedactor"]


def _strings(value: object, path: str = "") -> Iterable[tuple[str, str]]:
    if isinstance(value, str):
        yield path or "(value)", value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


class _NoOutput:
    async def check_output(self, tool: ToolLike, result: ToolResult) -> GuardrailOutcome:
        return passed()


class _NoInput:
    async def check_input(self, tool: ToolLike, arguments: dict[str, object]
                          ) -> GuardrailOutcome:
        return passed()


class ArgumentDenyPatterns(_NoOutput):
    """Trips when a string argument matches a regex, for tools whose names match a glob."""

    def __init__(self, patterns: Mapping[str, Iterable[str]], *, name: str = "deny_patterns") -> None:
        self.name = name
        self.rules = [(glob, [re.compile(p) for p in regexes]) for glob, regexes in patterns.items()]

    async def check_input(self, tool: ToolLike, arguments: dict[str, object]
                          ) -> GuardrailOutcome:
        for glob, regexes in self.rules:
            if not fnmatch.fnmatchcase(tool.name, glob):
                continue
            for path, text in _strings(arguments):
                for regex in regexes:
                    if regex.search(text):
                        return trip(f"argument '{path}' matches the denied pattern "
                                    f"{regex.pattern!r}")
        return passed()


class ArgumentSizeLimit(_NoOutput):
    """Trips when the arguments, as JSON, exceed a size."""

    def __init__(self, max_bytes: int = 100_000, *, name: str = "argument_size") -> None:
        self.name = name
        self.max_bytes = max_bytes

    async def check_input(self, tool: ToolLike, arguments: dict[str, object]
                          ) -> GuardrailOutcome:
        size = len(dump_json(arguments).encode("utf-8"))
        if size > self.max_bytes:
            return trip(f"arguments are {size} bytes, more than the limit of {self.max_bytes}; "
                        "pass large data as an artifact reference")
        return passed()


_SECRETS = (
    r"sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,}",
    r"AKIA[0-9A-Z]{16}",
    r"gh[pousr]_[A-Za-z0-9]{36,}",
    r"xox[abpors]-[A-Za-z0-9-]{10,}",
    r"AIza[0-9A-Za-z\-_]{35}",
    r"-----BEGIN (?:RSA |EC |OPENSSH |DSA )?PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    r"\b[Bb]earer\s+[A-Za-z0-9\-._~+/]{20,}=*",
)


class SecretRedactor(_NoInput):
    """Masks API keys, tokens and private keys in tool output before the model sees it."""

    def __init__(self, extra_patterns: Iterable[str] = (), *, name: str = "secret_redaction",
                 mask: str = "[REDACTED]") -> None:
        self.name = name
        self.mask = mask
        self.pattern = re.compile("|".join([*_SECRETS, *extra_patterns]))

    async def check_output(self, tool: ToolLike, result: ToolResult) -> GuardrailOutcome:
        changed = False
        blocks = []
        for block in result.content:
            if isinstance(block, TextBlock) and self.pattern.search(block.text):
                block = TextBlock(text=self.pattern.sub(self.mask, block.text))
                changed = True
            elif isinstance(block, FileBlock) and block.text and self.pattern.search(block.text):
                block = block.model_copy(update={"text": self.pattern.sub(self.mask, block.text)})
                changed = True
            blocks.append(block)
        structured = result.structured_content
        if structured is not None and self.pattern.search(dump_json(structured)):
            structured = None
            changed = True
        if not changed:
            return passed()
        return redact(result.model_copy(update={"content": tuple(blocks),
                                                "structured_content": structured}),
                      "secrets masked")


class RateLimit(_NoOutput):
    """Trips when a tool (name glob) is called more than ``calls`` times within ``per_s``."""

    def __init__(self, calls: int, per_s: float, *, tools: str = "*", name: str = "rate_limit") -> None:
        self.name = name
        self.calls = calls
        self.per_s = per_s
        self.tools = tools
        self._times: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    async def check_input(self, tool: ToolLike, arguments: dict[str, object]
                          ) -> GuardrailOutcome:
        if not fnmatch.fnmatchcase(tool.name, self.tools):
            return passed()
        now = time.monotonic()
        with self._lock:
            window = self._times.setdefault(tool.name, deque())
            while window and window[0] <= now - self.per_s:
                window.popleft()
            if len(window) >= self.calls:
                wait = self.per_s - (now - window[0])
                return trip(f"tool '{tool.name}' was called {self.calls} times in the last "
                            f"{self.per_s:g} s; try again in {wait:.1f} s")
            window.append(now)
        return passed()
