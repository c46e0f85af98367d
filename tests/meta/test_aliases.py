"""Every compatibility alias says whether and when it goes: docs/compat.md lists each with the
version it goes away in, or "kept" for a name of the public contract, and each one's own
docstring (or, for a name bound by assignment, the string after it) says the same. The table
and the places below must list the same aliases."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from .test_layers import ROOT, SRC

GOES = "0.3.0"
KEPT = "kept"
SECTION = "## Compatibility aliases and when they go"
# the alias as the table writes it → (module file under src/toolkeeper, where its docstring is)
PLACES = {
    "`toolkeeper.CapabilityRegistry`": ("toolbox/toolbox.py", "CapabilityRegistry"),
    "`Toolbox.register(tool, namespace=)`": ("toolbox/toolbox.py", "Toolbox.register"),
    "`Toolbox.register_tool(tool, category=, tags=, aliases=)`":
        ("toolbox/toolbox.py", "Toolbox.register_tool"),
    "`Toolbox.get_tool(name_or_alias)`": ("toolbox/catalog.py", "CatalogBase.get_tool"),
    "`RenamedView.with_prefix(inner, prefix)`": ("toolbox/catalog.py", "RenamedView.with_prefix"),
    "`toolkeeper.ToolExecutionResult`": ("core/results.py", "ToolExecutionResult"),
    "`Tool.input_schema`": ("tools/tool.py", "Tool.input_schema"),
    "`Tool.get_openai_schema()`": ("tools/tool.py", "Tool.get_openai_schema"),
    "`Tool.get_mcp_schema()`": ("tools/tool.py", "Tool.get_mcp_schema"),
    "`Tool.describe()`, `Tool.get_json_schema()` (they warn)": ("tools/tool.py", "Tool.describe"),
    "`Tool.get_schema(_think_augment=)`": ("tools/tool.py", "Tool.get_schema"),
    "`Tool.run` / `Tool.arun` returning an error string (they warn)": ("tools/tool.py", "Tool.run"),
    "the format name `openai-response`": ("formats/registry.py", "get_format"),
    "`toolkeeper.tools.protocol.SeedTool`": ("tools/protocol.py", "SeedTool"),
    "`ApprovalDecision.APPROVED`, `DENIED`, `SKIPPED`, `TIMEOUT`, `PENDING`":
        ("approval/models.py", "ApprovalDecision"),
    "a hook payload's `tool_name` key": ("hooks.py", "HookManager.dispatch"),
    "`toolkeeper.mcp.gateway` (`MCPGateway`, `remote_risk`)": ("mcp/gateway.py", ""),
    "`toolkeeper.mcp.pins` (`Pin`, `SqlitePins`, `fingerprint`)": ("mcp/pins.py", ""),
    "`toolkeeper.mcp.upstream` (`Upstream`, `UpstreamError`)": ("mcp/upstream.py", ""),
    "`toolkeeper.mcp.prompts` (`prompt`, `Prompt`, `Prompts`, `PromptNotFound`)":
        ("mcp/prompts.py", ""),
    "`toolkeeper.mcp.resources` (`resource`, `Resource`, `Resources`, …)":
        ("mcp/resources.py", ""),
    "`MCPFace.build(name, instructions)`": ("mcp/server.py", "MCPFace.build"),
    "`create_app(...).mcp_server`": ("server/app.py", "HttpApp.mcp_server"),
    "`toolkeeper.server.exchange.input_schemas(catalog)`": ("server/exchange.py", "input_schemas"),
    "`toolkeeper.mcp.relay_link.SessionHub`": ("mcp/relay_link.py", "SessionHub"),
}
ALSO = {"Tool.describe": ["Tool.get_json_schema"], "Tool.run": ["Tool.arun"]}


def _table() -> dict[str, str]:
    text = (ROOT / "docs" / "compat.md").read_text()
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines()
            if line.startswith("| ") and not line.startswith(("| alias", "|---"))]
    return {cells[0].removeprefix("| "): cells[-1].removesuffix(" |") for cells in rows}


def _docstring(tree: ast.Module, qualname: str) -> str:
    """The docstring of ``qualname`` in ``tree`` ("": the module's; a name bound by assignment:
    the string right after it)."""
    if not qualname:
        return ast.get_docstring(tree) or ""
    body: list[ast.stmt] = tree.body
    *outer, name = qualname.split(".")
    for part in outer:
        body = next(n.body for n in body if isinstance(n, ast.ClassDef) and n.name == part)
    for index, node in enumerate(body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) \
                and node.name == name:
            return ast.get_docstring(node) or ""
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            after = body[index + 1] if index + 1 < len(body) else None
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                return str(after.value.value)
            return ""
    raise AssertionError(f"{qualname} is not defined where the table's places say")


def test_the_table_lists_every_alias_with_the_version_it_goes_or_kept() -> None:
    table = _table()
    assert set(table) == set(PLACES), "docs/compat.md's alias table and PLACES list differ"
    assert {alias: v for alias, v in table.items() if v not in (GOES, KEPT)} == {}


def test_each_alias_says_in_its_docstring_what_the_table_says() -> None:
    table = _table()
    silent = []
    for alias, (module, qualname) in PLACES.items():
        tree = ast.parse(Path(SRC / module).read_text())
        for name in [qualname, *ALSO.get(qualname, [])]:
            text = " ".join(_docstring(tree, name).split())
            goes = re.search(rf"\b{re.escape(GOES)}\b", text) is not None
            kept = "kept for good" in text
            if (table[alias] == GOES) != goes or (table[alias] == KEPT) != kept:
                silent.append(f"{alias}: {module} {name or '(module)'}")
    assert silent == []
