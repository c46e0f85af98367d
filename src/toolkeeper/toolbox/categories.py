"""Category paths: a tree where ``data/visualization`` lies under ``data``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["BUILTIN_CATEGORIES", "CategoryNode", "CategoryTree", "normalize_category"]

BUILTIN_CATEGORIES: tuple[str, ...] = (
    "system", "communication", "data", "data/visualization", "data/exploration",
    "data/management", "development", "development/execution", "development/project",
    "research", "creative", "media", "productivity",
)


def normalize_category(path: str) -> str:
    """``" Data / Visualization/ "`` → ``"data/visualization"``."""
    parts = [" ".join(part.split()).lower() for part in path.split("/")]
    return "/".join(part for part in parts if part)


@dataclass(frozen=True, kw_only=True)
class CategoryNode:
    """One category of the tree: its ``path`` (``"data/visualization"``), its
    last ``name`` (``"visualization"``), its sub-categories and the tools filed directly in it.
    The root has the empty path."""

    path: str
    children: tuple[CategoryNode, ...] = ()
    tools: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def find(self, path: str) -> CategoryNode | None:
        """The node at ``path`` under this one, or ``None``."""
        path = normalize_category(path)
        if path == self.path:
            return self
        for child in self.children:
            if path == child.path or path.startswith(child.path + "/"):
                return child.find(path)
        return None

    def walk(self) -> list[CategoryNode]:
        """This node and every node under it, depth first."""
        return [self, *(node for child in self.children for node in child.walk())]


class CategoryTree:
    """The known category paths; adding a path adds its parents."""

    def __init__(self, paths: Iterable[str] = BUILTIN_CATEGORIES) -> None:
        self._paths: set[str] = set()
        for path in paths:
            self.add(path)

    def add(self, path: str) -> str:
        """Register a path (and its parents); returns the normalized path."""
        norm = normalize_category(path)
        parts = norm.split("/")
        for depth in range(1, len(parts) + 1):
            self._paths.add("/".join(parts[:depth]))
        return norm

    @staticmethod
    def contains(root: str, path: str | None) -> bool:
        """Whether ``path`` is ``root`` or lies under it."""
        if path is None:
            return False
        root = normalize_category(root)
        return path == root or path.startswith(root + "/")

    def children(self, root: str = "") -> list[str]:
        """Direct children of ``root`` (top-level categories for ``""``)."""
        root = normalize_category(root)
        depth = 0 if not root else root.count("/") + 1
        return sorted(p for p in self._paths
                      if p.count("/") == depth and (not root or p.startswith(root + "/")))

    def node(self, root: str = "", tools: Mapping[str, Sequence[str]] | None = None
             ) -> CategoryNode:
        """``root`` and everything under it as ``CategoryNode``s; ``tools`` maps a path to the
        names filed in it."""
        root = normalize_category(root)
        filed = tools or {}
        return CategoryNode(path=root, tools=tuple(filed.get(root, ())),
                            children=tuple(self.node(child, filed)
                                           for child in self.children(root)))

    def paths(self) -> list[str]:
        return sorted(self._paths)

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and normalize_category(path) in self._paths
