"""The gate's layers, each one job (``TokenGate`` composes them, in order): who asks, in
which role, from where, how fast, with which tools, and that written down for the app.

Two roles, never one credential for both: a **client** (an agent: a client token, or nothing
under ``--auth none``) calls tools on ``/mcp`` and reads its own requests under ``/api``; the
**operator** (a person: the operator token, or the page's login cookie) decides, on the page,
the API and the CLI, and is refused on ``/mcp`` — an agent configured with a credential that
can approve could approve its own calls."""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..core.context import CALLER_KEY, Caller, Channel
from .auth import COOKIE, PERSON_PREFIX, WebSessions
from .clients import OPERATOR, ClientTokens
from .oauth import Grant, OAuthResource, TokenRejected, not_covered_message

__all__ = ["CSP", "LOOPBACK", "OPERATOR_ON_MCP", "OPERATOR_PATHS", "ASGIApp", "Asked", "Credentials",
           "Identified", "Layer", "Metadata", "Passed", "RateLimit", "Receive", "Required", "Roles",
           "SameOrigin", "Scope", "Send", "Shared", "ToolScope"]

OPERATOR_ON_MCP = ("the operator credential decides approvals and is refused on /mcp: an agent "
                   "must never hold it. Give the agent a client token (toolkeeper tokens add "
                   "NAME) and keep the operator token for the page, the API and the CLI")

LOOPBACK = ("127.0.0.1", "localhost", "::1")
OPERATOR_PATHS = ("/metrics",)
"""Paths that answer for themselves who may read them (the operator): not refused here without
a credential, but an OAuth access token sent there is checked like on ``/api``, so one with the
operator scope reads them as the operator token does."""
MAX_BUCKETS = 10_000
"""Rate-limit buckets kept before the full ones are forgotten."""
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class Asked:
    """One request as the gate's layers see it, each adding what it found out."""

    scope: Scope
    path: str
    headers: dict[bytes, bytes]
    client: str | None = None
    via: Literal["bearer", "cookie", "none"] = "none"
    secret: str = ""
    """The page session's secret (a cookie's)."""
    person: str = ""
    """The named operator's name, when the credential is one of theirs."""
    grant: Grant | None = None
    rejected: TokenRejected | None = None

    @property
    def mcp(self) -> bool:
        return self.path.startswith("/mcp")


Passed = tuple[Receive, Send] | None
"""What a layer hands on (the request's ``receive`` and ``send``, perhaps wrapped), or
``None``: it answered the request itself (a refusal)."""


class Layer(Protocol):
    """One job of the gate: it looks at the request, refuses it or hands it on."""

    async def __call__(self, asked: Asked, receive: Receive, send: Send) -> Passed: ...


class Metadata:
    """The OAuth protected resource's metadata, public, at its own path."""

    def __init__(self, oauth: OAuthResource | None) -> None:
        self.oauth = oauth

    async def __call__(self, asked: Asked, receive: Receive, send: Send) -> Passed:
        if self.oauth is not None and self.oauth.serves(asked.path):
            await _metadata(send, self.oauth)
            return None
        return receive, send


class Credentials:
    """Who asks: the operator's bearer token (in constant time), a client's token (by
    digest), the page's login cookie, or — with OAuth, on a protected path or an operator's —
    a JWT access token and its grant; a token refused for another reason than itself (its
    issuer unreachable) is answered so, with when to retry."""

    def __init__(self, token: str | None, *, clients: ClientTokens | None,
                 sessions: WebSessions | None, oauth: OAuthResource | None,
                 protected: tuple[str, ...]) -> None:
        self.token = token.encode() if token is not None else None
        self.clients, self.sessions, self.oauth = clients, sessions, oauth
        self.protected = protected

    async def __call__(self, asked: Asked, receive: Receive, send: Send) -> Passed:
        asked.client, asked.via, asked.secret, asked.person = self._who(asked.headers)
        if asked.client is None and asked.via == "bearer" and self.oauth is not None \
                and (asked.path.startswith(self.protected) or asked.path in OPERATOR_PATHS):
            asked.grant, asked.rejected = await self._checked(asked.headers)
            asked.client = asked.grant.client if asked.grant is not None else None
        rejected = asked.rejected
        if rejected is not None and rejected.status != 401:
            await _refuse(send, rejected.status, "unavailable",
                          (b"retry-after", str(max(1, rejected.retry_after)).encode()),
                          str(rejected))
            return None
        return receive, send

    async def _checked(self, headers: dict[bytes, bytes]
                       ) -> tuple[Grant | None, TokenRejected | None]:
        """The grant of the bearer as an OAuth access token, or why it was refused."""
        assert self.oauth is not None
        presented = headers.get(b"authorization", b"")[7:].strip().decode("latin-1")
        if not self.oauth.looks_like_jwt(presented):
            return None, TokenRejected("neither a client token of this server nor a JWT "
                                       "access token")
        try:
            return await self.oauth.check(presented), None
        except TokenRejected as exc:
            return None, exc

    def _who(self, headers: dict[bytes, bytes]
             ) -> tuple[str | None, Literal["bearer", "cookie", "none"], str, str]:
        """(client, how it proved it, the page session's secret, the named operator's name
        when it is one of theirs)."""
        value = headers.get(b"authorization", b"")
        if value[:7].lower() == b"bearer ":
            presented = value[7:].strip()
            if self.token is not None and hmac.compare_digest(presented, self.token):
                return OPERATOR, "bearer", "", ""
            if self.clients is not None:  # one lookup, from memory once seen
                kind, name = self.clients.owner(presented.decode("latin-1"))
                if kind == "operator":
                    return OPERATOR, "bearer", "", name or ""
                return name, "bearer", "", ""
            return None, "bearer", "", ""
        secret = _cookie(headers.get(b"cookie", b""), COOKIE)
        if secret and self.sessions is not None:
            client = self.sessions.client_for(secret)
            if client is not None and client.startswith(PERSON_PREFIX):  # a named operator's
                person = client.removeprefix(PERSON_PREFIX)
                if self.clients is not None and not self.clients.is_operator(person):
                    return None, "cookie", secret, ""  # their token was revoked: so is this
                return OPERATOR, "cookie", secret, person
            return client, "cookie", secret, ""
        return None, "none", "", ""


class Roles:
    """The two roles apart: the operator's credential is refused on ``/mcp``; there, without
    a credential and with ``anonymous`` (``--auth none``), the request is that client's."""

    def __init__(self, anonymous: str | None) -> None:
        self.anonymous = anonymous

    async def __call__(self, asked: Asked, receive: Receive, send: Send) -> Passed:
        if asked.mcp and asked.client == OPERATOR:
            await _refuse(send, 403, "operator_on_mcp", (b"vary", b"authorization"),
                          OPERATOR_ON_MCP)
            return None
        if asked.mcp and asked.client is None and asked.via == "none" \
                and self.anonymous is not None:
            asked.client = self.anonymous
        return receive, send


class SameOrigin:
    """Beyond ``/mcp`` (which the SDK checks itself): the request comes from this server's
    address and page, and every answer carries the page's security headers."""

    def __init__(self, hosts: Sequence[str]) -> None:
        self.hosts = frozenset(h.lower() for h in hosts)

    async def __call__(self, asked: Asked, receive: Receive, send: Send) -> Passed:
        if asked.mcp:
            return receive, send
        problem = self._foreign(asked.scope, asked.headers, bearer=asked.via == "bearer")
        if problem is not None:
            await _refuse(send, 403, "forbidden", (b"vary", b"origin"), problem)
            return None
        return receive, _secured(send)

    def _foreign(self, scope: Scope, headers: dict[bytes, bytes], *, bearer: bool
                 ) -> str | None:
        """Why the request does not come from this server's address and page, if it does
        not. A change made with a cookie must name this exact origin (scheme, host and port:
        another local port is another site); a bearer token cannot ride along cross-site, so
        an API client need not send one, but a wrong one is refused all the same."""
        host = headers.get(b"host", b"").decode("latin-1")
        if _hostname(host) not in self.hosts:
            return (f"Host {host!r} is not this server's; open it by the address toolkeeper "
                    "serve printed (DNS-rebinding protection)")
        origin = headers.get(b"origin")
        unsafe = scope["method"] not in ("GET", "HEAD", "OPTIONS")
        if (unsafe and not bearer) or origin is not None:
            allowed = (f"http://{host}", f"https://{host}")
            if origin is None or origin.decode("latin-1") not in allowed:
                return ("cross-origin request refused: a change must come from this server's "
                        "own page (Origin must be " + allowed[0] + ")")
        return None



class Required:
    """A protected path needs a credential: 401 says which to send (with OAuth, where its
    metadata is and why a token sent was refused)."""

    def __init__(self, protected: tuple[str, ...], oauth: OAuthResource | None) -> None:
        self.protected, self.oauth = protected, oauth

    async def __call__(self, asked: Asked, receive: Receive, send: Send) -> Passed:
        if asked.client is None and asked.path.startswith(self.protected):
            await self._unauthorized(send, mcp=asked.mcp, rejected=asked.rejected)
            return None
        return receive, send

    async def _unauthorized(self, send: Send, *, mcp: bool,
                            rejected: TokenRejected | None) -> None:
        """401: what to send (and, with OAuth, where its metadata is and why a token sent
        was refused)."""
        message = ("missing or wrong bearer token: send 'Authorization: Bearer <token>' with a "
                   "client token (the one in the config toolkeeper serve printed, or "
                   "toolkeeper tokens add NAME)" if mcp else
                   "missing or wrong credential: log in with the link toolkeeper serve printed "
                   "(toolkeeper approvals login-url makes a new one), or send the operator "
                   "token as 'Authorization: Bearer <token>'")
        challenge = b"Bearer"
        if self.oauth is not None:
            challenge = self.oauth.challenge(str(rejected) if rejected is not None else None)
            message = (f"access token refused: {rejected}. " if rejected is not None else ""
                       ) + message + (f", or an access token from {self.oauth.issuer} (see "
                                      f"{self.oauth.metadata_url})")
        await _refuse(send, 401, "unauthorized", (b"www-authenticate", challenge), message)


class Shared(Protocol):
    """Buckets kept where several processes count them (``Leases`` of the store's buckets)."""

    async def admit(self, caller: str) -> bool: ...


class RateLimit:
    """A token bucket of ``rate`` requests per second per caller (``rate`` 0: no limit):
    per client for a credential; without one, per connection. In this process's memory, or
    with ``shared`` where every worker of the server counts (a store write per batch)."""

    def __init__(self, rate: float, burst: int, shared: Shared | None = None) -> None:
        self.rate, self.burst, self.shared = rate, burst, shared
        self._buckets: dict[str, tuple[float, float]] = {}
        """caller → (tokens left, when counted), with room for ``burst``."""

    async def __call__(self, asked: Asked, receive: Receive, send: Send) -> Passed:
        if asked.client is not None and self.rate > 0 and not await self._admitted(
                caller := _caller(asked.client, asked.via, asked.scope)):
            await _refuse(send, 429, "rate_limited", (b"retry-after", b"1"), (
                f"rate limit: more than {self.rate:g} requests per second (bursts of "
                f"{self.burst}) from {caller}; slow down and retry after a second, or raise "
                "the limit: toolkeeper serve --rate-limit N (0 turns it off)"))
            return None
        return receive, send

    async def _admitted(self, caller: str) -> bool:
        if self.shared is None:
            return self._admit(caller)
        return await self.shared.admit(caller)

    def _admit(self, caller: str) -> bool:
        now = time.monotonic()
        if len(self._buckets) >= MAX_BUCKETS:
            self._forget_full(now)
        left, then = self._buckets.get(caller, (float(self.burst), now))
        left = min(float(self.burst), left + (now - then) * self.rate)
        if left < 1.0:
            self._buckets[caller] = (left, now)
            return False
        self._buckets[caller] = (left - 1.0, now)
        return True

    def _forget_full(self, now: float) -> None:
        """Drop the buckets that have refilled (a caller gone quiet, a closed connection):
        forgetting one changes nothing for its caller."""
        full = self.burst / self.rate
        self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < full}


class ToolScope:
    """An OAuth access token's scopes decide the client's tools: a ``tools/call`` of another
    is refused 403 ``insufficient_scope`` (``tool_name`` maps the wire name back)."""

    def __init__(self, oauth: OAuthResource | None, tool_name: Callable[[str], str | None] | None,
                 max_body_bytes: int) -> None:
        self.oauth, self.tool_name, self.max_body_bytes = oauth, tool_name, max_body_bytes

    async def __call__(self, asked: Asked, receive: Receive, send: Send) -> Passed:
        grant = asked.grant
        if grant is not None and grant.tools is not None and asked.mcp \
                and asked.scope["method"] == "POST":
            within = await self._within_scope(grant.tools, receive, send)
            if within is None:
                return None
            receive = within
        return receive, send

    async def _within_scope(self, tools: tuple[str, ...], receive: Receive, send: Send
                            ) -> Receive | None:
        """The request's ``receive`` (replaying the body read) when it is not a ``tools/call``
        of a tool outside ``tools``; else ``None``, once refused 403 ``insufficient_scope``."""
        receive, tool = await self._called_tool(receive)
        if tool is None or self.oauth is None or Caller(tools=tools).may_use(tool):
            return receive
        await _refuse(send, 403, "insufficient_scope", (
            b"www-authenticate", self.oauth.scope_challenge(tool)),
            not_covered_message(self.oauth, tool))
        return None

    async def _called_tool(self, receive: Receive) -> tuple[Receive, str | None]:
        """The tool a ``tools/call`` names (by tool name), and a ``receive`` that replays the
        body read to find it."""
        body, more, messages = b"", True, []
        while more and len(body) <= self.max_body_bytes:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            more = message.get("more_body", False)

        async def replay() -> MutableMapping[str, Any]:
            return messages.pop(0) if messages else await receive()

        try:
            request = json.loads(body) if not more else None
        except ValueError:
            request = None
        params = request.get("params") if isinstance(request, dict) else None
        wire = params.get("name") if isinstance(params, dict) and \
            request.get("method") == "tools/call" else None  # type: ignore[union-attr]
        if not isinstance(wire, str):
            return replay, None
        # a name no tool has is judged by the name itself: the answer never tells whether a
        # tool the token cannot see exists
        return replay, (self.tool_name(wire) if self.tool_name is not None else None) or wire


class Identified:
    """Who asks, into the request's state as a ``Caller`` (``CALLER_KEY``): the client's name,
    the channel (mcp, api, page), how it proved it, the page session's secret, an access
    token's tools, subject and scopes, or the named operator's name as the subject."""

    async def __call__(self, asked: Asked, receive: Receive, send: Send) -> Passed:
        if asked.client is not None:
            path, grant = asked.path, asked.grant
            channel: Channel = "mcp" if asked.mcp else "api" if path.startswith("/api") \
                else "page"
            asked.scope.setdefault("state", {})[CALLER_KEY] = Caller(
                client=asked.client, channel=channel, via=asked.via, page_secret=asked.secret,
                tools=grant.tools if grant is not None else None,
                subject=grant.subject if grant is not None else asked.person,
                scopes=tuple(sorted(grant.scopes)) if grant is not None else ())
        return receive, send


def _caller(client: str, via: str, scope: Scope) -> str:
    """Whom a rate limit counts: the client of a credential; without one, the connection."""
    if via != "none":
        return f"client {client!r}"
    host, port = scope.get("client") or ("?", 0)
    return f"client {client!r} on connection {host}:{port} (no credential: each connection " \
           "is counted apart)"


CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
_SECURITY_HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-frame-options", b"DENY"),
                     (b"x-content-type-options", b"nosniff"),
                     (b"referrer-policy", b"same-origin")]


def _secured(send: Send) -> Send:
    async def wrapped(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", ()), *_SECURITY_HEADERS]
        await send(message)
    return wrapped


def _hostname(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _cookie(header: bytes, name: str) -> str:
    for part in header.decode("latin-1").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return ""


async def _metadata(send: Send, oauth: OAuthResource) -> None:
    """The protected resource's metadata: public, readable from any origin (a browser-based
    client discovers the authorization server with it)."""
    body = oauth.metadata_body()
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"application/json"), (b"access-control-allow-origin", b"*"),
        (b"cache-control", b"max-age=3600"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _refuse(send: Send, status: int, error: str, header: tuple[bytes, bytes],
                  message: str) -> None:
    body = json.dumps({"error": error, "message": message}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), header,
        (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
