"""``toolkeeper serve`` as an OAuth 2.1 protected resource, with a real process: an authorization
server's metadata and key set served on loopback by a small real HTTP server, keys made here,
tokens signed here, the official MCP client sending them. Each refused token gets 401 with the
challenge the MCP authorization spec names; a scope that does not cover a tool hides it and
refuses its call (403 ``insufficient_scope``); only the operator scope decides approvals."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families

from ..blocks import text_of
from .test_serve import CLIENT_TOKENS, EXAMPLE, TOKEN, _start

pytestmark = pytest.mark.anyio

ACCEPT = {"Accept": "application/json, text/event-stream"}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
ALERT = {"alert": {"region": "PT-11", "level": "red", "message": "Storm"}}
SCOPES = {"weather:read": ["get_forecast"], "weather:all": ["*"]}


@dataclass
class Issuer:
    """An authorization server on loopback: its RFC 8414 metadata and its JWKS (``keys``, which
    a test may rotate); ``fetches`` counts the JWKS requests."""

    url: str = ""
    keys: dict[str, Any] = field(default_factory=dict)
    fetches: int = 0
    issued: list[dict[str, list[str]]] = field(default_factory=list)

    def jwks(self) -> dict[str, Any]:
        found = []
        for kid, key in self.keys.items():
            codec = RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else ECAlgorithm
            jwk = json.loads(codec.to_jwk(key.public_key()))
            found.append({**jwk, "kid": kid, "use": "sig"})
        return {"keys": found}

    def sign(self, kid: str = "rsa-1", *, key: Any = None, alg: str | None = None,
             **claims: Any) -> str:
        key = key if key is not None else self.keys[kid]
        alg = alg or ("RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256")
        return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    found = Issuer(keys={"rsa-1": _rsa(), "ec-1": ec.generate_private_key(ec.SECP256R1())})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/.well-known/oauth-authorization-server":
                body = {"issuer": found.url, "jwks_uri": f"{found.url}/jwks",
                        "authorization_endpoint": f"{found.url}/authorize",
                        "token_endpoint": f"{found.url}/token",
                        "response_types_supported": ["code"],
                        "grant_types_supported": ["client_credentials"],
                        "token_endpoint_auth_methods_supported": ["client_secret_basic"]}
            elif self.path == "/jwks":
                found.fetches += 1
                body = found.jwks()
            else:
                self.send_error(404)
                return
            self._answer(body)

        def do_POST(self) -> None:  # the client-credentials grant, RFC 8707's resource as aud
            form = parse_qs(self.rfile.read(int(self.headers["content-length"])).decode())
            basic = base64.b64decode(self.headers["authorization"].split()[1]).decode()
            if self.path != "/token" or basic != "agent-7:s3cret" or "resource" not in form:
                self.send_error(400)
                return
            now = int(time.time())
            token = found.sign(iss=found.url, aud=form["resource"][0], sub="agent-7",
                               client_id="agent-7", scope=form.get("scope", [""])[0],
                               iat=now, exp=now + 300)
            found.issued.append(form)
            self._answer({"access_token": token, "token_type": "Bearer", "expires_in": 300})

        def _answer(self, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args: object) -> None:
            return

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found.url = f"http://127.0.0.1:{http.server_address[1]}"
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    yield found
    http.shutdown()
    http.server_close()


def _rsa() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    url: str
    resource: str
    proc: subprocess.Popen[str]


def _serve(tmp_path: Path, issuer: Issuer, *, flags: bool = False, **oauth: Any) -> Served:
    """A ``toolkeeper serve`` whose ``[server.oauth]`` trusts ``issuer`` (scopes ``SCOPES``,
    operator scope ``weather:operator``), its keys found through the issuer's metadata — or,
    with ``flags``, the issuer, resource and key set named on the command line."""
    port = _free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    named = [f'issuer = "{issuer.url}"', f'resource = "{resource}"'] if not flags else []
    lines = ["[server.oauth]", *named, 'operator_scope = "weather:operator"',
             *(f"{k} = {json.dumps(v)}" for k, v in oauth.items()),
             "[server.oauth.scopes]", *(f'"{s}" = {json.dumps(p)}' for s, p in SCOPES.items())]
    config = tmp_path / "toolkeeper.toml"
    config.write_text("\n".join(lines) + "\n")
    given = ["--oauth-issuer", issuer.url, "--oauth-resource", resource,
             "--oauth-jwks-url", f"{issuer.url}/jwks"] if flags else []
    proc, url = _start(tmp_path, "--config", str(config), "--port", str(port), *given)
    assert proc.stdout is not None
    started = [proc.stdout.readline() for _ in range(4)]  # link, config, state, oauth
    assert started[3].startswith(f"oauth: access tokens from {issuer.url} for {resource} "
                                 f"(metadata: http://127.0.0.1:{port}/.well-known/")
    return Served(url=url, resource=resource, proc=proc)


def _stop(served: Served) -> None:
    served.proc.send_signal(signal.SIGINT)
    assert served.proc.wait(timeout=20) in (0, 130)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, issuer: Issuer) -> Iterator[Served]:
    found = _serve(tmp_path_factory.mktemp("oauth"), issuer)
    yield found
    _stop(found)


def _claims(served: Served, issuer: Issuer, scope: str = "weather:all", **extra: Any
            ) -> dict[str, Any]:
    now = int(time.time())
    return {"iss": issuer.url, "aud": served.resource, "sub": "agent-1",
            "client_id": "agent-1", "scope": scope, "iat": now, "exp": now + 300, **extra}


def _client(url: str, token: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http))


def _post(url: str, token: str | None, body: dict[str, Any] = LIST) -> httpx.Response:
    auth = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx.post(f"{url}/mcp", json=body, headers={**ACCEPT, **auth}, timeout=20)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _forged(claims: dict[str, Any], alg: str, secret: bytes = b"") -> str:
    """A token with ``alg`` none (no signature) or HS256 keyed with ``secret``."""
    head = _b64(json.dumps({"alg": alg, "kid": "rsa-1", "typ": "JWT"}).encode())
    signing = f"{head}.{_b64(json.dumps(claims).encode())}"
    mac = hmac.new(secret, signing.encode(), hashlib.sha256).digest() if secret else b""
    return f"{signing}.{_b64(mac)}"


def test_the_metadata_names_the_resource_its_issuer_and_the_client_scopes(
        served: Served, issuer: Issuer) -> None:
    for path in ("/.well-known/oauth-protected-resource",
                 "/.well-known/oauth-protected-resource/mcp"):
        answer = httpx.get(served.url + path, headers={"Origin": "https://app.example"},
                           timeout=10)
        assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == "*"
        assert answer.json() == {
            "resource": served.resource, "authorization_servers": [issuer.url],
            "scopes_supported": ["weather:all", "weather:read"],  # never the operator's
            "bearer_methods_supported": ["header"], "resource_name": "toolkeeper"}


def test_a_request_without_a_token_is_told_where_the_metadata_is(served: Served) -> None:
    refused = _post(served.url, None)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{served.url}/.well-known/oauth-protected-resource/mcp", '
        'scope="weather:all weather:read"')  # what to ask for: never the operator scope


@pytest.mark.parametrize("kid", ["rsa-1", "ec-1"])
async def test_a_valid_token_lists_and_calls_with_the_official_client(
        served: Served, issuer: Issuer, kid: str) -> None:
    token = issuer.sign(kid, **_claims(served, issuer))
    async with _client(served.url, token) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        forecast = await client.call_tool("get_forecast", {"city": "Lisbon"})
    assert names == ["broadcast_alert", "get_forecast"]
    assert not forecast.is_error and forecast.structured_content["city"] == "Lisbon"


class _Memory:
    """The official client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, client_info: Any) -> None:
        self.client = client_info


async def test_the_official_client_discovers_the_issuer_gets_a_token_and_calls(
        served: Served, issuer: Issuer) -> None:
    from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider

    auth = ClientCredentialsOAuthProvider(f"{served.url}/mcp", _Memory(), "agent-7", "s3cret",
                                          issuer=issuer.url)
    http = httpx2.AsyncClient(auth=auth, timeout=60)
    async with Client(streamable_http_client(f"{served.url}/mcp", http_client=http)) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        forecast = await client.call_tool("get_forecast", {"city": "Faro"})
    assert names == ["broadcast_alert", "get_forecast"] and not forecast.is_error
    (asked,) = issuer.issued  # the scopes the 401 named, for this resource
    assert asked["resource"] == [served.resource]
    assert asked["scope"] == ["weather:all weather:read"]


def _refusals(served: Served, issuer: Issuer) -> dict[str, tuple[str, str]]:
    """case → (token, what its error_description says)."""
    good = _claims(served, issuer)
    public = issuer.keys["rsa-1"].public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return {
        "expired": (issuer.sign(**{**good, "exp": int(time.time()) - 120}), "token expired"),
        "not yet valid": (issuer.sign(**{**good, "nbf": int(time.time()) + 600}),
                          "not valid yet"),
        "wrong audience": (issuer.sign(**{**good, "aud": "https://other.example/mcp"}),
                           f"audience is not this server: it must name {served.resource}"),
        "no audience": (issuer.sign(**{k: v for k, v in good.items() if k != "aud"}),
                        "no 'aud' claim"),
        "wrong issuer": (issuer.sign(**{**good, "iss": "https://evil.example"}),
                         f"issuer is not {issuer.url}"),
        "alg none": (_forged(good, "none"), "alg 'none'"),
        "HS256 keyed with the public key": (_forged(good, "HS256", public), "alg 'HS256'"),
        "unknown kid": (issuer.sign("nope", key=issuer.keys["rsa-1"], **good),
                        "unknown key id 'nope'"),
        "bad signature": (issuer.sign("rsa-1", key=_rsa(), **good),
                          "signature does not verify"),
        "ES256 key with RS256 claimed": (
            issuer.sign("ec-1", key=issuer.keys["rsa-1"], alg="RS256", **good),
            "key 'ec-1' (EC) does not sign RS256"),
        "not a JWT": ("tkc_not-a-token-of-ours", "neither a client token"),
    }


@pytest.mark.parametrize("case", ["expired", "not yet valid", "wrong audience", "no audience",
                                  "wrong issuer", "alg none", "HS256 keyed with the public key",
                                  "unknown kid", "bad signature",
                                  "ES256 key with RS256 claimed", "not a JWT"])
def test_a_bad_token_is_refused_with_invalid_token_and_why(
        served: Served, issuer: Issuer, case: str) -> None:
    token, why = _refusals(served, issuer)[case]
    refused = _post(served.url, token)
    assert refused.status_code == 401, refused.text
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith(f'Bearer resource_metadata="{served.url}/.well-known/'
                                'oauth-protected-resource/mcp", scope="weather:all '
                                'weather:read", error="invalid_token", error_description="')
    assert why in challenge and why in refused.json()["message"]
    assert "get_forecast" not in refused.text


async def test_a_scope_that_does_not_cover_a_tool_hides_it_and_refuses_its_call(
        served: Served, issuer: Issuer) -> None:
    token = issuer.sign(**_claims(served, issuer, scope="weather:read openid"))
    async with _client(served.url, token) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        forecast = await client.call_tool("get_forecast", {"city": "Porto"})
    assert names == ["get_forecast"] and not forecast.is_error
    refused = _post(served.url, token, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                        "params": {"name": "broadcast_alert",
                                                   "arguments": ALERT}})
    assert refused.status_code == 403
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="insufficient_scope", scope="weather:all", '
                                f'resource_metadata="{served.url}/.well-known/')
    assert "ask the authorization server for a token with scope weather:all" in refused.text
    made_up = _post(served.url, token, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                        "params": {"name": "broadcast_alerts", "arguments": {}}})
    assert made_up.status_code == 403  # the same answer whether or not such a tool exists
    assert made_up.headers["www-authenticate"].startswith(
        'Bearer error="insufficient_scope", scope="weather:all", ')
    nothing = issuer.sign(**_claims(served, issuer, scope="openid"))
    assert json.loads(_post(served.url, nothing).text)["result"]["tools"] == []


async def test_only_the_operator_scope_decides_and_it_is_refused_on_mcp(
        served: Served, issuer: Issuer) -> None:
    agent = issuer.sign(**_claims(served, issuer, sub="alice"))
    async with _client(served.url, agent) as client:
        asked = await client.call_tool("broadcast_alert", ALERT)
    assert asked.is_error and "waiting for approval" in text_of(asked.content[0])
    request_id = text_of(asked.content[0]).split("request ")[1].split(")")[0].split(";")[0]
    operator = issuer.sign(**_claims(served, issuer, scope="weather:operator", sub="olga",
                                     client_id="console"))
    decision = f"{served.url}/api/approvals/{request_id}/decision"
    for token in (agent, issuer.sign(**_claims(served, issuer, scope="weather:all "
                                                                     "weather:read"))):
        own = httpx.post(decision, json={"decision": "approve"}, timeout=10,
                         headers={"Authorization": f"Bearer {token}"})
        assert own.status_code == 403 and "only the operator" in own.json()["message"]
    on_mcp = _post(served.url, operator)
    assert on_mcp.status_code == 403 and "refused on /mcp" in on_mcp.json()["message"]
    approved = httpx.post(decision, json={"decision": "approve"}, timeout=10,
                          headers={"Authorization": f"Bearer {operator}"})
    assert approved.status_code == 200 and approved.json()["state"] == "approved"
    assert approved.json()["client"] == "oauth:agent-1:alice"
    assert approved.json()["decision"]["approver"] == "operator:olga"


async def test_a_token_with_the_operator_scope_scrapes_metrics_as_prometheus_oauth2_does(
        served: Served, issuer: Issuer) -> None:
    async with _client(served.url, issuer.sign(**_claims(served, issuer, sub="bob"))) as client:
        assert not (await client.call_tool("get_forecast", {"city": "Lisbon"})).is_error
    # Prometheus' oauth2 scrape config: the client-credentials grant at the token URL (with
    # the resource as an endpoint parameter), then the access token as the scrape's bearer
    grant = httpx.post(f"{issuer.url}/token", auth=("agent-7", "s3cret"), timeout=10, data={
        "grant_type": "client_credentials", "scope": "weather:operator",
        "resource": served.resource})
    scraped = httpx.get(f"{served.url}/metrics", timeout=10, headers={
        "Authorization": f"Bearer {grant.json()['access_token']}"})
    assert scraped.status_code == 200, scraped.text
    by_client = {s.labels["client"]: s.value for f in text_string_to_metric_families(scraped.text)
                 for s in f.samples if s.name == "toolkeeper_client_calls_total"
                 and s.labels["status"] == "ok"}
    assert by_client.get("oauth:agent-1", 0) >= 1  # one series per OAuth client, not per user
    assert not any(label.endswith(":bob") for label in by_client)
    client_scope = issuer.sign(**_claims(served, issuer, scope="weather:all"))
    for token, status in ((client_scope, 403), (_forged(_claims(served, issuer), "HS256"), 401)):
        refused = httpx.get(f"{served.url}/metrics", timeout=10,
                            headers={"Authorization": f"Bearer {token}"})
        assert refused.status_code == status and "toolkeeper_" not in refused.text
        assert "operator scope" in refused.json()["message"]


def test_the_static_tokens_keep_working_beside_oauth(served: Served) -> None:
    listed = _post(served.url, CLIENT_TOKENS[served.url])
    assert listed.status_code == 200 and "broadcast_alert" in listed.text
    mine = httpx.get(f"{served.url}/api/approvals", timeout=10,
                     headers={"Authorization": f"Bearer {TOKEN}"})
    assert mine.status_code == 200


def test_a_rotated_key_is_fetched_and_unknown_kids_do_not_flood_the_issuer(
        tmp_path: Path, issuer: Issuer) -> None:
    server = _serve(tmp_path, issuer, flags=True, jwks_min_refresh_s=3600)
    try:
        before = issuer.fetches
        assert _post(server.url, issuer.sign(**_claims(server, issuer))).status_code == 200
        assert issuer.fetches == before + 1  # fetched once, then kept
        assert _post(server.url, issuer.sign(**_claims(server, issuer))).status_code == 200
        issuer.keys["rsa-2"] = _rsa()  # the issuer rotates: a new kid
        rotated = issuer.sign("rsa-2", **_claims(server, issuer))
        with ThreadPoolExecutor(max_workers=6) as pool:  # together: one fetch serves them all
            answers = list(pool.map(lambda _: _post(server.url, rotated).status_code, range(6)))
        assert answers == [200] * 6
        assert issuer.fetches == before + 2
        for _ in range(3):  # made-up kids: refused, the key set is not fetched again
            made_up = issuer.sign("made-up", key=issuer.keys["rsa-2"], **_claims(server, issuer))
            assert _post(server.url, made_up).status_code == 401
        assert issuer.fetches == before + 2
    finally:
        del issuer.keys["rsa-2"]
        _stop(server)


def test_the_docs_config_loads_and_the_flags_need_an_issuer_and_a_resource(
        tmp_path: Path) -> None:
    from toolkeeper.config import load_config
    from toolkeeper.errors import ConfigError
    from toolkeeper.server.oauth import OAuthResource, oauth_settings

    page = (Path(__file__).resolve().parents[2] / "docs" / "oauth.md").read_text()
    block = page.split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "toolkeeper.toml").write_text(block)
    section = load_config(tmp_path / "toolkeeper.toml").server.oauth
    assert section is not None and section.scopes["tools:github"] == ["github-*"]
    merged = oauth_settings(section, issuer=None, resource=None, jwks_url=None, audience=[])
    assert merged is not None
    resource = OAuthResource(merged)
    assert resource.metadata_url == ("https://tools.example.com/.well-known/"
                                     "oauth-protected-resource/mcp")
    assert resource.covering("github-create_issue") == ["tools:all", "tools:github"]
    assert b'scope="tools:read"' in resource.challenge()  # challenge_scopes: fewer
    with pytest.raises(ConfigError, match="challenge_scopes names tools:write, which"):
        oauth_settings(section.model_copy(update={"challenge_scopes": ["tools:write"]}),
                       issuer=None, resource=None, jwks_url=None, audience=[])
    with pytest.raises(ConfigError, match="needs both an issuer and a resource"):
        oauth_settings(None, issuer="https://login.example.com", resource=None, jwks_url=None,
                       audience=[])
    with pytest.raises(ConfigError, match="must be an https:// URL"):
        oauth_settings(section, issuer="http://login.example.com", resource=None,
                       jwks_url=None, audience=[])
    (tmp_path / "hs.toml").write_text('[server.oauth]\nalgorithms = ["HS256"]\n')
    with pytest.raises(ConfigError, match="HS256 refused: access tokens are checked with "
                                          "public keys only"):
        load_config(tmp_path / "hs.toml")


def test_an_unreachable_issuer_is_a_503_to_retry_not_a_bad_token(
        tmp_path: Path, issuer: Issuer) -> None:
    dead, port = f"http://127.0.0.1:{_free_port()}", _free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    proc, url = _start(tmp_path, "--port", str(port), "--oauth-issuer", dead,
                       "--oauth-resource", resource)
    try:
        now = int(time.time())
        token = issuer.sign(iss=dead, aud=resource, sub="a", scope="toolkeeper:tools",
                            exp=now + 60)
        answer = _post(url, token)
        assert answer.status_code == 503 and answer.headers["retry-after"] == "30"
        assert f"the signing keys of {dead} could not be fetched" in answer.json()["message"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)


@pytest.mark.parametrize(("args", "says"), [
    (["--oauth-issuer", "https://login.example.com"], "OAuth needs both an issuer and a resource"),
    (["--oauth-issuer", "http://login.example.com", "--oauth-resource",
      "https://tools.example.com/mcp"], "must be an https:// URL"),
    (["--oauth-issuer", "https://login.example.com", "--oauth-resource",
      "https://tools.example.com/mcp", "--auth", "none"], "drop --stdio and --auth none"),
])
def test_wrong_oauth_options_are_one_line_saying_what_to_do(
        tmp_path: Path, args: list[str], says: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolkeeper.cli", "serve", EXAMPLE, "--no-builtins", "--port", "0",
         "--state-dir", str(tmp_path / "state"), *args],
        capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2 and says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
