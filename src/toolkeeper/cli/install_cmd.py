"""``toolkeeper install claude-desktop|cursor|vscode [TARGET…]``: put toolkeeper in a desktop
client's MCP config, the way FastMCP's ``install`` does.

A desktop client launches a stdio server itself, from a working directory and an environment of
its own choosing, so everything in the entry is absolute: the ``toolkeeper`` executable of this
environment, the TARGET files, ``--config``, ``--workspace`` and ``--state-dir``. With ``--http
URL`` the entry points at a running ``toolkeeper serve`` instead and carries a *new client token*
minted for this client in that server's store — never the operator token, which decides
approvals.

The client's file is merged, not replaced: other servers stay, only our entry (``--name``) is
replaced. A file that is not valid JSON is refused rather than overwritten, and so is a file
reached through a symlink (``client_config``). The new file is written beside the old one and
renamed over it, owner-only (0600) when it carries a token. A workspace that holds a toolkeeper
state folder (any server's), or is inside one, is refused, naming it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

import typer

from ..errors import ToolkeeperError
from ..server.clients import ClientTokens
from .client_config import ConfigTarget
from .report import Store, fail, out, store_target
from .state import default_state_dir, no_state_in, out_of_reach

__all__ = ["CLIENTS", "ClientFile", "ClientKind", "config_target", "install", "launcher"]


class ClientKind(StrEnum):
    """The clients whose config ``toolkeeper install`` writes."""

    CLAUDE_DESKTOP = "claude-desktop"
    CURSOR = "cursor"
    VSCODE = "vscode"


@dataclass(frozen=True, kw_only=True)
class ClientFile:
    """How one client's MCP config file is laid out."""

    label: str
    key: str
    """The object that maps server names to entries."""
    typed: bool
    """Entries name their transport (``"type": "stdio" | "http"``)."""
    remote: bool
    """The file takes HTTP servers (``url`` and ``headers``)."""


CLIENTS = {
    ClientKind.CLAUDE_DESKTOP: ClientFile(label="Claude Desktop", key="mcpServers", typed=False,
                                          remote=False),
    ClientKind.CURSOR: ClientFile(label="Cursor", key="mcpServers", typed=False, remote=True),
    ClientKind.VSCODE: ClientFile(label="VS Code", key="servers", typed=True, remote=True),
}

_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OBJECT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def config_file(kind: ClientKind, project: Path | None) -> Path:
    """Where ``kind`` reads its MCP servers: Claude Desktop's per-user file, Cursor's global
    ``~/.cursor/mcp.json`` (or ``.cursor/mcp.json`` in ``project``), VS Code's
    ``.vscode/mcp.json`` in the workspace folder (``project``, default: here)."""
    if kind is ClientKind.CURSOR:
        return (project / ".cursor" if project else Path.home() / ".cursor") / "mcp.json"
    if kind is ClientKind.VSCODE:
        return (project or Path.cwd()) / ".vscode" / "mcp.json"
    if sys.platform == "darwin":
        folder = Path.home() / "Library" / "Application Support" / "Claude"
    elif sys.platform == "win32":
        folder = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming") / "Claude"
    else:
        xdg = os.environ.get("XDG_CONFIG_HOME", "").strip()
        folder = (Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
                  ) / "Claude"
    return folder / "claude_desktop_config.json"


def config_target(kind: ClientKind, project: Path | None, given: Path | None) -> ConfigTarget:
    """The file to write, and from where no symlink is followed: a relative ``--config-path``
    from the current directory down, a project's file (VS Code, Cursor with ``--project``)
    from the project down, any other file at its own name."""
    if given is not None:
        path = given.expanduser()
        return ConfigTarget(Path.cwd(), path.as_posix()) if not path.is_absolute() and \
            ".." not in path.parts else ConfigTarget.at(path.absolute())
    path = config_file(kind, project).absolute()
    folder = (project or Path.cwd()) if kind is ClientKind.VSCODE else project
    return ConfigTarget.at(path, folder.absolute() if folder is not None else None)


def launcher() -> list[str]:
    """The ``toolkeeper`` command of this environment, by absolute path: the console script
    beside the running interpreter, else ``python -m toolkeeper.cli``."""
    python = Path(sys.executable).absolute()  # not resolved: a venv's python is a symlink
    for name in ("toolkeeper", "toolkeeper.exe"):
        script = python.parent / name
        if script.is_file() and os.access(script, os.X_OK):
            return [str(script)]
    return [str(python), "-m", "toolkeeper.cli"]


def _target(raw: str) -> str:
    """A TARGET as ``serve`` takes it, a file made absolute; a module must be importable in
    this environment (the client's working directory is not on its path)."""
    base, sep, obj = raw.rpartition(":")
    if not sep or not base or not _OBJECT.fullmatch(obj):
        base, obj = raw, ""
    path = Path(base).expanduser()
    if base.endswith(".py") or path.is_file():
        if not path.is_file():
            raise fail(f"no such file: {base}")
        base = os.path.abspath(path)  # symlinks kept: serve imports beside the path given
        if ":" in base:
            raise fail(f"cannot serve {base}: its path has a ':' (serve splits TARGET at ':')")
    elif not _OBJECT.fullmatch(base) or not _importable(base):
        raise fail(f"{base!r} is neither a file nor a module this Python can import; pass a "
                   "path to a .py file or install the package")
    return f"{base}:{obj}" if obj else base


def _importable(module: str) -> bool:
    try:  # the top-level name only: finding it runs none of the user's code
        return importlib.util.find_spec(module.split(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def _existing(path: Path | None, what: str, *, directory: bool) -> str | None:
    if path is None:
        return None
    found = os.path.abspath(path.expanduser())
    if not (os.path.isdir(found) if directory else os.path.isfile(found)):
        raise fail(f"{what} {path} is not {'a directory' if directory else 'a file'}")
    return found


def _env(pairs: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not _ENV_KEY.fullmatch(key):
            raise fail(f"--env takes KEY=VALUE (KEY: letters, digits, '_'), got {pair!r}")
        env[key] = value
    return env


def _mcp_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise fail(f"--http takes the server's URL (http://HOST:PORT or …/mcp), got {url!r}")
    path = parts.path.rstrip("/")
    path = path if path.endswith("/mcp") else path + "/mcp"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def stdio_entry(client: ClientFile, command: list[str], env: dict[str, str]) -> dict[str, Any]:
    """The entry that launches ``command`` over stdio."""
    entry: dict[str, Any] = {"type": "stdio"} if client.typed else {}
    entry.update(command=command[0], args=command[1:], env=env)
    return entry


def http_entry(client: ClientFile, url: str, token: str) -> dict[str, Any]:
    """The entry that reaches ``url`` with a client's bearer token."""
    entry: dict[str, Any] = {"type": "http"} if client.typed else {}
    entry.update(url=url, headers={"Authorization": f"Bearer {token}"})
    return entry


def merged(target: ConfigTarget, client: ClientFile, name: str, entry: dict[str, object]
           ) -> dict[str, Any]:
    """The client's file with ``entry`` as server ``name``, every other server and key kept.

    Refuses (one line, exit 2) a file that is not a JSON object holding a ``client.key``
    object: a person's broken file is theirs to fix, never ours to overwrite — and a file
    reached through a symlink."""
    path = target.path
    try:
        text, _ = target.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"cannot read {path}: {exc}") from exc
    except ToolkeeperError as exc:
        raise fail(exc) from exc
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise fail(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                   f"{exc.msg}); fix it, or paste the entry --print shows") from exc
    servers = data.get(client.key, {}) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise fail(f"{path} does not hold a JSON object with a {client.key!r} object; fix it, "
                   "or paste the entry --print shows")
    return {**data, client.key: {**servers, name: entry}}


def write_config(target: ConfigTarget, data: dict[str, object], *, secret: bool) -> None:
    """Write ``data`` through a temporary file renamed over the old one (a reader sees the old
    file or the new one, never half); 0600 when it carries a credential, else the old file's
    mode (0644 for a new one). Never through a symlink (``ConfigTarget``)."""
    _, mode = target.read_text()
    target.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n",
                 mode=0o600 if secret else (mode if mode is not None else 0o644))


def _serve_args(targets: list[str], *, config: str | None, workspace: str | None,
                no_builtins: bool, state_dir: str | None, store: str | None) -> list[str]:
    args = ["serve", "--stdio"]
    for option, value in (("--config", config), ("--workspace", workspace),
                          ("--state-dir", state_dir), ("--store", store)):
        if value is not None:
            args += [option, value]
    if no_builtins:
        args.append("--no-builtins")
    return args + targets


def _mint(client_name: str, state_dir: Path, store: str | None) -> tuple[ClientTokens, str]:
    """A new token for ``client_name`` in the server's store (the one ``tokens add`` uses)."""
    try:
        tokens = ClientTokens(store_target(store, state_dir, create=False))
        if any(entry.name == client_name for entry in tokens.list()):
            raise fail(f"client {client_name!r} already has a token; pass --client-name NAME, "
                       f"or toolkeeper tokens revoke {client_name} first")
        return tokens, tokens.add(client_name)
    except ToolkeeperError as exc:
        raise fail(exc) from exc


Opt = typer.Option


def install(
    client: Annotated[ClientKind, typer.Argument(help="The client whose config to write.")],
    targets: Annotated[list[str] | None, typer.Argument(
        help="Modules or files of tools to serve ('pkg.mod', 'file.py', 'file.py:obj').")] = None,
    name: Annotated[str, Opt(help="The server's name in the client's config.")] = "toolkeeper",
    config: Annotated[Path | None, Opt(help="toolkeeper.toml for serve (made absolute).")] = None,
    workspace: Annotated[Path | None, Opt(
        help="The built-in tools' workspace (default: --project, else here).")] = None,
    no_builtins: Annotated[bool, Opt("--no-builtins", help="Serve only the TARGET tools.")
                           ] = False,
    env: Annotated[list[str] | None, Opt(help="KEY=VALUE for the server's environment. "
                                         "Repeatable.")] = None,
    project: Annotated[Path | None, Opt(
        help="Cursor: write DIR/.cursor/mcp.json instead of ~/.cursor/mcp.json. VS Code: the "
             "workspace folder of .vscode/mcp.json (default: here).")] = None,
    http: Annotated[str | None, Opt(
        help="Reach a running toolkeeper serve at this URL instead of launching one over stdio "
             "(with a new client token).")] = None,
    client_name: Annotated[str | None, Opt(
        help="With --http: the token's client name (default: the client kind).")] = None,
    state_dir: Annotated[Path | None, Opt(
        help="The server's state dir (default: serve's, $XDG_STATE_HOME/toolkeeper else "
             "~/.local/state/toolkeeper): with --http, where the client token is made; over "
             "stdio, passed to serve.")
                         ] = None,
    store: Store = None,
    print_only: Annotated[bool, Opt("--print", help="Print the entry; write nothing.")] = False,
    config_path: Annotated[Path | None, Opt(help="Write this file instead of the client's.")
                           ] = None,
) -> None:
    """Add toolkeeper to a desktop client's MCP servers.

    The client is Claude Desktop, Cursor or VS Code."""
    spec = CLIENTS[client]
    if project is not None and client is ClientKind.CLAUDE_DESKTOP:
        raise fail("--project is for cursor and vscode; Claude Desktop has one config per user")
    if not name.strip() or not name.isprintable():
        raise fail(f"--name must be a printable, non-empty name, got {name!r}")
    try:
        path = config_target(client, project, config_path)
    except ToolkeeperError as exc:
        raise fail(exc) from exc
    if http is not None:
        if not spec.remote:
            raise fail(f"{spec.label}'s config file takes stdio servers only: drop --http to "
                       "install toolkeeper over stdio")
        _install_remote(spec, http, name=name, path=path, print_only=print_only,
                        client_name=client_name or client.value,
                        state_dir=state_dir or default_state_dir(), store=store)
        return
    entry = _local(spec, targets or [], config=config, workspace=workspace, project=project,
                   no_builtins=no_builtins, env=_env(env or []), state_dir=state_dir,
                   store=store)
    _emit(spec, name, entry, path, print_only=print_only, secret=False)


def _local(spec: ClientFile, targets: list[str], *, config: Path | None,
           workspace: Path | None, project: Path | None, no_builtins: bool,
           env: dict[str, str], state_dir: Path | None, store: str | None) -> dict[str, Any]:
    resolved = [_target(t) for t in targets]
    config_file_ = _existing(config, "--config", directory=False)
    if no_builtins or config_file_ is not None:
        folder = _existing(workspace, "--workspace", directory=True)
    else:  # the client starts the server anywhere ('/' included): pin the workspace
        folder = _existing(workspace or project or Path.cwd(), "--workspace", directory=True)
    states = os.path.abspath(state_dir.expanduser()) if state_dir is not None else None
    if folder is not None and not no_builtins:
        _check_reach(Path(states) if states else default_state_dir(), Path(folder))
    args = _serve_args(resolved, config=config_file_, workspace=folder,
                       no_builtins=no_builtins, state_dir=states, store=store)
    return stdio_entry(spec, launcher() + args, env)


def _check_reach(state: Path, workspace: Path) -> None:
    """Refuse now what serve would refuse at every launch, where only the client's log shows
    it: a workspace the built-in tools reach that holds, or is inside, a state folder (tokens)
    — this server's or any other's, named."""
    try:
        out_of_reach(state, [("workspace", workspace)])
        no_state_in(workspace)
    except ToolkeeperError as exc:
        raise fail(exc) from exc


def _install_remote(spec: ClientFile, url: str, *, name: str, path: ConfigTarget,
                    print_only: bool,
                    client_name: str, state_dir: Path, store: str | None) -> None:
    mcp_url = _mcp_url(url)
    if not print_only:
        merged(path, spec, name, {})  # refuse a broken file before a token is made for it
    tokens, token = _mint(client_name, state_dir, store)
    try:
        _emit(spec, name, http_entry(spec, mcp_url, token), path, print_only=print_only,
              secret=True, note=f" with a new token for client {client_name!r}")
    except BaseException:
        tokens.revoke(client_name)  # no config holds it: it must not outlive the failure
        raise


def _emit(spec: ClientFile, name: str, entry: dict[str, object], path: ConfigTarget, *,
          print_only: bool, secret: bool, note: str = "") -> None:
    """Print the entry (``--print``) or merge it into the client's file."""
    if print_only:
        sys.stdout.write(json.dumps({spec.key: {name: entry}}, indent=2, ensure_ascii=False)
                         + "\n")
        return
    try:
        write_config(path, merged(path, spec, name, entry), secret=secret)
    except OSError as exc:
        raise fail(f"cannot write {path.path}: {exc.strerror or exc}") from exc
    except ToolkeeperError as exc:
        raise fail(exc) from exc
    out.print(f"wrote server {name!r} to {path.path}{note}; restart {spec.label} (or reload its "
              "MCP servers) to use it", markup=False, highlight=False, soft_wrap=True)
