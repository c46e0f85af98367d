"""Category paths: a tree where ``data/visualization`` lies under ``data``."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["BUILTIN_CATEGORIES", "CategoryTree", "normalize_category"]

BUILTIN_CATEGORIES: tuple[str, ...] = (
    "system", "communication", "data", "data/visualization", "data/exploration",
    "data/management", "development", "development/execution", "development/project",
    "research", "creative", "media", "productivity",
)


def normalize_category(path: str) -> str:
    """``" Data / Visualization/ "`` → ``"data/visualization"``."""
    parts = [" ".join(part.split()).lower() for part in path.split("/")]
    return "/".join(part for part in parts if part)


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

    def paths(self) -> list[str]:
        return sorted(self._paths)

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and normalize_category(path) in self._paths
