"""Behavioural and classification metadata of a tool."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["ToolMetadata"]


class ToolMetadata(BaseModel):
    """What the catalog, the exporters and the invoker need to know about a tool besides its schema.

    Frozen: derive a changed copy with ``metadata.model_copy(update={...})``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    is_async: bool = False
    """Whether the callable is a coroutine function (always detected, never trusted from input)."""
    is_concurrency_safe: bool = True
    """Whether several calls of this tool may run at the same time."""
    timeout: float | None = Field(default=None, gt=0)
    """Per-call timeout in seconds; ``None`` uses the invoker's policy."""
    inline: bool = False
    """A sync tool that never blocks may run on the event loop instead of a worker thread."""
    max_result_size: int | None = Field(default=None, gt=0)
    """Truncate results longer than this many characters when no artifact store is configured."""
    tags: frozenset[str] = frozenset()
    """Classification tags (``read_only``, ``network``, ``file_system``, ...)."""
    custom_tags: frozenset[str] = frozenset()
    """Free-form user tags."""
    think_augment: bool | None = None
    """Add a ``toolcall_reason`` argument to the exported schema (stripped before the call)."""
    defer_loading: bool = Field(default=False, alias="defer")
    """Leave the tool out of the initial tool list; it is found through ``tool_search``."""
    search_hint: str = ""
    """Extra keywords for search (synonyms, domain words)."""
    category: str | None = None
    """Category path such as ``data/visualization``."""
    aliases: tuple[str, ...] = ()
    """Other names the catalog resolves to this tool."""
    version: str | None = None
    title: str | None = None
    """Human-readable display name (MCP ``title``)."""
    unknown_arguments: Literal["reject", "ignore"] = "reject"
    """What to do with arguments the schema does not declare: reject the call or drop them."""
    read_only_hint: bool | None = None
    """MCP hint: the tool does not modify its environment."""
    destructive_hint: bool | None = None
    """MCP hint: the tool may perform destructive updates."""
    idempotent_hint: bool | None = None
    """MCP hint: repeating a call with the same arguments has no additional effect."""
    open_world_hint: bool | None = None
    """MCP hint: the tool interacts with an open world of external entities."""
    source: str = "native"
    """Where the tool came from (``native``, ``mcp``, ``openapi``, ...)."""
    source_detail: str = ""
    """More about where it came from: a server's address, a spec's URL, a class name."""
    locality: Literal["local", "remote", "any"] = "any"
    """Where it must run: ``local`` (the user's machine: files, a shell), ``remote`` (best served
    by a server, e.g. web search) or ``any``."""
    approval_ttl: float | Literal["never"] | None = None
    """How long a request to run this tool stays approvable (seconds, or ``"never"``: it waits
    for a person however long it takes); ``None``: the policy's. An operator's per-tool
    setting (``ChainPolicy.approval_ttl_tools``, ``[approval] ttl``) wins over it."""
    task_support: Literal["forbidden", "optional", "required"] = "forbidden"
    """MCP tasks: whether a call from a client that supports them becomes a task (answered at
    once with the task's id; the client polls it for the result): ``forbidden`` never,
    ``optional`` when the client supports tasks, ``required`` always (a client without them is
    refused, -32021)."""
    task_start: Literal["call", "tool"] = "call"
    """When a call becomes a task: as it arrives (``call``), or when the tool says so with
    ``ctx.as_task()`` (``tool``: until then it runs as a plain call, asking the client in
    input rounds)."""
    extra: dict[str, object] = Field(default_factory=dict)
    """Application-specific data. toolkeeper reads one key of its own: ``security_policy``,
    which the built-in file and shell tools set so the approval page can show a write as a
    diff against the workspace and a command with its sandbox. Never exported to a provider."""

    @field_validator("approval_ttl")
    @classmethod
    def _positive_ttl(cls, value: float | str | None) -> float | str | None:
        if isinstance(value, float | int) and value <= 0:
            raise ValueError("approval_ttl must be a number of seconds above 0, or 'never'")
        return value

    @field_validator("tags", "custom_tags", mode="before")
    @classmethod
    def _str_set(cls, value: object) -> object:
        if isinstance(value, str):
            return frozenset({value})
        if value is None:
            return frozenset()
        if not isinstance(value, Iterable):
            return value  # pydantic says what is wrong with it
        return frozenset(str(v.value if isinstance(v, Enum) else v) for v in value)

    @field_validator("aliases", mode="before")
    @classmethod
    def _str_tuple(cls, value: object) -> object:
        if isinstance(value, str):
            return (value,)
        if value is None:
            return ()
        return tuple(value) if isinstance(value, Iterable) else value

    @property
    def all_tags(self) -> frozenset[str]:
        """``tags`` and ``custom_tags`` together."""
        return self.tags | self.custom_tags

    def mcp_annotations(self) -> dict[str, str | bool]:
        """The MCP ``ToolAnnotations`` object for the hints that are set."""
        pairs = {
            "title": self.title,
            "readOnlyHint": self.read_only_hint,
            "destructiveHint": self.destructive_hint,
            "idempotentHint": self.idempotent_hint,
            "openWorldHint": self.open_world_hint,
        }
        return {key: value for key, value in pairs.items() if value is not None}


DEFAULT_METADATA = ToolMetadata()
