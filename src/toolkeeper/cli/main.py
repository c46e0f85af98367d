"""The ``toolkeeper`` command."""

from __future__ import annotations

import inspect
import json
import re
import sys
from importlib.metadata import version as package_version
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from typer.models import DefaultPlaceholder

from ..errors import ToolkeeperError
from ..formats import API_FORMATS, check, export, get_format
from .approvals_cmd import approvals_app
from .audit_cmd import audit
from .doctor_cmd import doctor
from .install_cmd import install
from .loader import load_tools
from .policy_cmd import policy_app
from .report import fail, is_debug, set_debug
from .serve_cmd import serve
from .tokens_cmd import tokens_app
from .tools_cmd import tools_app
from .upstream_cmd import upstream_app

app = typer.Typer(
    name="toolkeeper",
    help="The tool layer for LLM agents: define tools, export and lint them per provider, and "
         "serve them to MCP clients with approval, policy and an audit log.",
    no_args_is_help=True,
    add_completion=False,
)
app.command("serve", short_help="Serve tools to MCP clients, every call governed.")(serve)
app.command("install")(install)
app.command("audit")(audit)
app.command("doctor")(doctor)
app.add_typer(tools_app, name="tools")
app.add_typer(approvals_app, name="approvals")
app.add_typer(policy_app, name="policy")
app.add_typer(tokens_app, name="tokens")
app.add_typer(upstream_app, name="upstream")
_out = Console()
_err = Console(stderr=True)

Target = Annotated[
    str, typer.Argument(help="Tools to load: 'pkg.module:object', 'file.py:object', or a module "
                        "or file (every @tool in it).")
]
FormatOpt = Annotated[
    str, typer.Option("--format", "-f", help=f"Wire format: {', '.join(API_FORMATS)}.")
]
StrictOpt = Annotated[bool, typer.Option("--strict", help="Ask for strict mode where supported.")]


def _fail(exc: ToolkeeperError) -> typer.Exit:
    return fail(exc)


def _version(value: bool) -> None:
    if value:
        _out.print(f"toolkeeper {package_version('toolkeeper')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Show the version and exit.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
) -> None:
    """toolkeeper command line."""
    set_debug(debug)


@app.command()
def schema(
    target: Target,
    api_format: FormatOpt = "openai-chat",
    strict: StrictOpt = False,
    think: Annotated[bool, typer.Option("--think", help="Add the toolcall_reason argument.")] = False,
) -> None:
    """Print tool declarations as JSON in a provider's format.

    One tool's declaration, or the tools= list for several."""
    try:
        tools = load_tools(target)
        exported = export(tools, api_format, strict=strict, think_augment=think or None)
    except ToolkeeperError as exc:
        raise _fail(exc) from exc
    payload = exported.declarations[0] if len(tools) == 1 else exported.tools
    text = json.dumps(payload, indent=2, ensure_ascii=False)
    if sys.stdout.isatty():
        _out.print_json(text)
    else:
        sys.stdout.write(text + "\n")


_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}
_RANK = {"never": 3, "error": 2, "warning": 1, "info": 0}
_LEVEL = {"error": 2, "warning": 1, "info": 0}


@app.command("check")
def check_cmd(
    target: Target,
    api_format: Annotated[
        str, typer.Option("--format", "-f", help="A wire format, or 'all'.")
    ] = "all",
    strict: StrictOpt = False,
    fail_on: Annotated[
        str, typer.Option(help="Exit 1 when a problem at this level or above is found: "
                          "error, warning, info or never.")
    ] = "warning",
    show_info: Annotated[bool, typer.Option("--info", help="Also list info-level notes.")] = False,
) -> None:
    """Lint tools for every provider's format.

    What each export changes, loses, or cannot honour."""
    if fail_on not in _RANK:
        _err.print(f"[bold red]error:[/] --fail-on must be one of {', '.join(_RANK)}")
        raise typer.Exit(code=2)
    try:
        tools = load_tools(target)
        formats = list(API_FORMATS) if api_format == "all" else [get_format(api_format).name]
        problems = [p for t in tools for f in formats if f != "native"
                    for p in check(t, f, strict=_strict_for(f, strict, api_format))]
    except ToolkeeperError as exc:
        raise _fail(exc) from exc
    shown = [p for p in problems if show_info or p.severity != "info"]
    if shown:
        table = Table("tool", "format", "level", "where", "problem", show_lines=False)
        for p in shown:
            style = _SEVERITY_STYLE[p.severity]
            table.add_row(p.tool, p.api_format, f"[{style}]{p.severity}[/]", p.path, p.message)
        _out.print(table)
    counts = {s: sum(1 for p in problems if p.severity == s) for s in _LEVEL}
    _out.print(f"{len(tools)} tool(s), {len(formats)} format(s): {counts['error']} error(s), "
               f"{counts['warning']} warning(s), {counts['info']} note(s)")
    if any(_LEVEL[p.severity] >= _RANK[fail_on] for p in problems):
        raise typer.Exit(code=1)


def _strict_for(api_format: str, strict: bool, requested: str) -> bool:
    """With ``--format all``, strict mode is asked only of formats that have one."""
    if requested != "all":
        return strict
    return strict and get_format(api_format).profile.strict_keep is not None


def summary(text: str) -> str:
    """A help text's first sentence, on one line: what ``--help`` lists for a command."""
    first = " ".join(inspect.cleandoc(text).split("\n\n")[0].split())
    return re.split(r"(?<=\.) ", first, maxsplit=1)[0]


def _summarize(group: typer.Typer) -> None:
    """Give each command and group registered in ``group`` (and in its groups) the line
    ``--help`` lists it with: its own ``short_help`` if it was registered with one, else the
    first sentence of its docstring or help — read from the registry, so it cannot drift."""
    for command in group.registered_commands:
        if command.short_help is None:
            command.short_help = summary(command.help or inspect.getdoc(command.callback) or "")
    for sub in group.registered_groups:
        if sub.typer_instance is None:
            continue
        given = sub.help if not isinstance(sub.help, DefaultPlaceholder) else None
        sub.short_help = summary(given or sub.typer_instance.info.help or "")
        _summarize(sub.typer_instance)


_summarize(app)


def main() -> None:
    """Entry point of the ``toolkeeper`` console script. An error of toolkeeper's that a
    command did not report itself (a store it cannot reach, say) is still one line."""
    try:
        app()
    except ToolkeeperError as exc:
        if is_debug():
            raise
        fail(exc)
        raise SystemExit(2) from None
