"""A zoo of tools with the schema shapes that trip exporters."""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from toolkeeper import Tool, ToolMetadata


class Priority(IntEnum):
    LOW = 1
    HIGH = 2


class Mode(str, Enum):
    FAST = "fast"
    SAFE = "safe"


class Address(BaseModel):
    street: str
    city: str = Field(description="City name.")
    zip_code: str | None = Field(default=None, pattern=r"^\d{5}$")


class TreeNode(BaseModel):
    label: str
    children: list[TreeNode] = []


def simple(query: str, limit: int = 5) -> list[str]:
    """Search things.

    Args:
        query: Words to look for.
        limit: At most this many.
    """
    return [query] * limit


def nested(address: Address, tags: list[str] | None = None, mode: Mode = Mode.FAST,
           priority: Priority = Priority.LOW, kind: Literal["home", "work"] = "home") -> str:
    """Store an address."""
    return address.city


def constrained(count: int = Field(default=1, ge=1, le=10), ratio: float = Field(0.5, gt=0),
                email: str = Field(default="", json_schema_extra={"format": "email"})) -> int:
    """Numbers with limits."""
    return count


def open_map(labels: dict[str, int], anything: Any = None) -> int:
    """A free-form map."""
    return len(labels)


def recursive(tree: TreeNode) -> int:
    """Count a tree."""
    return 1 + sum(recursive(c) for c in tree.children)


def no_args() -> str:
    """Takes nothing."""
    return "ok"


RAW = Tool(
    name="weird.name/with spaces and a very long tail that goes on and on and on past sixty-four",
    description="Raw schema tool with a hostile name",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    callable=lambda q: q,
    metadata=ToolMetadata(title="Weird", read_only_hint=True),
)


def zoo() -> list[Tool]:
    return [Tool.from_function(f) for f in (simple, nested, constrained, open_map, recursive,
                                            no_args)] + [RAW]
