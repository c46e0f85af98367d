"""``semantic_code_search``: ranked code chunks instead of raw matching lines.

Code files are cut into chunks of lines and indexed with the catalog's search machinery (BM25
over identifiers split into words; embeddings when the ``semantic`` extra is installed). A query
with no indexed hit falls back to a literal content search.
"""

from __future__ import annotations

import os

from ..core.metadata import ToolMetadata
from ..core.risk import ToolRisk
from ..toolbox.search import SearchDoc, SearchIndex, SearchOptions, SemanticScorer
from ..tools.tool import Tool
from .fs import Workspace
from .policy import SecurityPolicy
from .reading import read_text_or_none
from .search import _open_dir, _walk

__all__ = ["code_search_tool"]

CODE_SUFFIXES = (".py", ".js", ".ts", ".tsx", ".jsx", ".go", ".rs", ".java", ".kt", ".c", ".h",
                 ".cpp", ".hpp", ".cs", ".rb", ".php", ".swift", ".scala", ".sh", ".sql", ".md",
                 ".toml", ".yaml", ".yml", ".json")
CHUNK_LINES = 40
MAX_FILES = 5000


def _chunks(ws: Workspace, policy: SecurityPolicy) -> dict[str, tuple[str, str]]:
    """chunk id → (location "path:start-end", text)."""
    dirfd = _open_dir(ws, ".", "semantic_code_search", policy)
    out: dict[str, tuple[str, str]] = {}
    files = 0
    try:
        for base, fd, name, regular in _walk(dirfd, policy):
            rel = f"{base}/{name}" if base else name
            if not regular or not name.endswith(CODE_SUFFIXES):
                continue
            files += 1
            if files > MAX_FILES:
                break
            data = read_text_or_none(ws, name, policy, "semantic_code_search", dirfd=fd,
                                     max_bytes=1 << 20)
            if data is None:
                continue
            lines = data.decode("utf-8", "replace").splitlines()
            for start in range(0, len(lines), CHUNK_LINES):
                text = "\n".join(lines[start:start + CHUNK_LINES])
                if text.strip():
                    end = min(len(lines), start + CHUNK_LINES)
                    out[f"{rel}#{start}"] = (f"{rel}:{start + 1}-{end}", text)
    finally:
        os.close(dirfd)
    return out


def code_search_tool(policy: SecurityPolicy, *, semantic: SemanticScorer | None = None) -> Tool:
    """The ``semantic_code_search`` tool; pass an ``EmbeddingScorer`` to add embeddings (off
    by default: a workspace's code is read anew at each call, too much to embed every time)."""
    ws = Workspace(policy.workspace)

    def semantic_code_search(query: str, limit: int = 5) -> str:
        """Find the code most relevant to a question ("where are tokens refreshed?").

        Returns ranked chunks with their file and line range.

        Args:
            query: What you are looking for, in words or identifiers.
            limit: How many chunks to return.
        """
        chunks = _chunks(ws, policy)
        index = SearchIndex(SearchOptions(semantic=semantic))
        for key, (location, text) in chunks.items():
            index.upsert(key, SearchDoc(name=location.split(":")[0], description=text))
        hits = index.search(query, limit=limit)
        if not hits:
            return _literal(chunks, query, limit)
        parts = []
        for key, score, _ in hits:
            location, text = chunks[key]
            preview = "\n".join(text.splitlines()[:12])
            parts.append(f"## {location} (score {score:.2f})\n{preview}")
        return "\n\n".join(parts)

    return Tool.from_function(semantic_code_search, risk=ToolRisk.SAFE, metadata=ToolMetadata(
        read_only_hint=True, category="development", tags=frozenset({"file_system"})))


def _literal(chunks: dict[str, tuple[str, str]], query: str, limit: int) -> str:
    needle = query.lower()
    found = [f"## {loc}\n" + "\n".join(t.splitlines()[:12]) for loc, t in chunks.values()
             if needle in t.lower()]
    return "\n\n".join(found[:limit]) if found else "no code matches"
