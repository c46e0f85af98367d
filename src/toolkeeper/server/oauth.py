"""``toolkeeper serve`` as an OAuth 2.1 protected resource (the MCP authorization spec):

- its metadata (RFC 9728) at ``/.well-known/oauth-protected-resource`` and at the same path
  followed by the resource's own (``…/oauth-protected-resource/mcp``), public;
- access tokens that are JWTs signed by the configured issuer with one of its published keys
  (``jwks.py``), with a public-key algorithm, naming this server as their audience, not expired
  and already valid (a small leeway either way);
- who the client is, from the claims (``client_id`` or ``azp``, and ``sub``), and what it may
  do, from its scopes: ``[server.oauth.scopes]`` maps each scope to the tools it lets a client
  see and call; the operator scope makes the holder the operator, who decides approvals and is
  refused on ``/mcp`` like the operator token — a token that can approve must never be an
  agent's. The operator scope is not advertised in ``scopes_supported``, so a client asking for
  every advertised scope never gets it.

A token that fails gets 401 with ``WWW-Authenticate: Bearer resource_metadata="…",
error="invalid_token", error_description="…"``; a call of a tool the token's scopes do not
cover gets 403 ``insufficient_scope`` naming the scopes that would.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from ..config.model import OAuthSection
from ..core.context import OPERATOR
from ..errors import ConfigError
from .jwks import KeySet, KeysUnavailable

__all__ = ["METADATA_PATH", "Grant", "OAuthResource", "TokenRejected", "not_covered_message",
           "oauth_settings"]

METADATA_PATH = "/.well-known/oauth-protected-resource"
_KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}
"""The key type each algorithm family needs (by the algorithm's first two letters)."""
_ID_PART = re.compile(r"[A-Za-z0-9._@|+=-]{1,128}")


def oauth_settings(section: OAuthSection | None, *, issuer: str | None, resource: str | None,
                   jwks_url: str | None, audience: list[str]) -> OAuthSection | None:
    """``[server.oauth]`` with the command line's ``--oauth-*`` options over it; ``None`` when
    neither asks for OAuth.

    Raises:
        ConfigError: the issuer or the resource is missing, or a value is wrong.
    """
    given = {k: v for k, v in (("issuer", issuer), ("resource", resource),
                               ("jwks_url", jwks_url), ("audience", audience)) if v}
    if section is None and not given:
        return None
    try:
        merged = OAuthSection.model_validate({**(section.model_dump() if section else {}),
                                              **given})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                             for e in exc.errors(include_url=False))
        raise ConfigError(f"OAuth settings: {problems}") from exc
    if merged.issuer is None or merged.resource is None:
        raise ConfigError("OAuth needs both an issuer and a resource: pass --oauth-issuer URL "
                          "and --oauth-resource URL (or set issuer and resource under "
                          "[server.oauth])")
    return merged


class TokenRejected(Exception):
    """Why an access token was refused (its ``error_description``), with the HTTP status:
    401 for a token that is not good, 503 when the issuer's keys cannot be fetched and none
    are held (``retry_after``: seconds until they may be fetched again)."""

    def __init__(self, description: str, status: int = 401, *, retry_after: int = 0) -> None:
        super().__init__(description)
        self.status, self.retry_after = status, retry_after


@dataclass(frozen=True, kw_only=True)
class Grant:
    """What a valid access token lets its holder be and do."""

    client: str
    """``operator``, or ``oauth:CLIENT_ID`` (with ``:SUB`` when the token is a user's)."""
    scopes: frozenset[str]
    tools: tuple[str, ...] | None
    """The tool-name patterns its scopes cover (``None``: the operator, who calls none)."""
    subject: str = ""
    """Who the token names (``oauth:CLIENT:SUB``): for the operator, the person recorded as
    deciding."""


class OAuthResource:
    """The protected resource: its metadata, its token checks and its challenges."""

    def __init__(self, settings: OAuthSection) -> None:
        if settings.issuer is None or settings.resource is None:
            raise ValueError("OAuthResource needs settings with an issuer and a resource "
                             "(oauth_settings checks it)")
        self.settings = settings
        self.issuer, self.resource = settings.issuer, settings.resource
        self.keys = KeySet(settings.issuer, jwks_url=settings.jwks_url,
                           max_age_s=settings.jwks_max_age_s,
                           min_refresh_s=settings.jwks_min_refresh_s,
                           timeout_s=settings.jwks_timeout_s)
        parts = urlsplit(settings.resource)
        self.host = parts.hostname or ""
        """The resource's host name (clients reach this server by it)."""
        self.path = parts.path.rstrip("/")
        self.metadata_url = f"{parts.scheme}://{parts.netloc}{METADATA_PATH}{self.path}"
        self.audiences = [self.resource, *settings.audience]

    # -- metadata -----------------------------------------------------------------------

    def serves(self, path: str) -> bool:
        """Whether ``path`` is one of the metadata document's."""
        return path in (METADATA_PATH, METADATA_PATH + self.path)

    def metadata(self) -> dict[str, Any]:
        return {"resource": self.resource,
                "authorization_servers": [self.issuer],
                "scopes_supported": sorted(self.settings.scopes),
                "bearer_methods_supported": ["header"],
                "resource_name": "toolkeeper"}

    # -- tokens -------------------------------------------------------------------------

    @staticmethod
    def looks_like_jwt(token: str) -> bool:
        return token.count(".") == 2

    async def check(self, token: str) -> Grant:
        """The grant of a valid access token.

        Raises:
            TokenRejected: the token is not one this server accepts (why, in a sentence).
        """
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenRejected(f"not a JWT access token ({exc})") from exc
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in self.settings.algorithms:
            raise TokenRejected(f"token signed with alg {alg!r}: only "
                                f"{', '.join(self.settings.algorithms)} are accepted")
        if kid is not None and not isinstance(kid, str):
            raise TokenRejected("token kid must be a string")
        try:
            found = await self.keys.key(kid)
        except KeysUnavailable as exc:
            raise TokenRejected(f"{exc}; try again in {exc.retry_after} s", status=503,
                                retry_after=exc.retry_after) from exc
        if found is None:
            raise TokenRejected(f"unknown key id {kid!r}: not among the issuer's keys"
                                if kid is not None else "token has no kid and the issuer "
                                "publishes several keys")
        key, declared = found
        if declared not in (alg, None) or _KEY_TYPES.get(alg[:2]) != key.key_type:
            raise TokenRejected(f"key {kid!r} ({declared or key.key_type}) does not sign "
                                f"{alg}, which the token names")
        return self._grant(self._claims(token, key.key, alg))

    def _claims(self, token: str, key: Any, alg: str) -> dict[str, Any]:
        import jwt

        try:
            claims: dict[str, Any] = jwt.decode(
                token, key, algorithms=[alg], audience=self.audiences,
                issuer=self.issuer, leeway=self.settings.leeway_s,
                options={"require": ["exp", "iss", "aud"]})
        except jwt.ExpiredSignatureError as exc:
            raise TokenRejected("token expired") from exc
        except jwt.ImmatureSignatureError as exc:
            raise TokenRejected("token not valid yet (nbf or iat in the future)") from exc
        except jwt.InvalidAudienceError as exc:
            raise TokenRejected(f"token audience is not this server: it must name "
                                f"{self.resource}") from exc
        except jwt.InvalidIssuerError as exc:
            raise TokenRejected(f"token issuer is not {self.issuer}") from exc
        except jwt.InvalidSignatureError as exc:
            raise TokenRejected("token signature does not verify") from exc
        except jwt.MissingRequiredClaimError as exc:
            raise TokenRejected(f"token has no {exc.claim!r} claim") from exc
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            raise TokenRejected(f"token refused: {exc}") from exc
        return claims

    def _grant(self, claims: dict[str, Any]) -> Grant:
        scopes = _scopes(claims)
        subject = _client(claims)
        if self.settings.operator_scope in scopes:
            return Grant(client=OPERATOR, scopes=scopes, tools=None, subject=subject)
        tools = tuple(dict.fromkeys(p for s in sorted(scopes)
                                    for p in self.settings.scopes.get(s, ())))
        return Grant(client=subject, scopes=scopes, tools=tools, subject=subject)

    def covering(self, tool: str) -> list[str]:
        """The scopes that let a client call ``tool``."""
        return sorted(s for s, patterns in self.settings.scopes.items()
                      if any(fnmatchcase(tool, p) for p in patterns))

    # -- challenges ---------------------------------------------------------------------

    def challenge(self, description: str | None = None) -> bytes:
        """``WWW-Authenticate`` of a 401: where the metadata is, the scopes to ask for, and
        why a token sent was refused."""
        asked = self.settings.challenge_scopes or sorted(self.settings.scopes)
        parts = [f'resource_metadata="{self.metadata_url}"', f'scope="{" ".join(asked)}"']
        if description is not None:
            parts += ['error="invalid_token"', f'error_description="{_quoted(description)}"']
        return ("Bearer " + ", ".join(parts)).encode("latin-1", "replace")

    def scope_challenge(self, tool: str) -> bytes:
        """``WWW-Authenticate`` of a 403 for a tool the token's scopes do not cover."""
        scopes = " ".join(self.covering(tool))
        return (f'Bearer error="insufficient_scope", scope="{scopes}", resource_metadata='
                f'"{self.metadata_url}", error_description="{_quoted(_not_covered(tool))}"'
                ).encode("latin-1", "replace")

    def metadata_body(self) -> bytes:
        return json.dumps(self.metadata()).encode()


def _not_covered(tool: str) -> str:
    return f"the token's scopes do not cover tool {tool!r}"


def not_covered_message(resource: OAuthResource, tool: str) -> str:
    """The message of a 403 for ``tool``: what is wrong and which scopes to ask for."""
    scopes = resource.covering(tool)
    return (_not_covered(tool) + (f"; ask the authorization server for a token with scope "
                                  f"{' or '.join(scopes)}" if scopes else
                                  "; no scope of this server covers it"))


def _quoted(text: str) -> str:
    return "".join(c if c.isprintable() and c not in '"\\' else "'" for c in text)[:300]


def _scopes(claims: dict[str, Any]) -> frozenset[str]:
    """The token's scopes: RFC 9068's ``scope`` (space-separated), or ``scp`` (a list)."""
    given = claims.get("scope", claims.get("scp", ""))
    if isinstance(given, str):
        return frozenset(given.split())
    if isinstance(given, list):
        return frozenset(s for s in given if isinstance(s, str))
    return frozenset()


def _client(claims: dict[str, Any]) -> str:
    """The client's name: ``oauth:`` and the client id (``client_id`` or ``azp``), then
    ``:`` and ``sub`` when the token is a user's (the two differ), so two users of one agent
    never share a session (nor its session-wide approvals)."""
    app = claims.get("client_id") or claims.get("azp")
    sub = claims.get("sub")
    parts = [p for p in dict.fromkeys((app, sub)) if p is not None]
    if not parts:
        raise TokenRejected("token names no client: it needs client_id, azp or sub")
    for part in parts:
        if not isinstance(part, str) or not _ID_PART.fullmatch(part):
            raise TokenRejected("token client_id/azp/sub must be 1-128 letters, digits or "
                                "._@|+=- characters")
    return "oauth:" + ":".join(parts)
