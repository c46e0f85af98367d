"""The authorization server's signing keys (its JWKS), fetched over HTTP and kept.

Where the keys are: ``jwks_url`` when given, else the ``jwks_uri`` of the issuer's metadata
(RFC 8414 ``/.well-known/oauth-authorization-server``, then OpenID Connect's
``/.well-known/openid-configuration``), whose ``issuer`` must be the configured one. The set is
fetched on first need and again when older than ``max_age_s``; a token naming a key the set
does not hold (the issuer rotated its keys) fetches it again — at most once every
``min_refresh_s``, so tokens with made-up key ids cannot turn this server into a flood of
requests at the issuer. A fetch that fails keeps the keys held; with none held, tokens cannot
be checked (``KeysUnavailable``).
"""

from __future__ import annotations

import json
import math
import time
from typing import Any
from urllib.parse import urlsplit

import anyio

__all__ = ["MAX_JWKS_BYTES", "KeySet", "KeysUnavailable", "metadata_urls"]

MAX_JWKS_BYTES = 1 << 20
FETCH_TIMEOUT_S = 10.0


class KeysUnavailable(Exception):
    """The issuer's keys could not be fetched (and none are held)."""


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: RFC 8414's (the well-known part before the issuer's
    path), then OpenID Connect's (after it)."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    origin = f"{parts.scheme}://{parts.netloc}"
    return [f"{origin}/.well-known/oauth-authorization-server{path}",
            f"{origin}{path}/.well-known/openid-configuration"]


class KeySet:
    """The issuer's public keys by key id (``kid``)."""

    def __init__(self, issuer: str, *, jwks_url: str | None = None, max_age_s: float = 3600.0,
                 min_refresh_s: float = 30.0) -> None:
        self.issuer, self.jwks_url = issuer, jwks_url
        self.max_age_s, self.min_refresh_s = max_age_s, min_refresh_s
        self.keys: dict[str | None, tuple[Any, str | None]] = {}
        """kid → (``jwt.PyJWK``, the algorithm the key declares, if it does)."""
        self.fetched_at = -math.inf
        self._asked_at = -math.inf  # the last fetch for an unknown kid (or a failed fetch)
        self._lock = anyio.Lock()
        self.last_error = ""
        """Why the last fetch failed (for the operator's log), if it did."""

    async def key(self, kid: str | None) -> tuple[Any, str | None] | None:
        """The key ``kid`` names (a token without ``kid``: the one key of a set of one) and
        the algorithm it declares, or ``None``.

        Raises:
            KeysUnavailable: no keys are held and the issuer's cannot be fetched.
        """
        now = time.monotonic()
        if now - self.fetched_at > self.max_age_s and now - self._asked_at >= self.min_refresh_s:
            await self._refresh(now)
        found = self._find(kid)
        if found is None and self._lock.locked():  # a fetch under way may bring it
            async with self._lock:
                pass
            found = self._find(kid)
        elif found is None and time.monotonic() - self._asked_at >= self.min_refresh_s:
            self._asked_at = time.monotonic()
            await self._refresh(time.monotonic())
            found = self._find(kid)
        if not self.keys and self.fetched_at == -math.inf:
            raise KeysUnavailable(f"the signing keys of {self.issuer} could not be fetched")
        return found

    def _find(self, kid: str | None) -> tuple[Any, str | None] | None:
        if kid is None:
            return next(iter(self.keys.values())) if len(self.keys) == 1 else None
        return self.keys.get(kid)

    async def _refresh(self, asked: float) -> None:
        import httpx  # the server extra

        async with self._lock:
            if self.fetched_at >= asked:
                return  # fetched while this one waited
            try:
                url = self.jwks_url or await self._discover()
                self.keys = _parse(await _get_json(url))
                self.fetched_at = time.monotonic()
            except (httpx.HTTPError, ValueError) as exc:
                self._asked_at = time.monotonic()  # failures are rate-limited too
                self.last_error = f"{type(exc).__name__}: {exc}"

    async def _discover(self) -> str:
        import httpx  # the server extra

        problems = []
        for url in metadata_urls(self.issuer):
            try:
                metadata = await _get_json(url)
            except (httpx.HTTPError, ValueError) as exc:
                problems.append(f"{url}: {exc}")
                continue
            if metadata.get("issuer") != self.issuer:
                raise ValueError(f"{url} names issuer {metadata.get('issuer')!r}, not "
                                 f"{self.issuer!r}")
            jwks = metadata.get("jwks_uri")
            if not isinstance(jwks, str):
                raise ValueError(f"{url} has no jwks_uri")
            self.jwks_url = jwks
            return jwks
        raise ValueError("no authorization server metadata: " + "; ".join(problems))


async def _get_json(url: str) -> dict[str, Any]:
    """A JSON object from ``url`` (no redirects, at most ``MAX_JWKS_BYTES``, one deadline)."""
    import httpx  # the server extra

    with anyio.fail_after(FETCH_TIMEOUT_S):
        async with httpx.AsyncClient(follow_redirects=False, trust_env=False,
                                     timeout=FETCH_TIMEOUT_S) as http, \
                http.stream("GET", url, headers={"accept": "application/json"}) as response:
            if response.status_code != 200:
                raise ValueError(f"{url} answered {response.status_code}")
            body = b""
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_JWKS_BYTES:
                    raise ValueError(f"{url} answered more than {MAX_JWKS_BYTES} bytes")
    found = json.loads(body)
    if not isinstance(found, dict):
        raise ValueError(f"{url} did not answer a JSON object")
    return found


def _parse(jwks: dict[str, Any]) -> dict[str | None, tuple[Any, str | None]]:
    """The signing keys of a JWKS document that this server can use (others are skipped: an
    encryption key, a symmetric one, a kind it does not know)."""
    from jwt import PyJWK
    from jwt.exceptions import PyJWKError

    keys: dict[str | None, tuple[Any, str | None]] = {}
    for entry in jwks.get("keys") or []:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig" \
                or entry.get("kty") == "oct":
            continue
        try:
            alg = entry.get("alg")
            keys[entry.get("kid")] = (PyJWK(entry), alg if isinstance(alg, str) else None)
        except PyJWKError:
            continue
    return keys
