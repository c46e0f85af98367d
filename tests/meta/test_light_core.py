"""The core install is light: ``pip install toolkeeper`` brings pydantic, anyio and two small
packages, and everything else is an extra that is imported only when it is used.

Three checks, strictest last:
- the import graph: what ``toolkeeper`` (and the ``toolkeeper`` command) import when a module
  is loaded reaches no package outside the core (and ``cli``);
- ``extras.py`` names the same packages as pyproject.toml's extras;
- a real interpreter whose ``site-packages`` holds only the core distributions (resolved from
  pyproject.toml's dependencies, their files linked from this environment) defines, exports,
  parses, validates and invokes tools with a SQLite store, and imports nothing optional; the
  command there says in one line which extra to install.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from toolkeeper.extras import DEVELOPMENT, EXTRAS

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
OPTIONAL = {module for modules in EXTRAS.values() for module in modules}


def _requirement_name(requirement: str) -> str:
    return Requirement(requirement).name.lower().replace("_", "-")


def _top_level(dist: metadata.Distribution) -> set[str]:
    """The importable top-level names a distribution installs."""
    names = set()
    for file in dist.files or ():
        first = file.parts[0]
        if first.endswith((".dist-info", ".data")) or first in ("..", "__pycache__"):
            continue
        names.add(first.removesuffix(".py").split(".")[0] if len(file.parts) == 1 else first)
    return names


def _closure(requirements: list[str]) -> dict[str, metadata.Distribution]:
    """The distributions ``requirements`` install here, their own (unconditional) ones too."""
    found: dict[str, metadata.Distribution] = {}
    todo = [_requirement_name(r) for r in requirements]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found[name] = dist = metadata.distribution(name)
        for requirement in map(Requirement, dist.requires or ()):
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name.lower().replace("_", "-"))
    return found


CORE_DISTS = _closure(PYPROJECT["project"]["dependencies"])
CORE_MODULES = {name for dist in CORE_DISTS.values() for name in _top_level(dist)}


def _module_path(module: str) -> Path | None:
    base = SRC.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def _load_time_imports(module: str) -> tuple[set[str], set[str]]:
    """(own modules, foreign top-level packages) that loading ``module`` imports: module-level
    imports only (not inside functions, not under ``if TYPE_CHECKING``)."""
    path = _module_path(module)
    assert path is not None, module
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    own: set[str] = set()
    foreign: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    (own if alias.name.startswith("toolkeeper") else foreign).add(alias.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1])
                    target = f"{base}.{node.module}" if node.module else base
                else:
                    target = node.module or ""
                if target.startswith("toolkeeper"):
                    own.add(target)
                    own.update(f"{target}.{a.name}" for a in node.names
                               if _module_path(f"{target}.{a.name}"))
                else:
                    foreign.add(target)
            elif isinstance(node, ast.If | ast.Try | ast.With):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    return own, {name.split(".")[0] for name in foreign}


def _reached(start: str, seen: set[str] | None = None) -> dict[str, set[str]]:
    """Every foreign package loading ``start`` imports, with the modules that import it
    (``seen``: filled with toolkeeper's own modules it loads)."""
    seen = set() if seen is None else seen
    todo = [start]
    out: dict[str, set[str]] = {}
    while todo:
        module = todo.pop()
        if module in seen or _module_path(module) is None:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:n]) for n in range(1, len(parts))]  # packages run first
        own, foreign = _load_time_imports(module)
        todo += own
        for name in foreign:
            out.setdefault(name, set()).add(module)
    return out


def _outside(reached: dict[str, set[str]], allowed: set[str]) -> dict[str, set[str]]:
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    return {name: where for name, where in reached.items()
            if name not in stdlib and name not in allowed}


def test_importing_toolkeeper_loads_only_the_core_packages() -> None:
    assert _outside(_reached("toolkeeper"), CORE_MODULES) == {}


def test_the_command_loads_only_the_core_and_the_cli_extra() -> None:
    assert _outside(_reached("toolkeeper.cli.entry"), CORE_MODULES | set(EXTRAS["cli"])) == {}


@pytest.mark.parametrize("start", ["toolkeeper", "toolkeeper.cli.entry"])
def test_the_mcp_face_is_not_on_the_core_import_path(start: str) -> None:
    """The MCP face imports the SDK at module level: neither the package nor the command's
    start may load it (``toolkeeper serve`` loads it when it builds the server)."""
    seen: set[str] = set()
    _reached(start, seen)
    assert sorted(m for m in seen if m.startswith(("toolkeeper.mcp", "toolkeeper.server.app",
                                                   "toolkeeper.server.exchange"))) == []


def test_what_make_run_installs_is_every_package_serve_loads() -> None:
    """``make run`` installs the extras its recipe names (not every extra, as the tests' venv
    has): what ``serve`` loads at module level must be among them, or a fresh machine's
    ``make run`` stops on an ImportError."""
    recipe = re.search(r'install -e "\.\[([a-z,-]+)\]"',
                       (ROOT / "Makefile").read_text().split("/.serve:", 1)[1])
    assert recipe is not None, "the Makefile's .serve recipe installs no extras"
    declared = PYPROJECT["project"]["optional-dependencies"]
    installed = _closure([r for extra in recipe.group(1).split(",") for r in declared[extra]
                          if not r.startswith("toolkeeper[")])
    allowed = CORE_MODULES | {name for dist in installed.values() for name in _top_level(dist)}
    assert _outside(_reached("toolkeeper.cli.serve_run"), allowed) == {}


def test_the_core_is_pydantic_anyio_and_at_most_a_few_small_packages() -> None:
    direct = {_requirement_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert {"pydantic", "anyio"} <= direct
    # typing-extensions is named for a lower bound only: pydantic requires it already
    assert len(direct - {"typing-extensions"}) <= 5
    assert not OPTIONAL & CORE_MODULES


def test_extras_py_and_pyproject_name_the_same_packages() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        installed = {name for dist in _closure([r for r in extras[extra]
                                                if not r.startswith("toolkeeper[")]).values()
                     for name in _top_level(dist)}
        assert set(modules) <= installed, f"[{extra}] does not install {set(modules) - installed}"
    everything = set(re.findall(r"[\w-]+", extras["all"][0].partition("[")[2]))
    assert set(EXTRAS) - DEVELOPMENT <= everything, "[all] leaves out an extra"
    assert not DEVELOPMENT & everything, "[all] brings a test suite's packages"


def _core_site(tmp_path: Path, extras: tuple[str, ...] = ()) -> Path:
    """A directory holding only toolkeeper and the core distributions, and those of
    ``extras`` (links to this environment's files)."""
    site = tmp_path / "site"
    site.mkdir(parents=True)
    (site / "toolkeeper").symlink_to(SRC / "toolkeeper")
    wanted = PYPROJECT["project"]["dependencies"] + [
        r for extra in extras for r in PYPROJECT["project"]["optional-dependencies"][extra]]
    for dist in _closure(wanted).values():
        for name in _top_level(dist):
            for candidate in (Path(str(dist.locate_file(name))),
                              Path(str(dist.locate_file(name + ".py")))):
                if candidate.exists() and not (site / candidate.name).exists():
                    (site / candidate.name).symlink_to(candidate)
        for info in {f.parts[0] for f in dist.files or () if f.parts[0].endswith(".dist-info")}:
            found = Path(str(dist.locate_file(info)))  # its metadata: version() reads it
            if found.exists() and not (site / info).exists():
                (site / info).symlink_to(found)
        for lib in Path(str(dist.locate_file(""))).glob(f"{dist.metadata['Name'].replace('-', '_')}"
                                                         ".libs"):
            if not (site / lib.name).exists():
                (site / lib.name).symlink_to(lib)
    return site


def _core_python(tmp_path: Path, code: str, *args: str,
                 extras: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in an isolated interpreter (-I: no user site, no PYTHON* variables, no
    current directory) whose path is the standard library and the core site only."""
    site = _core_site(tmp_path, extras)
    boot = (f"import sys; sys.path[:] = [p for p in sys.path if 'site-packages' not in p] "
            f"+ [{str(site)!r}]; sys.argv[1:] = {list(args)!r}\n")
    return subprocess.run([sys.executable, "-I", "-S", "-c", boot + code], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)


CORE_FLOW = """
import asyncio, json, sys
import toolkeeper as tk

@tk.tool
def add(a: int, b: int) -> int:
    '''Add two integers.

    Args:
        a: The first.
        b: The second.
    '''
    return a + b

raw = tk.Tool(name="greet", description="Greet someone",
              parameters={"type": "object", "properties": {"who": {"type": "string"}},
                          "required": ["who"]}, callable=lambda who: f"hello {who}")
box = tk.Toolbox([add, raw])
for fmt in tk.API_FORMATS:
    assert box.schemas(fmt), fmt
response = {"choices": [{"message": {"tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": "3"}'}},
    {"id": "c2", "type": "function", "function": {"name": "greet", "arguments": '{"who": 7}'}}]}}]}
calls = tk.parse_tool_calls(response, "openai-chat")
store = tk.SqliteApprovalStore(sys.argv[1])
invoker = tk.ToolInvoker(box, approval_handler=tk.PersistedApprovalHandler(store))

async def main():
    async with invoker.open_session() as session:
        return [await invoker.invoke(c, session=session) for c in calls]

ok, invalid = asyncio.run(main())
hits = box.search("add two numbers")
optional = sorted(m for m in sys.modules if m.split(".")[0] in set(sys.argv[2].split(",")))
print(json.dumps({"ok": [ok.status, ok.text],
                  "invalid": [invalid.status, invalid.error_code],
                  "search": [h.name for h in hits], "optional": optional,
                  "paths": [p for p in sys.path if "site-packages" in p]}))
"""


def test_a_core_only_interpreter_defines_exports_parses_validates_and_invokes(
        tmp_path: Path) -> None:
    done = _core_python(tmp_path, CORE_FLOW, str(tmp_path / "state.db"), ",".join(OPTIONAL))
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["paths"] == []
    assert seen["ok"] == ["ok", "5"]  # "3" coerced to 3 by validation
    assert seen["invalid"][0] == "error" and seen["invalid"][1] == "invalid_arguments"
    assert seen["search"][0] == "add"  # the pure-Python BM25
    assert seen["optional"] == []
    assert (tmp_path / "state.db").exists()


@pytest.mark.parametrize(("code", "extra"), [
    ("from toolkeeper.toolbox.semantic import EmbeddingScorer; EmbeddingScorer()", "semantic"),
    ("from toolkeeper.cli.entry import main; main()", "cli"),
    ("from toolkeeper.skills import load_skill; load_skill(sys.argv[1])", "skills"),
    ("from toolkeeper.builtins.calculator import calculator_tool; "
     "calculator_tool().run_raw({'expression': '1+1'})", "builtins"),
    ("from toolkeeper.approval.pg import PgDatabase; PgDatabase('postgresql://h/db')", "postgres"),
    ("import toolkeeper as tk; from toolkeeper.mcp.server import mcp_server; "
     "mcp_server(tk.ToolInvoker(tk.Toolbox([])))", "server"),
    ("import toolkeeper as tk; tk.Policies(tk.Toolbox([]), text={'t': 'permit (principal, "
     "action, resource);'}).load()", "policy"),
])
def test_a_core_only_interpreter_names_the_extra_a_part_needs(
        tmp_path: Path, code: str, extra: str) -> None:
    skill = tmp_path / "s" / "SKILL.md"
    skill.parent.mkdir()
    skill.write_text("---\nname: s\ndescription: d\n---\nDo it.\n")
    done = _core_python(tmp_path, "import sys; " + code, str(skill))
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.endswith(f"needs the [{extra}] extra: pip install 'toolkeeper[{extra}]'"), last
    if extra == "cli":
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


GOVERNED_FLOW = """
import asyncio, json, sys
import toolkeeper as tk

@tk.tool(risk="high")
def deploy(env: str) -> str:
    '''Deploy.'''
    return env

box = tk.Toolbox([deploy])
policies = tk.Policies(box, store=tk.PolicyStore(sys.argv[1]))
invoker = tk.ToolInvoker(box, policies=policies,
                         policy=tk.ChainPolicy(max_risk_unapproved="high"))

async def main():
    async with invoker.open_session() as session:
        return await invoker.invoke(tk.ToolCall(id="1", name="deploy",
                                                arguments={"env": "qa"}), session=session)

done = asyncio.run(main())
print(json.dumps([done.status, "cedarpy" in sys.modules]))
"""


def test_a_core_only_interpreter_decides_with_the_default_set_and_a_store_without_cedar(
        tmp_path: Path) -> None:
    done = _core_python(tmp_path, GOVERNED_FLOW, str(tmp_path / "state.db"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == ["ok", False]


def test_with_the_cli_extra_alone_check_runs_and_serve_names_the_server_extra(
        tmp_path: Path) -> None:
    command = "from toolkeeper.cli.entry import main; sys.argv[0] = 'toolkeeper'; main()"
    example = str(ROOT / "examples" / "weather.py")
    checked = _core_python(tmp_path, "import sys; " + command, "check", example, extras=("cli",))
    assert checked.returncode == 0, checked.stderr
    assert "0 error(s)" in checked.stdout
    served = _core_python(tmp_path / "b", "import sys; " + command, "serve", example,
                          "--state-dir", str(tmp_path / "state"), extras=("cli",))
    assert served.returncode == 2
    assert served.stderr.strip() == (
        "error: toolkeeper serve needs the [server] and [builtins] extras (the server; the "
        "built-in tools; --no-builtins serves without): pip install "
        "'toolkeeper[server,builtins]'"), served.stderr


def test_the_entry_point_is_the_one_that_says_which_extra() -> None:
    assert PYPROJECT["project"]["scripts"]["toolkeeper"] == "toolkeeper.cli.entry:main"
    assert os.path.exists(SRC / "toolkeeper" / "cli" / "entry.py")


TESTING_DOUBLES = """
import importlib.util, json
from toolkeeper.testing import AuditLogConformance, ScriptedOpenAIChat, call, say

client = ScriptedOpenAIChat(call("get_forecast", city="Lisbon"), say("Sunny."))
answer = client.chat.completions.create(model="m", messages=[])
try:
    from toolkeeper.testing import ApprovalStoreConformance
    refused = ""
except ImportError as exc:
    refused = str(exc)
print(json.dumps({"absent": [m for m in ("pytest", "hypothesis") if not importlib.util.find_spec(m)],
                  "called": answer.choices[0].message.tool_calls[0].function.name,
                  "suite": AuditLogConformance.__name__, "refused": refused}))
"""


def test_with_every_extra_but_testing_the_shipped_doubles_import_and_answer(
        tmp_path: Path) -> None:
    done = _core_python(tmp_path, TESTING_DOUBLES,
                        extras=tuple(sorted(set(EXTRAS) - DEVELOPMENT)))
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["absent"] == ["pytest", "hypothesis"]
    assert (seen["called"], seen["suite"]) == ("get_forecast", "AuditLogConformance")
    assert seen["refused"] == ("ApprovalStoreConformance (toolkeeper.testing) needs the [testing] "
                               "extra: pip install 'toolkeeper[testing]'")
