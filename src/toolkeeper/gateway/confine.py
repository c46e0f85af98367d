"""A stdio upstream started in the sandbox the built-ins use.

An MCP server started with ``command`` is a program from somewhere else (often a package
fetched by ``npx`` or ``uvx`` at its latest version): run with toolkeeper's rights it could read
the state dir's tokens and approve its own calls, read every file of the user, and send them
anywhere. So by default it runs in bubblewrap, described by the same builder as ``shell`` and
code mode (``sandbox.bubblewrap.confined_command``):

- its view: ``/usr`` and the system's libraries read-only; the directories its command needs
  to run (a virtual environment, an interpreter installed outside ``/usr``) read-only; a private
  home at ``/workspace`` that persists between starts (``npx``'s and ``uv``'s caches live there:
  one server never reads or poisons another's packages, at the cost of downloading its own);
  a private ``/tmp``; and only the directories its config grants (``read_paths`` read-only,
  ``write_paths`` writable), at their own paths, with every toolkeeper state folder below them
  hidden. Never the state dir, the user's home or another server's paths;
- no network unless the config says: ``network = true`` shares the host's network; a list of
  hosts (``network = ["registry.npmjs.org", "api.example.com:8443"]``) keeps the sandbox's
  own network namespace, loopback alone, whose one way out is a filtering proxy on the host
  that reaches those hosts and nothing else (``gateway.egress``);
- a clean environment: ``PATH``, ``HOME``, ``LANG`` and the config's ``env``;
- rlimits like the built-ins' (memory, processes, file size, open files), a cgroup where the
  host offers one, an unprivileged uid when toolkeeper runs as root; stopping the server kills
  its process group, and with it the sandbox's pid namespace.

Every directory is opened once, here, and bound from its fd: a path swapped for a symlink
afterwards binds nothing else. Where bubblewrap cannot run, a sandboxed upstream is not started
(never run unconfined in its place); ``sandbox = false`` is the operator's explicit choice.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..builtins.policy import SecurityPolicy
from ..builtins.protected import Protection
from ..builtins.state_dirs import enclosing_state_dir, state_reason
from ..config.model import MCPServerConfig
from ..errors import PolicyViolationError
from ..sandbox.base import SYSTEM_PATH, UNPRIVILEGED_UID, Limits, SharedPath
from ..sandbox.bubblewrap import (
    BubblewrapSandbox,
    ConfinedCommand,
    confined_command,
    probe_bwrap,
)
from ..sandbox.limits import call_group, limited
from .egress import FORWARDER, INSIDE_PORT, INSIDE_SOCKET, EgressProxy, proxy_env, rules

__all__ = ["UPSTREAM_LIMITS", "Launch", "Unconfinable", "confinement", "launch", "private_dir"]

UPSTREAM_LIMITS = Limits(cpu_s=7 * 24 * 3600, file_bytes=1 << 30, processes=256,
                         open_files=4096, memory=4 << 30)
"""An upstream lives as long as the server: CPU time is no measure of it; memory, processes,
file size and open files are bounded like a built-in's command (more room: ``node`` alone
reserves hundreds of MiB)."""


class Unconfinable(Exception):
    """A sandboxed upstream cannot be started confined here; the message names the fix."""


@dataclass(frozen=True, kw_only=True)
class Launch:
    """How to start one stdio upstream."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path | None = None
    pass_fds: tuple[int, ...] = ()
    """Inherited by the process; ``release`` closes them."""
    release: Callable[[], None] = field(default=lambda: None)
    """Called once, when the process is gone or could not start: its cgroup removed, the fds
    closed."""


def confinement(config: MCPServerConfig) -> str:
    """How ``config``'s server runs, in one phrase for operators."""
    if config.url is not None:
        oauth = config.oauth
        if oauth is not None and oauth.grant == "client_credentials" and oauth.issuer is None:
            return ("remote (Streamable HTTP; its client credentials go to whichever "
                    "authorization server it names: set issuer under its [mcp.servers.oauth] "
                    "to bind them to one)")
        return "remote (Streamable HTTP)"
    if not config.sandbox:
        return "unconfined (sandbox = false): it runs with toolkeeper's own rights"
    grants = [f"reads {', '.join(map(str, config.read_paths))}"] if config.read_paths else []
    if config.write_paths:
        grants.append(f"writes {', '.join(map(str, config.write_paths))}")
    if isinstance(config.network, list) and config.network:
        grants.append(f"network only to {', '.join(config.network)}, through its proxy")
    else:
        grants.append("network" if config.network is True else "no network")
    return f"sandboxed ({'; '.join(grants)})"


def private_dir(name: str) -> Path:
    """Where upstream ``name`` keeps its home between starts: ``$TOOLKEEPER_CACHE_DIR/mcp/
    NAME``, else ``$XDG_CACHE_HOME/toolkeeper/mcp/NAME``, else ``~/.cache/toolkeeper/mcp/NAME``
    (``/var/cache/toolkeeper/mcp/NAME`` for root, whose home the sandbox's user cannot pass).
    A cache: removing it costs downloads, never state."""
    own = os.environ.get("TOOLKEEPER_CACHE_DIR", "").strip()
    if own:
        return Path(own) / "mcp" / name
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    if not base and os.geteuid() == 0:
        return Path("/var/cache/toolkeeper/mcp") / name
    root = Path(base) if base else Path.home() / ".cache"
    return root / "toolkeeper" / "mcp" / name


def launch(config: MCPServerConfig, env: dict[str, str]) -> Launch:
    """How to start ``config``'s command: in the sandbox unless ``sandbox = false``; ``env``
    is what the config declares (``${NAME}`` already expanded).

    Raises:
        Unconfinable: bubblewrap cannot run here, or the view cannot be built as configured.
    """
    if not config.sandbox:
        from mcp.client.stdio import get_default_environment  # the SDK's safe defaults

        return Launch(argv=[config.command or "", *config.args],
                      env={**get_default_environment(), **env}, cwd=config.cwd)
    return _confined(config, env)


def _confined(config: MCPServerConfig, env: dict[str, str]) -> Launch:
    report = probe_bwrap()
    if not report.available:
        raise Unconfinable(
            f"MCP server '{config.name}' is sandboxed but the sandbox cannot run here "
            f"({report.detail}); install bubblewrap (Debian: apt-get install bubblewrap) with "
            f"unprivileged user namespaces allowed, or set sandbox = false under "
            f"[[mcp.servers]] name = \"{config.name}\" to run it unconfined")
    with contextlib.ExitStack() as stack:
        command = _command(config)
        programs = [command, *_interpreter(command)]
        egress, forwarder = _egress(stack, config)
        shared = [*_opened(stack, config, _runtime_dirs([*programs, *forwarder[:1]]),
                           writable=False),
                  *_opened(stack, config, config.read_paths, writable=False),
                  *_opened(stack, config, config.write_paths, writable=True)]
        home, home_fd = _home(stack, config)
        inside = ":".join(dict.fromkeys([*(str(Path(p).parent) for p in programs),
                                         *SYSTEM_PATH.split(":")]))
        built = confined_command(home, [*forwarder, command, *config.args],
                                 limits=UPSTREAM_LIMITS, cwd=_cwd(config, shared),
                                 network=config.network is True, egress=egress,
                                 env={"PATH": inside, **(proxy_env() if egress else {}), **env},
                                 shared=shared, workspace_fd=home_fd)
        stack.callback(_close, built.fds)
        argv = _limited(stack, config, built)
        fds = (home_fd, *built.fds, *(item.fd for item in shared if item.fd is not None))
        held = stack.pop_all()
    return Launch(argv=argv, env={"PATH": SYSTEM_PATH}, pass_fds=fds, release=held.close)


def _egress(stack: contextlib.ExitStack, config: MCPServerConfig
            ) -> tuple[tuple[str, str] | None, list[str]]:
    """For a list of hosts: the proxy serving them (closed with ``stack``), its socket and
    where it is bound inside, and the forwarder's command line to run the server behind."""
    if not isinstance(config.network, list) or not config.network:
        return None, []
    try:
        allowed = rules(config.network)
    except ValueError as exc:
        raise Unconfinable(f"MCP server '{config.name}': {exc}") from exc
    try:
        proxy = EgressProxy(config.name, allowed)
    except OSError as exc:  # a temporary folder whose path is too long for a unix socket
        raise Unconfinable(f"MCP server '{config.name}': its network proxy cannot listen "
                           f"({exc}); set TMPDIR to a short, writable folder") from exc
    stack.callback(proxy.close)
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    return ((str(proxy.socket), INSIDE_SOCKET),
            [python, "-I", "-S", "-c", FORWARDER, INSIDE_SOCKET, str(INSIDE_PORT)])


def _limited(stack: contextlib.ExitStack, config: MCPServerConfig, built: ConfinedCommand
             ) -> list[str]:
    """``built`` behind the upstream's limits, in a cgroup of its own where the host offers
    one (removed, and whatever is left in it killed, when ``stack`` closes)."""
    group = stack.enter_context(call_group(UPSTREAM_LIMITS))
    argv, preexec = limited(built.argv, UPSTREAM_LIMITS, group, drop_root=True,
                            nproc=not built.counted)
    if preexec is not None:  # the limits would need a fork of the whole server
        raise Unconfinable(f"MCP server '{config.name}' is sandboxed but util-linux's prlimit "
                           "and setpriv are not installed; install util-linux, or set "
                           "sandbox = false for it")
    return argv


def _close(fds: Sequence[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _command(config: MCPServerConfig) -> str:
    """The command's absolute path, found on the server's ``PATH`` as the SDK would."""
    found = shutil.which(config.command or "")
    if found is None:
        raise Unconfinable(f"MCP server '{config.name}': command {config.command!r} is not "
                           "found on PATH; give its absolute path")
    return os.path.abspath(found)


def _runtime_dirs(programs: Sequence[str]) -> list[Path]:
    """The directories ``programs`` (a command and the interpreter its ``#!`` line names) need
    to run, outside ``/usr``: a virtual environment, the installation each is part of
    (following symlinks)."""
    home = Path.home().resolve()
    dirs: list[Path] = []
    for program in programs:
        path = Path(program)
        if (path.parent.parent / "pyvenv.cfg").is_file():
            dirs.append(path.parent.parent)
        dirs.append(_installation(Path(os.path.realpath(program)), home))
    kept = []
    for found in dict.fromkeys(dirs):
        if found == Path("/usr") or Path("/usr") in found.parents:
            continue
        if found == home or found in home.parents:
            raise Unconfinable(f"{programs[0]} is installed in {found}, which the sandbox will "
                               "not show whole; install it in a directory of its own")
        kept.append(found)
    return kept


def _installation(real: Path, home: Path) -> Path:
    """The installation a program belongs to: ``PREFIX`` of ``PREFIX/bin/NAME`` with its
    ``lib`` (an interpreter's standard library), else its own directory — never a folder
    directly in the home (``~/.local/bin/uvx`` shows ``~/.local/bin``, not all of
    ``~/.local``)."""
    prefix = real.parent.parent
    if real.parent.name == "bin" and (prefix / "lib").is_dir() and prefix.parent != home:
        return prefix
    return real.parent


def _interpreter(command: str) -> list[str]:
    """The program a ``#!`` script names, if ``command`` is one (``#!/usr/bin/env node``:
    ``node`` as found on ``PATH``)."""
    try:
        with open(command, "rb") as script:
            first = script.readline(512)
    except OSError:
        return []
    words = first[2:].decode("utf-8", "replace").split() if first.startswith(b"#!") else []
    if len(words) > 1 and os.path.basename(words[0]) == "env":
        found = shutil.which(words[-1])
        return [found] if found else []
    return words[:1] if words and words[0].startswith("/") else []


def _opened(stack: contextlib.ExitStack, config: MCPServerConfig, paths: Sequence[Path], *,
            writable: bool) -> list[SharedPath]:
    """Each directory opened once, checked for toolkeeper state (in it, or it in one) and
    shared from its fd with every state folder below it hidden."""
    shared = []
    for given in paths:
        path = given.expanduser()
        if not path.is_dir():
            raise Unconfinable(f"MCP server '{config.name}': {given} is not a directory; "
                               "grant an existing directory")
        protection = Protection(SecurityPolicy(workspace=path), path, state_only=True)
        stack.callback(protection.close)
        enclosing = enclosing_state_dir(protection.root)
        if enclosing is not None:
            raise Unconfinable(f"MCP server '{config.name}': "
                               f"{state_reason(str(enclosing[0]), enclosing[1])}")
        try:
            hidden = protection.prepare(BubblewrapSandbox(), protection.state(),
                                        tool=f"mcp server {config.name}")
        except PolicyViolationError as exc:
            raise Unconfinable(f"MCP server '{config.name}': {exc}") from exc
        _reachable(config, protection.root)
        shared.append(SharedPath(protection.root, writable=writable, hidden=hidden,
                                 fd=protection.ws.fd))
    return shared


def _reachable(config: MCPServerConfig, path: Path) -> None:
    """As root, the sandbox runs as an unprivileged uid, and bubblewrap must reach what it
    binds by its path: every directory above it must let that uid pass."""
    if os.geteuid() != 0:
        return
    for parent in path.parents:
        info = parent.stat()
        if info.st_uid != UNPRIVILEGED_UID and not info.st_mode & 0o001:
            raise Unconfinable(
                f"MCP server '{config.name}': {path} is not reachable by uid "
                f"{UNPRIVILEGED_UID}, which runs sandboxed servers because toolkeeper runs as "
                f"root ({parent} is closed to it); run toolkeeper as a non-root user, make "
                f"{parent} searchable (chmod o+x), or install what it runs elsewhere")


def _home(stack: contextlib.ExitStack, config: MCPServerConfig) -> tuple[Path, int]:
    """The upstream's private home, made if needed and opened without following a symlink;
    owned by the sandbox's user when toolkeeper runs as root (who then runs it unprivileged)."""
    path = private_dir(config.name)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    _reachable(config, path)
    enclosing = enclosing_state_dir(path)
    if enclosing is not None:
        raise Unconfinable(f"MCP server '{config.name}': its private home {path} is in a "
                           f"toolkeeper state folder ({enclosing[0]}); set TOOLKEEPER_CACHE_DIR "
                           "to a folder outside it")
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    stack.callback(_close, [fd])
    if os.geteuid() == 0:
        os.fchown(fd, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
    return path, fd


def _cwd(config: MCPServerConfig, shared: Sequence[SharedPath]) -> str:
    """Where the command starts: its private home, or ``cwd`` when a granted path holds it."""
    if config.cwd is None:
        return "."
    cwd = Path(os.path.realpath(config.cwd.expanduser()))
    for item in shared:
        if cwd == item.path or item.path in cwd.parents:
            return str(cwd)
    raise Unconfinable(f"MCP server '{config.name}': cwd {config.cwd} is not in its read_paths "
                       "or write_paths; grant it, or leave cwd out (it starts in its own home)")
