"""``ToolTag`` and ``ToolMetadata`` as toolregistry defines them (a frozen dataclass whose tags are
sets), and the toolkeeper ``ToolMetadata`` each one stands for."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, Literal

from ...core.metadata import ToolMetadata as CoreMetadata

__all__ = ["ToolMetadata", "ToolTag", "core_metadata"]

_HINTS = ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint")


class ToolTag(str, Enum):  # noqa: UP042 - str() and format() as toolregistry gives them
    """Predefined tags; each equals its string (``ToolTag.READ_ONLY == "read_only"``)."""

    READ_ONLY = "read_only"
    DESTRUCTIVE = "destructive"
    NETWORK = "network"
    FILE_SYSTEM = "file_system"
    SLOW = "slow"
    PRIVILEGED = "privileged"


@dataclass(frozen=True)
class ToolMetadata:
    """Behaviour and classification of a tool, field for field as toolregistry documents it.

    Frozen (``dataclasses.replace`` or ``model_copy(update=...)`` derive a copy) and unhashable.
    ``max_result_size`` applies when the registry runs a call (``execute_tool_calls``,
    ``invoke``); ``natural_backend`` is kept but calls run where toolkeeper's invoker runs them.
    """

    is_async: bool = False
    is_concurrency_safe: bool = True
    timeout: float | None = None
    locality: Literal["local", "remote", "any"] = "any"
    max_result_size: int | None = None
    tags: set[ToolTag] = field(default_factory=set)
    custom_tags: set[str] = field(default_factory=set)
    source: str = "native"
    source_detail: str = ""
    schema_hash: str = ""
    last_refreshed_at: str = ""
    extra: dict[str, object] = field(default_factory=dict)
    defer: bool = False
    search_hint: str = ""
    think_augment: bool | None = None
    natural_backend: Literal["inline", "thread", "process"] | None = None
    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None

    __hash__: ClassVar[None] = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.locality not in ("local", "remote", "any"):
            raise ValueError(f"Invalid locality {self.locality!r}, must be one of "
                             "{'local', 'remote', 'any'}")
        if self.natural_backend not in ("inline", "thread", "process", None):
            raise ValueError(f"Invalid natural_backend {self.natural_backend!r}, must be one "
                             "of {'inline', 'thread', 'process', None}")
        for name in _HINTS:
            if getattr(self, name) not in (True, False, None):
                raise TypeError(f"{name} must be True, False or None, got "
                                f"{getattr(self, name)!r}")
        hints = self.execution_hints
        if hints.get("read_only_hint") and hints.get("destructive_hint"):
            warnings.warn("ToolMetadata resolves both read_only_hint=True and "
                          "destructive_hint=True; a host that trusts readOnlyHint to skip a "
                          "confirmation may skip it for a destructive tool.", UserWarning,
                          stacklevel=3)

    @property
    def all_tags(self) -> set[str]:
        """Predefined and custom tags, as strings."""
        return {t.value if isinstance(t, Enum) else str(t) for t in self.tags} | set(
            self.custom_tags)

    @property
    def execution_hints(self) -> dict[str, bool]:
        """The hints that are determined: set explicitly, or read from the tags
        (``READ_ONLY`` → read-only and, unless marked otherwise, not destructive;
        ``DESTRUCTIVE`` → destructive)."""
        read_only = self.read_only_hint
        if read_only is None and ToolTag.READ_ONLY in self.tags:
            read_only = True
        destructive = self.destructive_hint
        if destructive is None and ToolTag.DESTRUCTIVE in self.tags:
            destructive = True
        if destructive is None and read_only:
            destructive = False
        values = {"read_only_hint": read_only, "destructive_hint": destructive,
                  "idempotent_hint": self.idempotent_hint,
                  "open_world_hint": self.open_world_hint}
        return {name: value for name, value in values.items() if value is not None}

    def model_dump(self) -> dict[str, object]:
        """The fields as a dict."""
        return dataclasses.asdict(self)

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> ToolMetadata:
        """A copy with some fields changed (``update`` as pydantic's ``model_copy`` takes it)."""
        return dataclasses.replace(self, **(update or {}))


def core_metadata(meta: ToolMetadata) -> CoreMetadata:
    """The toolkeeper metadata ``meta`` stands for. Arguments the schema does not declare are
    dropped, not refused, as toolregistry's validation drops them."""
    hints = meta.execution_hints
    return CoreMetadata(
        is_async=meta.is_async, is_concurrency_safe=meta.is_concurrency_safe,
        timeout=meta.timeout if meta.timeout and meta.timeout > 0 else None,
        max_result_size=meta.max_result_size if meta.max_result_size else None,
        tags=meta.tags, custom_tags=meta.custom_tags, think_augment=meta.think_augment,
        defer_loading=meta.defer, search_hint=meta.search_hint, title=meta.title,
        source=meta.source, source_detail=meta.source_detail, locality=meta.locality,
        unknown_arguments="ignore", extra=dict(meta.extra), **hints,
    )
