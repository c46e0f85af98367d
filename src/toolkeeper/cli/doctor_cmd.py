"""``toolkeeper doctor``: what confinement this machine offers, probed once."""

from __future__ import annotations

import os
import platform
import shutil
import tempfile

import typer
from rich.console import Console
from rich.table import Table

_out = Console()


def doctor() -> None:
    """Report the sandbox, cgroups, openat2, search programs and the user toolkeeper runs
    as."""
    from ..builtins.cgroups import probe as cgroup_probe
    from ..builtins.fs import openat2
    from ..builtins.sandbox import exec_helpers, probe

    table = Table("check", "result", "detail")
    report = probe()
    table.add_row("bubblewrap sandbox", _mark(report.available), report.detail)
    helpers = exec_helpers()
    table.add_row("prlimit + setpriv", _mark(helpers is not None),
                  " ".join(helpers) if helpers is not None else "util-linux is missing: every "
                  "command forks the whole host process to set its limits (slower)")
    groups = cgroup_probe()
    table.add_row("per-call cgroups", _mark(groups.available), groups.detail if groups.available
                  else f"{groups.detail}; memory is limited per process (RLIMIT_AS) instead")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            os.close(openat2(os.open(tmp, os.O_RDONLY | os.O_DIRECTORY), ".", os.O_RDONLY))
        table.add_row("openat2 (file tools)", _mark(True), f"kernel {platform.release()}")
    except OSError as exc:
        table.add_row("openat2 (file tools)", _mark(False), f"{exc}; file tools will refuse")
    for program in ("rg", "grep"):
        found = shutil.which(program)
        table.add_row(program, _mark(found is not None), found or "not installed")
    root = os.geteuid() == 0
    table.add_row("user", _mark(not root), "root: commands run as uid 65534 (process limits do "
                  "not bind root); run toolkeeper as a non-root user" if root else
                  f"uid {os.geteuid()}")
    _out.print(table)
    if not report.available:
        raise typer.Exit(code=1)


def _mark(ok: bool) -> str:
    return "[green]ok[/]" if ok else "[yellow]missing[/]"
