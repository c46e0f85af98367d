"""The gateway's upstream client as the conformance suite's client under test:
``python conformance_client.py handshake|discover URL`` (the suite appends the URL of its
scenario server). It connects the way the gateway connects to an upstream — ``Upstream`` with
its bounds, ``discover = true`` or not — lists the tools and calls each one (``add_numbers``
with two numbers), then closes.

For an ``auth/*`` scenario (``MCP_CONFORMANCE_SCENARIO``; ``MCP_CONFORMANCE_CONTEXT`` holds the
credentials the scenario registered beforehand) the upstream gets an ``[mcp.servers.oauth]``
section in a config of its own, and the driver plays the operator: it runs ``toolkeeper
upstream login`` as a person would and acts as their browser on the link it prints (the
scenario's authorization server consents at once and sends the browser to the loopback
redirect), and when a call answers that a login is needed (a step-up of scope), it logs in
again and calls again. Client credentials need no person; the private key a scenario hands
out is written where an operator keeps one, in the state dir, owner-only."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx2

from toolkeeper.builtins.state_dirs import mark_state_dir
from toolkeeper.config import MCPServerConfig, load_config
from toolkeeper.gateway.credentials import UpstreamCredentials
from toolkeeper.gateway.upstream import Upstream, UpstreamError
from toolkeeper.server.tokens import upstream_key

NAME = "conformance"
CIMD = "https://conformance-test.local/client-metadata.json"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _oauth_config(state: Path, url: str, scenario: str, context: dict[str, str]) -> Path:
    lines = ["[mcp]", "enabled = true", "[[mcp.servers]]", f'name = "{NAME}"', f'url = "{url}"',
             "connect_timeout_s = 20", "call_timeout_s = 20", "[mcp.servers.oauth]",
             f'redirect_uri = "http://127.0.0.1:{_free_port()}/callback"']
    if "client-credentials" in scenario:
        lines.append('grant = "client_credentials"')
    if context.get("client_id"):
        lines.append(f'client_id = "{context["client_id"]}"')
    if context.get("client_secret"):
        lines.append(f'client_secret = "{context["client_secret"]}"')
    if context.get("private_key_pem"):
        key = state / f"{NAME}.pem"
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(context["private_key_pem"])
        lines += [f'private_key_file = "{key}"',
                  f'signing_algorithm = "{context.get("signing_algorithm", "RS256")}"']
    if scenario == "auth/basic-cimd":
        lines.append(f'client_metadata_url = "{CIMD}"')
    path = state / "toolkeeper.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _login(config: Path, state: Path) -> None:
    """``toolkeeper upstream login`` as an operator runs it, with the driver as the browser."""
    login = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "upstream", "login", NAME, "--config",
         str(config), "--state-dir", str(state), "--timeout", "20"],
        stdout=subprocess.PIPE, text=True)
    assert login.stdout is not None
    for line in login.stdout:
        if line.startswith(("http://", "https://")):
            _browse(line.strip())
            break
    rest = login.stdout.read()
    if login.wait(timeout=30) != 0:
        raise SystemExit(f"upstream login failed: {rest}")


def _browse(link: str) -> None:
    """A browser whose person consents: to the authorization server, then where it sends."""
    with httpx2.Client(follow_redirects=False, timeout=10) as browser:
        answer = browser.get(link)
        if answer.is_redirect:
            browser.get(answer.headers["location"])


async def _use(config: MCPServerConfig, credentials: UpstreamCredentials | None,
               relogin: Callable[[], None] | None = None) -> None:
    async with anyio.create_task_group() as group:
        upstream = Upstream(config, group, credentials=credentials)
        for tool in await upstream.list_tools():
            arguments = {"a": 2, "b": 3} if tool.name == "add_numbers" else {}
            try:
                await upstream.call(tool.name, arguments)
            except UpstreamError as exc:
                if "toolkeeper upstream login" not in str(exc) or relogin is None:
                    raise
                await anyio.to_thread.run_sync(relogin)  # the operator acts on the line
                await _again(upstream, tool.name, arguments)
        await upstream.close()


async def _again(upstream: Upstream, tool: str, arguments: dict[str, int]) -> None:
    """The call once more, once the gateway's backoff lets it reconnect (bounded)."""
    with anyio.fail_after(30):
        while True:
            try:
                await upstream.call(tool, arguments)
                return
            except UpstreamError as exc:
                if "next try in" not in str(exc) and "login" not in str(exc):
                    raise
            await anyio.sleep(0.2)


async def main(mode: str, url: str) -> None:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if not scenario.startswith("auth/"):
        await _use(MCPServerConfig(name=NAME, url=url, connect_timeout_s=20, call_timeout_s=20,
                                   discover=mode == "discover"), None)
        return
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    # the state dir holds a login's tokens and the key sealing them: gone when the run ends
    with tempfile.TemporaryDirectory(prefix="tk-conformance-") as name:
        state = Path(name)
        mark_state_dir(state)
        config_file = _oauth_config(state, url, scenario, context)
        config = load_config(config_file).mcp.servers[0].model_copy(
            update={"discover": mode == "discover"})
        assert config.oauth is not None
        if config.oauth.grant == "authorization_code":
            _login(config_file, state)
        credentials = UpstreamCredentials(state / "toolkeeper.db", upstream_key(state))
        await _use(config, credentials, lambda: _login(config_file, state))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[-1])
