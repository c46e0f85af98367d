"""An upstream reached with ``private_key_jwt``: the client proves itself with an assertion signed
by its private key, which the operator keeps in the state dir, owner-only. A real ``toolkeeper
serve`` gateway, the official MCP client, and the OAuth upstream written with the SDK
(``oauth_upstream.py``) verifying the assertion with the key's public half."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from toolkeeper.builtins.state_dirs import mark_state_dir
from toolkeeper.config import load_config
from toolkeeper.gateway.credentials import UpstreamCredentials
from toolkeeper.gateway.upstream import Upstream, UpstreamError
from toolkeeper.server.tokens import upstream_key

from ..blocks import text_of
from .test_upstream_auth import _config, _said, _whoami, upstream

__all__ = ["upstream"]

pytestmark = pytest.mark.anyio

MACHINE = 'grant = "client_credentials"\nclient_id = "machine"\n'


def _keyed(upstream_state: Path, key: Path, private: PrivateKeyTypes, mode: int = 0o600) -> None:
    """``private`` written to ``key`` (with ``mode``); its public half given to the upstream."""
    key.parent.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(private.private_bytes(serialization.Encoding.PEM,
                                        serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()))
    os.chmod(key, mode)  # whatever the umask took away
    (upstream_state / "client.pub").write_bytes(private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))


@pytest.mark.parametrize("private", [ec.generate_private_key(ec.SECP256R1()),
                                     ed25519.Ed25519PrivateKey.generate()],
                         ids=["ES256", "EdDSA"])
async def test_a_private_key_jwt_client_needs_no_person_and_its_key_stays_in_the_state_dir(
        tmp_path: Path, upstream: tuple[str, Path], private: PrivateKeyTypes) -> None:
    url, state = upstream
    key = tmp_path / "state" / "up.pem"
    _keyed(state, key, private)
    config = _config(tmp_path, url, f'{MACHINE}private_key_file = "{key}"\n')
    called, _served = await _whoami(tmp_path, config)
    assert not called.is_error, called.content
    assert text_of(called.content[0]) == "hello from upstream"
    assert (state / "grants").read_text().split() == ["client_credentials"]
    base = url.removesuffix("/mcp")
    assert (state / "assertions").read_text().splitlines() == [f"machine machine {base}"]
    kept = (tmp_path / "state" / "toolkeeper.db").read_bytes()
    assert b"PRIVATE KEY" not in kept and (state / "seen").exists()


async def test_a_key_outside_the_state_dir_is_refused_in_one_line_and_never_sent(
        tmp_path: Path, upstream: tuple[str, Path]) -> None:
    url, state = upstream
    key = tmp_path / "keys" / "up.pem"  # a folder a tool's workspace may hold
    _keyed(state, key, ec.generate_private_key(ec.SECP256R1()))
    config = _config(tmp_path, url, f'{MACHINE}private_key_file = "{key}"\n')
    lines = _said(tmp_path, config, "private_key_file")
    assert lines[-1].strip() == (
        f"toolkeeper: MCP server 'up': oauth private_key_file {key} is not in a toolkeeper "
        "state folder, where a tool could read it; move it into the state dir (or a folder "
        "holding a .toolkeeper-state file) with chmod 600")
    assert not any("Traceback" in line for line in lines)
    assert not (state / "grants").exists()  # nothing was signed, nothing asked


@pytest.mark.parametrize("proof", ['client_secret = "machine-secret"\n', "key"],
                         ids=["secret", "key"])
async def test_credentials_not_bound_to_an_issuer_are_said_in_one_line_not_a_python_warning(
        tmp_path: Path, upstream: tuple[str, Path], proof: str) -> None:
    url, state = upstream
    if proof == "key":
        key = tmp_path / "state" / "up.pem"
        _keyed(state, key, ec.generate_private_key(ec.SECP256R1()))
        proof = f'private_key_file = "{key}"\n'
    config = _config(tmp_path, url, MACHINE + proof)
    lines = _said(tmp_path, config, "listed:")
    assert "toolkeeper: MCP server 'up' runs remote (Streamable HTTP; its client credentials go " \
           "to whichever authorization server it names: set issuer under its " \
           "[mcp.servers.oauth] to bind them to one)\n" in lines, lines
    assert all(line.startswith("toolkeeper: ") for line in lines), lines
    assert (state / "grants").read_text().split() == ["client_credentials"]


def _linked(tmp_path: Path, state: Path) -> Path:
    _keyed(state, tmp_path / "state" / "real.pem", ec.generate_private_key(ec.SECP256R1()))
    (tmp_path / "state" / "up.pem").symlink_to(tmp_path / "state" / "real.pem")
    return tmp_path / "state" / "up.pem"


def _shared(tmp_path: Path, state: Path) -> Path:
    _keyed(state, tmp_path / "state" / "up.pem", ec.generate_private_key(ec.SECP256R1()), 0o640)
    return tmp_path / "state" / "up.pem"


def _rsa_as_es256(tmp_path: Path, state: Path) -> Path:
    _keyed(state, tmp_path / "state" / "up.pem",
           rsa.generate_private_key(public_exponent=65537, key_size=2048))
    return tmp_path / "state" / "up.pem"


@pytest.mark.parametrize(("make", "said"), [
    (_linked, "cannot be opened (Too many levels of symbolic links); give the path of a "
              "regular file (not a symlink)"),
    (_shared, "is open to others (mode 640, owner uid {uid}); make it owned by uid {uid} and "
              "chmod 600 it"),
    (_rsa_as_es256, "is an RSA key, which cannot sign ES256; set signing_algorithm = \"RS256\" "
                    "or leave it out")], ids=["symlink", "group-readable", "wrong-algorithm"])
async def test_a_key_another_could_read_or_that_cannot_sign_is_refused_naming_the_fix(
        tmp_path: Path, upstream: tuple[str, Path], make: object, said: str) -> None:
    url, state = upstream
    assert callable(make)
    key = make(tmp_path, state)
    mark_state_dir(tmp_path / "state")
    config_file = _config(tmp_path, url, f'{MACHINE}private_key_file = "{key}"\n'
                                         'signing_algorithm = "ES256"\n')
    config = load_config(config_file).mcp.servers[0]
    credentials = UpstreamCredentials(tmp_path / "state" / "toolkeeper.db",
                                      upstream_key(tmp_path / "state"))
    async with anyio.create_task_group() as group:
        connected = Upstream(config, group, credentials=credentials)
        with pytest.raises(UpstreamError) as refused:
            await connected.list_tools()
        await connected.close()
    assert str(refused.value) == (f"MCP server 'up': oauth private_key_file {key} "
                                  + said.format(uid=os.geteuid()))
    assert not (state / "grants").exists()


@pytest.mark.parametrize(("oauth", "said"), [
    (f'{MACHINE}private_key_file = "up.pem"\n', "must be an absolute path"),
    (f'{MACHINE}client_secret = "s"\nprivate_key_file = "/k.pem"\n', "give one"),
    ('client_id = "machine"\nprivate_key_file = "/k.pem"\n', "is for grant = "),
    (f'{MACHINE}token_endpoint_auth_method = "private_key_jwt"\n', "needs the private_key_file"),
    (f'{MACHINE}private_key_file = "/k.pem"\ntoken_endpoint_auth_method = "client_secret_post"'
     '\n', 'set token_endpoint_auth_method = "private_key_jwt" or leave it out')],
    ids=["relative", "with-secret", "no-grant", "no-key", "other-method"])
def test_a_private_key_setting_that_cannot_work_is_refused_naming_what_it_lacks(
        tmp_path: Path, oauth: str, said: str) -> None:
    config = _config(tmp_path, "http://127.0.0.1:9/mcp", oauth)
    checked = subprocess.run(
        [sys.executable, "-m", "toolkeeper.cli", "upstream", "status", "--config", str(config),
         "--state-dir", str(tmp_path / "state")], capture_output=True, text=True, timeout=60,
        check=False)
    assert checked.returncode != 0 and said in checked.stderr, checked
    assert "Traceback" not in checked.stderr
