"""``toolkeeper doctor``: what confinement this machine really offers, probed once."""

from __future__ import annotations

import os
import platform
import shutil
import tempfile

import typer
from rich.console import Console
from rich.table import Table

from ..builtins.fs import openat2
from ..sandbox import exec_helpers, landlock_abi, probe, probe_bwrap, probe_overlay
from ..sandbox.cgroups import probe as cgroup_probe

_out = Console()
_MARKS = {"ok": "[green]ok[/]", "missing": "[yellow]missing[/]", "warn": "[yellow]warning[/]",
          "none": "[red]none[/]"}


def doctor() -> None:
    """Report what confinement this host offers commands.

    Each confinement backend, the one commands will use, cgroups, openat2, the search
    programs and the user toolkeeper runs as. Exits 1 when no sandbox can run."""
    table = Table("check", "result", "detail")
    bwrap = probe_bwrap()
    table.add_row("bubblewrap", _MARKS["ok" if bwrap.available else "missing"], bwrap.detail)
    abi = landlock_abi()
    table.add_row("Landlock", _MARKS["ok" if abi >= 1 else "missing"],
                  f"ABI {abi}" if abi >= 1 else "not in this kernel (5.13+) or disabled")
    chosen = probe()
    table.add_row("sandbox used", _MARKS["ok"] if chosen.available else _MARKS["none"],
                  f"{chosen.backend}: {chosen.detail}" if chosen.available else
                  "shell, git and code mode are refused (unless security.allow_unconfined)")
    if bwrap.available:
        view = probe_overlay()
        table.add_row("copy-on-write view", _MARKS["ok" if view is None else "warn"],
                      "a command's writes are applied after it, none at a protected path"
                      if view is None else f"{view}: commands write the workspace directly, and "
                      "what they create at a protected path is removed after the run")
    helpers = exec_helpers()
    table.add_row("prlimit + setpriv", _MARKS["ok" if helpers is not None else "missing"],
                  " ".join(helpers) if helpers is not None else "util-linux is missing: every "
                  "command forks the whole host process to set its limits (slower)")
    groups = cgroup_probe()
    table.add_row("per-call cgroups", _MARKS["ok" if groups.available else "missing"],
                  groups.detail if groups.available
                  else f"{groups.detail}; memory is limited per process (RLIMIT_AS) instead")
    table.add_row("openat2 (file tools)", *_openat2_row(openat2))
    for program in ("rg", "grep"):
        found = shutil.which(program)
        table.add_row(program, _MARKS["ok" if found else "missing"], found or "not installed")
    root = os.geteuid() == 0
    table.add_row("user", _MARKS["warn" if root else "ok"],
                  "root: commands run as uid 65534 (process limits do not bind root); run "
                  "toolkeeper as a non-root user" if root else f"uid {os.geteuid()}")
    _out.print(table)
    if not chosen.available:
        raise typer.Exit(code=1)


def _openat2_row(openat2: object) -> tuple[str, str]:
    try:
        with tempfile.TemporaryDirectory() as tmp:
            fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.close(openat2(fd, ".", os.O_RDONLY))  # type: ignore[operator]
            finally:
                os.close(fd)
    except OSError as exc:
        return _MARKS["missing"], f"{exc}; file tools will refuse"
    return _MARKS["ok"], f"kernel {platform.release()}"
