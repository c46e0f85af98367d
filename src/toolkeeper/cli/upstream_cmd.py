"""``toolkeeper upstream``: the OAuth of upstream MCP servers — a person's consent once
(``login``: the link printed, the redirect caught on loopback or the code pasted back), the
tokens kept (``status``), and forgotten (``logout``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, urlsplit

import anyio
import typer

from ..config import MCPServerConfig, load_config
from ..errors import ToolkeeperError
from ..gateway.credentials import UpstreamCredentials
from ..gateway.upstream_auth import Redirect, refusal, upstream_auth
from ..server.tokens import upstream_key
from .redirect_listener import LOOPBACK, RedirectListener
from .report import StateDir, Store, fail, in_range, out, state_dir_of, store_target

__all__ = ["upstream_app"]

upstream_app = typer.Typer(help="OAuth to upstream MCP servers: log in once, see, forget.",
                           no_args_is_help=True)

Config = Annotated[Path, typer.Option("--config", help="The toolkeeper.toml serve uses.")]
Name = Annotated[str, typer.Argument(help="The upstream's name (\\[\\[mcp.servers]] name).")]


def _server(config: Path, name: str) -> MCPServerConfig:
    try:
        servers = {s.name: s for s in load_config(config).mcp.servers}
    except (ToolkeeperError, OSError) as exc:
        raise fail(exc) from exc
    if name not in servers:
        known = ", ".join(sorted(servers)) or "none"
        raise fail(f"no MCP server named '{name}' in {config} (configured: {known})")
    if servers[name].oauth is None:
        raise fail(f"MCP server '{name}' has no [mcp.servers.oauth] in {config}: add one "
                   "(grant = \"authorization_code\" or \"client_credentials\") to use OAuth")
    return servers[name]


def _credentials(config: Path, state_dir: Path | None, store: str | None) -> tuple[
        UpstreamCredentials, str]:
    state = state_dir_of(state_dir)
    try:
        store = store or load_config(config).store
        target = store_target(store, state)
        return UpstreamCredentials(target, upstream_key(state)), str(target).split("@")[-1]
    except (ToolkeeperError, ImportError) as exc:
        raise fail(exc) from exc


@upstream_app.command("login")
def login(name: Name, config: Config = Path("toolkeeper.toml"), state_dir: StateDir = None,
          store: Store = None,
          paste: Annotated[bool, typer.Option(
              "--paste", help="Ask for the code (or the address the browser was sent to) "
                              "instead of listening on the loopback redirect_uri.")] = False,
          timeout: Annotated[float, typer.Option(help="Seconds to wait for the browser.")]
          = 300.0) -> None:
    """Consent once in a browser: prints the link, and finishes when the authorization server
    sends the browser back to redirect_uri (a listener on 127.0.0.1) or when the code is
    pasted. The tokens are kept sealed in the store; serve uses and refreshes them."""
    in_range("--timeout", timeout, 1, 86400, "a number of seconds")
    server = _server(config, name)
    credentials, where = _credentials(config, state_dir, store)
    try:
        tools = anyio.run(_login, server, credentials, paste, timeout)
    except Exception as exc:
        raise fail(refusal(name, exc) or f"login to MCP server '{name}' failed: "
                   f"{' '.join(str(exc).split())[:300] or type(exc).__name__}") from exc
    out.print(f"logged in to MCP server '{name}' ({tools} tools): its tokens are kept sealed in "
              f"{where}; toolkeeper serve uses them and refreshes them", markup=False,
              highlight=False, soft_wrap=True)


@upstream_app.command("logout")
def logout(name: Name, config: Config = Path("toolkeeper.toml"), state_dir: StateDir = None,
           store: Store = None) -> None:
    """Forget the tokens and client registration kept for an upstream."""
    credentials, where = _credentials(config, state_dir, store)
    dropped = credentials.forget(name)
    out.print(f"MCP server '{name}': {dropped} kept value(s) forgotten in {where}",
              markup=False, highlight=False)


@upstream_app.command("status")
def status(config: Config = Path("toolkeeper.toml"), state_dir: StateDir = None,
           store: Store = None) -> None:
    """Which upstreams use OAuth and which have tokens kept."""
    try:
        servers = [s for s in load_config(config).mcp.servers if s.oauth is not None]
    except (ToolkeeperError, OSError) as exc:
        raise fail(exc) from exc
    if not servers:
        out.print(f"no MCP server in {config} uses OAuth: give one an [mcp.servers.oauth] table "
                  "(grant = \"authorization_code\" or \"client_credentials\")", markup=False,
                  highlight=False)
        return
    kept = _credentials(config, state_dir, store)[0].kept()
    for server in servers:
        assert server.oauth is not None
        state = "tokens kept" if server.name in kept else \
            f"no token: run `toolkeeper upstream login {server.name}`"
        out.print(f"{server.name}  {server.oauth.grant}  {state}", markup=False,
                  highlight=False)


async def _login(server: MCPServerConfig, credentials: UpstreamCredentials, paste: bool,
                 timeout: float) -> int:
    """Connect with a person's browser step, list the tools once; how many were listed."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    assert server.oauth is not None and server.url is not None
    target = urlsplit(server.oauth.redirect_uri)
    listening = not paste and target.hostname in LOOPBACK
    with anyio.fail_after(timeout), \
            (RedirectListener(target) if listening else _NoListener()) as listener:
        redirect = _redirect(listener if listening else None)
        auth = upstream_auth(server, credentials.storage(server, fresh=True),
                             redirect=redirect)
        async with httpx2.AsyncClient(auth=auth, timeout=server.call_timeout_s) as http, \
                Client(streamable_http_client(server.url, http_client=http)) as client:
            return len((await client.list_tools()).tools)


def _redirect(listener: RedirectListener | None) -> Redirect:
    """Show the link; then the code from the listener, or pasted on stdin."""
    from mcp.shared.auth import AuthorizationCodeResult

    shown: dict[str, str] = {}

    async def show(url: str) -> None:
        shown["state"] = parse_qs(urlsplit(url).query).get("state", [""])[0]
        how = "this machine's browser will be sent back here" if listener else \
            "then paste the code, or the whole address the browser was sent to, here"
        print(f"open this link to consent ({how}):\n{url}", flush=True)

    async def code() -> AuthorizationCodeResult:
        query = await listener.wait() if listener else _pasted(await anyio.to_thread.run_sync(
            sys.stdin.readline, abandon_on_cancel=True))
        if "error" in query:
            raise RuntimeError(f"the authorization server answered {query['error']}: "
                               f"{query.get('error_description', '')}".strip(": "))
        if not query.get("code"):
            raise RuntimeError("no authorization code came back")
        return AuthorizationCodeResult(code=query["code"], iss=query.get("iss"),
                                       state=query.get("state", shown.get("state")))

    return show, code


def _pasted(line: str) -> dict[str, str]:
    """A pasted address's query, or a pasted code alone."""
    line = line.strip()
    if "?" in line or line.startswith(("http://", "https://")):
        return {k: v[0] for k, v in parse_qs(urlsplit(line).query).items()}
    return {"code": line} if line else {}


class _NoListener:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None
