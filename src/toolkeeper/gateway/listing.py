"""An upstream's tool listing, checked tool by tool before the SDK's client reads it.

The SDK's client validates a ``tools/list`` page whole: one tool whose declaration is not one
(an input schema ``{"type": "objekt", "properties": 5}``) failed the page, so the connection,
so every tool of that upstream, with a line naming none of them. ``ToolListCheck`` sits on the
connection's transport: it notes the ids of the ``tools/list`` requests going out and, in
their answers, drops each tool that the negotiated revision's result or the ``Tool`` model
refuses, keeping why in ``refused`` (its name → the reason) for the gateway's report; the rest
of the page reaches the client as sent."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from .untrusted import shown_name

__all__ = ["ToolListCheck", "Watched"]

DEFAULT_VERSION = "2025-11-25"


class ToolListCheck:
    """The check on one upstream's connections (see the module's doc)."""

    def __init__(self) -> None:
        self.refused: dict[str, str] = {}
        """Tools the last listings left out → why (cleared by the caller as a listing starts)."""
        self._asked: set[Any] = set()
        self._version = DEFAULT_VERSION

    def sent(self, item: Any) -> None:
        """A message going to the upstream (a ``SessionMessage``)."""
        message = getattr(item, "message", None)
        if getattr(message, "method", None) == "tools/list":
            self._asked.add(getattr(message, "id", None))

    def received(self, item: Any) -> Any:
        """A message from the upstream (a ``SessionMessage`` or an exception), checked."""
        import mcp_types as types

        message = getattr(item, "message", None)
        if not isinstance(message, types.JSONRPCResponse) or not isinstance(message.result,
                                                                              dict):
            return item
        result = message.result
        if isinstance(result.get("protocolVersion"), str) and "serverInfo" in result:
            self._version = result["protocolVersion"]
        if message.id not in self._asked:
            return item
        self._asked.discard(message.id)
        tools = result.get("tools")
        if not isinstance(tools, list):
            return item
        kept = [tool for tool in tools if self._valid(tool)]
        if len(kept) == len(tools):
            return item
        return type(item)(message.model_copy(update={"result": {**result, "tools": kept}}),
                          metadata=getattr(item, "metadata", None))

    def _valid(self, tool: Any) -> bool:
        import mcp_types as types
        from mcp_types import methods

        try:
            try:
                methods.validate_server_result("tools/list", self._version, {"tools": [tool]})
            except (KeyError, ValueError) as exc:
                if isinstance(exc, ValidationError):
                    raise
            types.Tool.model_validate(tool, by_name=False)
        except ValidationError as exc:
            name = tool.get("name") if isinstance(tool, dict) else None
            self.refused[shown_name(name) if isinstance(name, str) else "(unnamed)"] = \
                _reason(exc)
            return False
        return True


def _reason(exc: ValidationError) -> str:
    """The first of ``exc``'s errors, where and what, and how many there were."""
    errors = exc.errors()
    first = errors[0]
    loc = list(first["loc"])
    where = ".".join(str(p) for p in (loc[2:] if loc[:1] == ["tools"] else loc)) or "the tool"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return shown_name(f"{where}: {first['msg']}{more}")


class Watched:
    """A transport's write stream whose messages ``check`` sees on their way out."""

    def __init__(self, inner: Any, check: ToolListCheck) -> None:
        self._inner = inner
        self._check = check

    async def send(self, item: Any) -> None:
        self._check.sent(item)
        await self._inner.send(item)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def __aenter__(self) -> Watched:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)
