"""OAuth to an upstream, as an operator meets it: ``toolkeeper upstream login`` (a real process,
the test as the person's browser), a real ``toolkeeper serve`` gateway, the official MCP client,
and an upstream behind OAuth written with the SDK and Starlette (``oauth_upstream.py``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from toolkeeper.config import load_config
from toolkeeper.gateway.credentials import UpstreamCredentials
from toolkeeper.gateway.upstream import Upstream, UpstreamError
from toolkeeper.server.tokens import upstream_key

from ..blocks import text_of
from ..processes import readable
from ..server.test_serve import CLIENT_TOKENS, TOKEN, _client, _start
from ..server.test_serve_gateway import _until_listed

UPSTREAM = str(Path(__file__).resolve().parent / "oauth_upstream.py")


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(the upstream's MCP URL, its state folder)."""
    state = tmp_path / "upstream"
    state.mkdir()
    proc = subprocess.Popen([sys.executable, UPSTREAM, str(state)])
    port = state / "port"
    deadline = time.monotonic() + 30
    while not (port.exists() and port.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert port.exists(), "the upstream did not start within 30 s"
    yield f"http://127.0.0.1:{port.read_text()}/mcp", state
    proc.kill()
    proc.wait(timeout=30)


def _config(tmp_path: Path, url: str, oauth: str = "") -> Path:
    with socket.socket() as free:  # a free port for the loopback redirect
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    config = tmp_path / "toolkeeper.toml"
    config.write_text(
        f"[mcp]\nenabled = true\n[[mcp.servers]]\nname = \"up\"\nurl = \"{url}\"\n"
        "risk = \"safe\"\nconnect_timeout_s = 20\n[mcp.servers.oauth]\n"
        f"redirect_uri = \"http://127.0.0.1:{port}/callback\"\n{oauth}")
    return config


def _login(tmp_path: Path, config: Path) -> subprocess.CompletedProcess[str]:
    """``toolkeeper upstream login up``, the test acting as the person's browser."""
    login = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "upstream", "login", "up", "--config",
         str(config), "--state-dir", str(tmp_path / "state"), "--timeout", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert login.stdout is not None
    shown = []
    for line in login.stdout:
        shown.append(line)
        if line.startswith("http://"):
            with httpx2.Client(follow_redirects=True, timeout=30) as browser:
                assert "Done" in browser.get(line.strip()).text
            break
    out, err = login.communicate(timeout=60)
    return subprocess.CompletedProcess(login.args, login.returncode, "".join(shown) + out, err)


def _kept(tmp_path: Path, url: str) -> tuple[dict[str, object] | None, float | None]:
    credentials = UpstreamCredentials(tmp_path / "state" / "toolkeeper.db",
                                      upstream_key(tmp_path / "state"))
    text = credentials.get("up", url, "tokens")
    if text is None:
        return None, None
    kept = json.loads(text)
    return kept["token"], kept["expires_at"]


def _said(tmp_path: Path, config: Path, needle: str) -> list[str]:
    """What a ``toolkeeper serve`` on ``config`` says on stderr up to ``needle`` (it is then
    stopped)."""
    proc, _served = _start(tmp_path, "--config", str(config))
    try:
        return _until_line(proc, needle)
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _until_line(proc: subprocess.Popen[str], needle: str) -> list[str]:
    """serve's stderr lines up to the one with ``needle`` (the test fails after 60 s)."""
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and readable([proc.stderr], deadline - time.monotonic()):
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if needle in line:
            return lines
    pytest.fail(f"serve never said {needle!r}: {lines}")


async def _whoami(tmp_path: Path, config: Path, before: Callable[[], object] | None = None
                  ) -> tuple[Any, str]:
    """A real serve of ``config``: once the upstream's ``whoami`` is listed (and ``before``
    has run), the official client's call of it; the result and serve's URL."""
    proc, served = _start(tmp_path, "--config", str(config))
    try:
        async with _client(served) as client:
            await _until_listed(client, "up-whoami")
            if before is not None:
                before()
            return await client.call_tool("up-whoami", {}), served
    finally:
        proc.kill()
        proc.wait(timeout=30)


async def test_a_client_s_own_token_is_never_passed_upstream(
        tmp_path: Path, upstream: tuple[str, Path]) -> None:
    url, state = upstream
    config = _config(tmp_path, url)
    login = _login(tmp_path, config)
    assert login.returncode == 0, login.stderr
    assert "logged in to MCP server 'up' (1 tools)" in login.stdout
    called, served = await _whoami(tmp_path, config)
    assert not called.is_error and text_of(called.content[0]) == "hello from upstream"
    seen = (state / "seen").read_text().splitlines()
    assert any(line.startswith("Bearer up-") for line in seen)
    assert all(line == "-" or line.startswith("Bearer up-") for line in seen), seen
    assert CLIENT_TOKENS[served] not in "\n".join(seen) and TOKEN not in "\n".join(seen)


async def test_before_a_login_serve_says_in_one_line_which_command_to_run(
        tmp_path: Path, upstream: tuple[str, Path]) -> None:
    url, _state = upstream
    config = _config(tmp_path, url)
    text = config.read_text().replace("enabled = true\n", "enabled = true\nrefresh_s = 0.2\n")
    config.write_text(text)
    proc, served = _start(tmp_path, "--config", str(config))
    try:
        lines = _until_line(proc, "toolkeeper upstream login up")
        assert _login(tmp_path, config).returncode == 0  # the operator does as told
        async with _client(served) as client:  # listed again: no restart (within the backoff)
            with anyio.fail_after(90):  # the backoff after failures reaches 30 s
                while "up-whoami" not in {t.name for t in (await client.list_tools()).tools}:
                    await anyio.sleep(0.2)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert lines[-1].strip() == ("toolkeeper: MCP server 'up' has no OAuth token yet: run "
                                 "`toolkeeper upstream login up`")
    assert not any("Traceback" in line for line in lines)


def _until_expired(tmp_path: Path, url: str) -> dict[str, object]:
    """The kept token, once its expiry has passed (the test fails after 30 s)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        token, expires_at = _kept(tmp_path, url)
        if token is not None and expires_at is not None and expires_at < time.time():
            return token
        time.sleep(0.05)
    pytest.fail("the kept token did not expire")


async def test_an_expired_token_is_refreshed_and_the_new_one_kept(
        tmp_path: Path, upstream: tuple[str, Path]) -> None:
    url, state = upstream
    (state / "expires_in").write_text("1")
    config = _config(tmp_path, url)
    assert _login(tmp_path, config).returncode == 0
    old = _until_expired(tmp_path, url)
    (state / "expires_in").write_text("3600")
    called, _served = await _whoami(tmp_path, config)
    assert not called.is_error
    assert "refresh_token" in (state / "grants").read_text().split()
    new, _expires = _kept(tmp_path, url)
    assert new is not None and new["access_token"] != old["access_token"]
    assert new["refresh_token"] == old["refresh_token"]  # not rotated: carried forward


async def test_a_refresh_that_fails_is_one_line_naming_the_login(
        tmp_path: Path, upstream: tuple[str, Path]) -> None:
    url, state = upstream
    (state / "expires_in").write_text("1")
    config = _config(tmp_path, url)
    assert _login(tmp_path, config).returncode == 0
    _until_expired(tmp_path, url)
    (state / "no_refresh").touch()
    lines = _said(tmp_path, config, "toolkeeper upstream login up")
    assert lines[-1].strip() == ("toolkeeper: MCP server 'up' could not refresh its OAuth "
                                 "token: run `toolkeeper upstream login up`")


async def test_a_refused_token_reaches_the_model_as_an_error_naming_the_login(
        tmp_path: Path, upstream: tuple[str, Path]) -> None:
    url, state = upstream
    config = _config(tmp_path, url)
    assert _login(tmp_path, config).returncode == 0
    refused, _served = await _whoami(tmp_path, config, before=(state / "revoked").touch)
    assert refused.is_error
    assert text_of(refused.content[0]) == ("MCP server 'up' refused its OAuth token: run "
                                           "`toolkeeper upstream login up`")


async def test_client_credentials_need_no_person(
        tmp_path: Path, upstream: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    url, state = upstream
    monkeypatch.setenv("UP_SECRET", "machine-secret")
    config = _config(tmp_path, url, 'grant = "client_credentials"\nclient_id = "machine"\n'
                                    'client_secret = "${UP_SECRET}"\n')
    called, _served = await _whoami(tmp_path, config)
    assert not called.is_error
    assert (state / "grants").read_text().split() == ["client_credentials"]
    assert "machine-secret" not in (tmp_path / "state" / "toolkeeper.db").read_bytes().decode(
        "latin-1")


def test_login_takes_the_code_pasted_back(tmp_path: Path, upstream: tuple[str, Path]) -> None:
    url, _state = upstream
    config = _config(tmp_path, url)
    login = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "upstream", "login", "up", "--config",
         str(config), "--state-dir", str(tmp_path / "state"), "--paste", "--timeout", "60"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert login.stdout is not None and login.stdin is not None
    for line in login.stdout:
        if line.startswith("http://"):
            with httpx2.Client(timeout=30) as browser:  # the browser lands on a page it
                sent_to = browser.get(line.strip()).headers["location"]  # cannot reach
            login.stdin.write(sent_to + "\n")
            login.stdin.flush()
            break
    out, err = login.communicate(timeout=60)
    assert login.returncode == 0, err
    assert "logged in to MCP server 'up'" in out
    assert _kept(tmp_path, url)[0] is not None
    assert _upstream(tmp_path, "status", config) == "up  authorization_code  tokens kept"
    assert _upstream(tmp_path, "logout", config, "up").startswith(
        "MCP server 'up': 2 kept value(s) forgotten in ")  # tokens, client
    assert _upstream(tmp_path, "status", config) == (
        "up  authorization_code  no token: run `toolkeeper upstream login up`")


def _upstream(tmp_path: Path, command: str, config: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "toolkeeper.cli", "upstream", command, *args, "--config",
         str(config), "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=60, check=True, env={**os.environ,
                                                                   "COLUMNS": "300"})
    return done.stdout.strip()


async def test_a_replica_uses_the_token_another_refreshed_instead_of_a_spent_refresh_token(
        tmp_path: Path, upstream: tuple[str, Path]) -> None:
    url, state = upstream
    # long enough for the replica to connect with it on a busy machine (1 s was not: a whole
    # suite alone once took longer, and the replica's token was refused); then waited out
    (state / "expires_in").write_text("8")
    (state / "rotate").touch()
    config_file = _config(tmp_path, url)
    assert _login(tmp_path, config_file).returncode == 0
    config = load_config(config_file).mcp.servers[0]
    store = tmp_path / "state" / "toolkeeper.db"
    async with anyio.create_task_group() as group:
        replicas = [Upstream(config, group, credentials=UpstreamCredentials(
            store, upstream_key(tmp_path / "state"))) for _ in range(2)]
        await replicas[1].list_tools()  # holds the first token, soon expired
        _until_expired(tmp_path, url)
        (state / "expires_in").write_text("3600")
        before = _refreshes(state)
        first = await replicas[0].call("whoami", {})  # refreshes: the refresh token is spent
        second = await replicas[1].call("whoami", {})  # reads the new token, spends nothing
        for replica in replicas:
            await replica.close()
    assert not first.is_error and not second.is_error
    assert _refreshes(state) == before + 1


def _refreshes(state: Path) -> int:
    return (state / "grants").read_text().split().count("refresh_token")


async def test_a_replica_with_another_key_says_which_variable_to_set(
        tmp_path: Path, upstream: tuple[str, Path]) -> None:
    url, _state = upstream
    config_file = _config(tmp_path, url)
    assert _login(tmp_path, config_file).returncode == 0
    config = load_config(config_file).mcp.servers[0]
    other = UpstreamCredentials(tmp_path / "state" / "toolkeeper.db", os.urandom(32))
    async with anyio.create_task_group() as group:
        replica = Upstream(config, group, credentials=other)
        with pytest.raises(UpstreamError) as refused:
            await replica.list_tools()
        await replica.close()
    assert str(refused.value) == (
        "MCP server 'up': its OAuth tokens in the store do not open with this server's upstream "
        "key (set TOOLKEEPER_UPSTREAM_KEY to the same value on every replica), or log in again: "
        "run `toolkeeper upstream login up`")
