"""The authorization server's signing keys (its JWKS), fetched over HTTP and kept.

Where the keys are: ``jwks_url`` when given, else the ``jwks_uri`` of the issuer's metadata
(RFC 8414 ``/.well-known/oauth-authorization-server``, then OpenID Connect's
``/.well-known/openid-configuration``), whose ``issuer`` must be the configured one. The set is
fetched on first need and again when older than ``max_age_s``; a token naming a key the set
does not hold (the issuer rotated its keys) fetches it again — at most once every
``min_refresh_s``, so tokens with made-up key ids cannot turn this server into a flood of
requests at the issuer.

The issuer is a dependency that can fail, and it must fail alone. A fetch — discovery and the
key set together — has one wall-clock deadline (``timeout_s``): an endpoint that hangs or sends
a byte a second cannot hold it longer. One fetch runs at a time: a request that needs the fetch
under way waits for it, one whose key is held goes on with it. A fetch that fails (an error, the
deadline, a set with no key this server can use) keeps the keys held, is said on the operator's
log in one line, and is not tried again for ``min_refresh_s``. Only with no key held at all
can tokens not be checked (``KeysUnavailable``, with when to try again).
"""

from __future__ import annotations

import json
import logging
import math
import time
from typing import Any
from urllib.parse import urlsplit

import anyio

__all__ = ["MAX_JWKS_BYTES", "KeySet", "KeysUnavailable", "metadata_urls"]

MAX_JWKS_BYTES = 1 << 20
WAIT_MARGIN_S = 1.0
"""How much longer than a fetch's deadline a request waiting for that fetch waits."""
logger = logging.getLogger(__name__)


class KeysUnavailable(Exception):
    """The issuer's keys could not be fetched and none are held; ``retry_after``: seconds
    until the next fetch may be tried."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


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
                 min_refresh_s: float = 30.0, timeout_s: float = 10.0) -> None:
        self.issuer, self.jwks_url = issuer, jwks_url
        self.max_age_s, self.min_refresh_s, self.timeout_s = max_age_s, min_refresh_s, timeout_s
        self.keys: dict[str | None, tuple[Any, str | None]] = {}
        """kid → (``jwt.PyJWK``, the algorithm the key declares, if it does): the last good
        set."""
        self.fetched_at = -math.inf
        self._asked_at = -math.inf  # the last fetch for an unknown kid
        self._failed_at = -math.inf  # the last fetch that failed
        self._fetching: anyio.Event | None = None  # set when the fetch under way ends
        self.last_error = ""
        """Why the last fetch failed, if it did (for the operator: the log says it)."""

    async def key(self, kid: str | None) -> tuple[Any, str | None] | None:
        """The key ``kid`` names (a token without ``kid``: the one key of a set of one) and
        the algorithm it declares, or ``None``.

        Raises:
            KeysUnavailable: no keys are held and the issuer's could not be fetched.
        """
        found = self._find(kid)
        if self._due(found):
            await self._refresh()
            found = self._find(kid)
        elif found is None and self._fetching is not None:  # the fetch under way may bring it
            # Its own deadline ends it; this one only guards against a fetch that never ends,
            # and is later, so a busy loop that runs both timers in one turn lets the fetch end
            # (and say why) first.
            with anyio.move_on_after(self.timeout_s + WAIT_MARGIN_S):
                await self._fetching.wait()
            found = self._find(kid)
        if not self.keys:
            raise KeysUnavailable(f"the signing keys of {self.issuer} could not be fetched",
                                  retry_after=self.retry_after())
        return found

    def retry_after(self) -> int:
        """Seconds until a fetch may be tried again (at least 1; 1 while no fetch has
        failed, as when the one under way has not ended yet)."""
        if self._failed_at == -math.inf:
            return 1
        return max(1, math.ceil(self._failed_at + self.min_refresh_s - time.monotonic()))

    def _due(self, found: tuple[Any, str | None] | None) -> bool:
        """Whether this request starts a fetch: none is under way, none failed in the last
        ``min_refresh_s``, and the set is older than ``max_age_s`` or (at most once per
        ``min_refresh_s``) the key is unknown."""
        now = time.monotonic()
        if self._fetching is not None or now - self._failed_at < self.min_refresh_s:
            return False
        if now - self.fetched_at > self.max_age_s:
            return True
        if found is None and now - self._asked_at >= self.min_refresh_s:
            self._asked_at = now
            return True
        return False

    def _find(self, kid: str | None) -> tuple[Any, str | None] | None:
        if kid is None:
            return next(iter(self.keys.values())) if len(self.keys) == 1 else None
        return self.keys.get(kid)

    async def _refresh(self) -> None:
        """One fetch under one deadline; the keys replaced only by a set that has one."""
        import httpx  # the server extra

        self._fetching = done = anyio.Event()
        try:
            with anyio.fail_after(self.timeout_s):
                keys = _parse(await _get_json(self.jwks_url or await self._discover()))
            if not keys:
                raise ValueError("the key set has no signing key this server can use")
            self.keys, self.fetched_at, self.last_error = keys, time.monotonic(), ""
        except TimeoutError:
            self._failed(f"no whole answer within {self.timeout_s:g} s")
        except (httpx.HTTPError, httpx.InvalidURL, ValueError, RecursionError) as exc:
            self._failed(" ".join(f"{type(exc).__name__}: {exc}".split()))
        finally:
            self._fetching = None
            done.set()

    def _failed(self, why: str) -> None:
        self._failed_at = time.monotonic()
        self.last_error = why
        held = (f"the {len(self.keys)} key(s) fetched "
                f"{time.monotonic() - self.fetched_at:.0f} s ago stay in use" if self.keys
                else "no key is held: requests with access tokens get 503")
        logger.warning("toolkeeper: the signing keys of %s could not be fetched (%s); %s; "
                       "next try in %g s at the earliest", self.issuer, why, held,
                       self.min_refresh_s)

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
    """A JSON object from ``url`` (no redirects, at most ``MAX_JWKS_BYTES``); the caller holds
    the deadline."""
    import httpx  # the server extra

    async with httpx.AsyncClient(follow_redirects=False, trust_env=False, timeout=None) as http, \
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

    entries = jwks.get("keys")
    if not isinstance(entries, list):
        raise ValueError("the key set has no 'keys' list")
    keys: dict[str | None, tuple[Any, str | None]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig" \
                or entry.get("kty") == "oct":
            continue
        try:
            alg = entry.get("alg")
            keys[entry.get("kid")] = (PyJWK(entry), alg if isinstance(alg, str) else None)
        except PyJWKError:
            continue
    return keys
