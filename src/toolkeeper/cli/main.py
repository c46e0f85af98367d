"""The ``toolkeeper`` command."""

from __future__ import annotations

import json
import sys
from importlib.metadata import version as package_version
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ..errors import ToolkeeperError
from ..formats import API_FORMATS, check, export, get_format
from .approvals_cmd import approvals_app
from .audit_cmd import audit
from .doctor_cmd import doctor
from .install_cmd import install
from .loader import load_tools
from .policy_cmd import policy_app
from .report import fail, set_debug
from .serve_cmd import serve
from .tokens_cmd import tokens_app
from .tools_cmd import tools_app

app = typer.Typer(
    name="toolkeeper",
    help="The tool layer for LLM agents: export tool declarations and lint them per provider.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(tools_app, name="tools")
app.add_typer(tokens_app, name="tokens")
app.add_typer(approvals_app, name="approvals")
app.add_typer(policy_app, name="policy")
app.command("audit")(audit)
app.command("doctor")(doctor)
app.command("serve")(serve)
app.command("install")(install)
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
    """Print tool declarations as JSON: one tool's, or the tools= list for several."""
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
    """Lint tools per provider: what each export changes, loses, or cannot honour."""
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


def main() -> None:
    """Entry point of the ``toolkeeper`` console script."""
    app()
