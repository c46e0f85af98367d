"""An upstream MCP server behind OAuth, for the gateway's OAuth tests: ``python oauth_upstream.py
STATE_DIR`` writes its port to STATE_DIR/port. Written with the SDK's low-level server (one tool,
``whoami``) and Starlette, with its own small authorization server on the same origin:

- ``/mcp`` answers 401 with ``WWW-Authenticate: Bearer resource_metadata=…`` unless the bearer
  token is one it issued and not expired; every ``Authorization`` header it is sent is appended
  to STATE_DIR/seen (what the gateway passed upstream);
- protected resource metadata (RFC 9728) and authorization server metadata (RFC 8414), dynamic
  registration, an authorization endpoint that consents at once (302 to the redirect URI), and
  a token endpoint for the authorization code (PKCE checked), refresh and client credentials
  grants (client ``machine`` / secret ``machine-secret``, or ``machine`` proving itself with an
  assertion signed by the private key of STATE_DIR/client.pub: ``private_key_jwt``, whose
  verified claims are appended to STATE_DIR/assertions). Each grant is appended to
  STATE_DIR/grants. Access tokens live STATE_DIR/expires_in seconds when that file exists
  (else an hour); with STATE_DIR/no_refresh, refreshing is refused."""

from __future__ import annotations

import base64
import hashlib
import secrets
import socket
import sys
import time
from pathlib import Path
from typing import Any

import jwt
import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.types import Receive, Scope, Send

STATE = Path(sys.argv[1])
ISSUED: dict[str, float] = {}  # access token → expiry
REFRESH: set[str] = set()
CODES: dict[str, str] = {}  # code → PKCE challenge


async def _tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool(
        name="whoami", description="Says hello.",
        input_schema={"type": "object", "properties": {}})])


async def _call(_ctx: Any, _params: Any) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text="hello from upstream")])


server: Server[Any] = Server("oauth-upstream", on_list_tools=_tools, on_call_tool=_call)


def _note(name: str, line: str) -> None:
    with (STATE / name).open("a") as out:
        out.write(line + "\n")


def _base(request: Request) -> str:
    return f"http://{request.headers['host']}"


def _issue(refresh: bool) -> dict[str, Any]:
    lifetime = int((STATE / "expires_in").read_text()) if (STATE / "expires_in").exists() \
        else 3600
    token = "up-" + secrets.token_hex(8)
    ISSUED[token] = time.time() + lifetime
    answer: dict[str, Any] = {"access_token": token, "token_type": "Bearer",
                              "expires_in": lifetime}
    if refresh:
        answer["refresh_token"] = "rt-" + secrets.token_hex(8)
        REFRESH.add(answer["refresh_token"])
    return answer


async def _prm(request: Request) -> Response:
    return JSONResponse({"resource": f"{_base(request)}/mcp",
                         "authorization_servers": [_base(request)]})


async def _asm(request: Request) -> Response:
    base = _base(request)
    return JSONResponse({
        "issuer": base, "authorization_endpoint": f"{base}/authorize",
        "token_endpoint": f"{base}/token", "registration_endpoint": f"{base}/register",
        "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic",
                                                  "private_key_jwt"]})


async def _register(request: Request) -> Response:
    body = await request.json()
    return JSONResponse({**body, "client_id": "dyn-" + secrets.token_hex(4),
                         "token_endpoint_auth_method": "none"}, status_code=201)


async def _authorize(request: Request) -> Response:
    query = request.query_params
    code = secrets.token_hex(8)
    CODES[code] = query["code_challenge"]
    return RedirectResponse(f"{query['redirect_uri']}?code={code}&state={query['state']}",
                            status_code=302)


async def _token(request: Request) -> Response:
    form = await request.form()
    grant = str(form.get("grant_type"))
    _note("grants", grant)
    if grant == "authorization_code":
        digest = hashlib.sha256(str(form.get("code_verifier")).encode()).digest()
        challenge = base64.urlsafe_b64encode(digest).decode().rstrip("=")
        if CODES.pop(str(form.get("code")), None) != challenge:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        return JSONResponse(_issue(refresh=True))
    if grant == "refresh_token":
        if (STATE / "no_refresh").exists() or str(form.get("refresh_token")) not in REFRESH:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        if (STATE / "rotate").exists():  # the old refresh token is spent
            REFRESH.discard(str(form.get("refresh_token")))
            return JSONResponse(_issue(refresh=True))
        return JSONResponse(_issue(refresh=False))
    expected = "Basic " + base64.b64encode(b"machine:machine-secret").decode()
    if grant == "client_credentials" and (request.headers.get("authorization") == expected
                                          or _asserted(request, form)):
        return JSONResponse(_issue(refresh=False))
    return JSONResponse({"error": "invalid_client"}, status_code=401)


def _asserted(request: Request, form: Any) -> bool:
    """A ``private_key_jwt`` assertion of client ``machine``, for this server, signed by the
    key of STATE_DIR/client.pub."""
    if form.get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:" \
            "jwt-bearer" or not (STATE / "client.pub").exists():
        return False
    try:
        claims = jwt.decode(str(form.get("client_assertion")), (STATE / "client.pub").read_text(),
                            algorithms=["ES256", "RS256", "EdDSA"], audience=_base(request),
                            issuer="machine", options={"require": ["exp", "jti", "sub"]})
    except jwt.InvalidTokenError:
        return False
    _note("assertions", f"{claims['iss']} {claims['sub']} {claims['aud']}")
    return bool(claims["sub"] == "machine")


class Protected:
    """``/mcp``: only a bearer token this server issued, unexpired."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        given = request.headers.get("authorization", "")
        _note("seen", given or "-")
        token = given.removeprefix("Bearer ")
        if ISSUED.get(token, 0) < time.time() or (STATE / "revoked").exists():
            metadata = f"{_base(request)}/.well-known/oauth-protected-resource/mcp"
            await Response(status_code=401, headers={
                "WWW-Authenticate": f'Bearer resource_metadata="{metadata}"'})(
                    scope, receive, send)
            return
        await self.app(scope, receive, send)


def main() -> None:
    mcp_app = server.streamable_http_app(stateless_http=True, json_response=True)
    app = Starlette(routes=[
        Route("/.well-known/oauth-protected-resource/mcp", _prm),
        Route("/.well-known/oauth-authorization-server", _asm),
        Route("/register", _register, methods=["POST"]),
        Route("/authorize", _authorize), Route("/token", _token, methods=["POST"]),
        Mount("/", app=Protected(mcp_app))], lifespan=mcp_app.router.lifespan_context)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    (STATE / "port").write_text(str(sock.getsockname()[1]))
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main()
