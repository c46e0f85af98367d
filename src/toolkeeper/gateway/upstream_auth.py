"""OAuth to an upstream MCP server: the official SDK's client auth (``mcp.client.auth``: the
authorization code flow with PKCE, and its client-credentials providers: a client secret, or an
assertion signed with the client's private key) over the tokens the store keeps sealed
(``credentials.py``).

The SDK discovers the authorization server from the upstream's 401 (RFC 9728, then RFC 8414),
registers a client where none is configured (a client ID metadata document where the server
accepts them, else dynamic registration), refreshes an expired token, and answers a 403
``insufficient_scope`` by asking again with the union of scopes. Around it, toolkeeper:

- loads the kept token with its expiry (so a token kept across a restart is refreshed, not
  sent expired), and reads the store again before refreshing (another replica may have
  refreshed and rotated it);
- asks for the configured ``scopes`` besides those the upstream challenges for;
- never opens a browser while serving: a flow that needs a person stops with
  :class:`LoginNeeded`, one line naming the upstream and ``toolkeeper upstream login NAME``,
  and keeps the scope it would have asked for, so that login asks for it.
"""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..config.model import MCPServerConfig
from ..config.notify import expand_env
from ..config.upstream_auth import UpstreamOAuth
from .client_key import ClientKeyRefused, read_client_key
from .credentials import CredentialsUnreadable, StoredTokens

if TYPE_CHECKING:
    import httpx2
    from mcp.shared.auth import AuthorizationCodeResult

__all__ = ["LoginNeeded", "Redirect", "login_command", "refusal", "taken_refusal",
           "upstream_auth"]

Redirect = tuple[Callable[[str], Awaitable[None]],
                 Callable[[], Awaitable["AuthorizationCodeResult"]]]
"""A person's browser step: show the link, then wait for the code."""


class LoginNeeded(Exception):
    """A person must consent before the gateway can reach this upstream; the message is the
    one line for the operator (and the model), naming the command to run."""


def login_command(name: str) -> str:
    return f"toolkeeper upstream login {name}"


def refusal(name: str, exc: BaseException) -> str | None:
    """One line for an operator when ``exc`` (or what caused it) is an OAuth failure of
    upstream ``name``; ``None`` when it is not one."""
    from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError

    for cause in _causes(exc):
        if isinstance(cause, LoginNeeded | ClientKeyRefused):
            return str(cause)
        if isinstance(cause, CredentialsUnreadable):
            return (f"MCP server '{name}': its OAuth tokens in the store do not open with this "
                    "server's upstream key (set TOOLKEEPER_UPSTREAM_KEY to the same value on "
                    f"every replica), or log in again: run `{login_command(name)}`")
        if isinstance(cause, OAuthFlowError | OAuthRegistrationError | OAuthTokenError):
            text = " ".join(str(cause).split())[:300]
            return (f"MCP server '{name}' refused OAuth ({text}); check its [mcp.servers.oauth] "
                    f"settings, or run `{login_command(name)}`")
    return None


def taken_refusal(auth: Any) -> str | None:
    """The line of the last OAuth failure of ``auth`` (an ``upstream_auth``), once: what a
    transport that turned it into "connection closed" hid."""
    kept: _Kept | None = getattr(auth, "kept", None)
    if kept is None or kept.refused is None:
        return None
    line, kept.refused = kept.refused, None
    return line


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc``, the exceptions of a group, and what each was raised from (depth-first)."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo:
        one = todo.pop()
        if one in seen:
            continue
        seen.append(one)
        if isinstance(one, BaseExceptionGroup):
            todo.extend(one.exceptions)
        todo.extend(c for c in (one.__cause__, one.__context__) if c is not None)
    return seen


def upstream_auth(config: MCPServerConfig, storage: StoredTokens, *,
                  redirect: Redirect | None = None) -> httpx2.Auth:
    """The ``httpx2.Auth`` of ``config``'s OAuth over ``storage``; with ``redirect`` (a
    person's browser step, ``upstream login``), without it (serving) a flow that needs a
    person raises :class:`LoginNeeded`."""
    from mcp.shared.auth import OAuthClientMetadata

    oauth = config.oauth
    assert oauth is not None and config.url is not None
    code = _providers()[0]
    where = f"mcp server '{config.name}' oauth"
    client_id = expand_env(oauth.client_id, f"{where} client_id") if oauth.client_id else None
    secret = expand_env(oauth.client_secret, f"{where} client_secret") \
        if oauth.client_secret else None
    if oauth.grant == "client_credentials":
        assert client_id is not None
        provider: Any = _machine_provider(config, storage, client_id, secret)
    else:
        metadata = OAuthClientMetadata(
            client_name=f"toolkeeper gateway ({config.name})", redirect_uris=[oauth.redirect_uri],
            grant_types=["authorization_code", "refresh_token"], response_types=["code"],
            token_endpoint_auth_method="client_secret_basic" if secret else "none",
            scope=oauth.scope)
        provider = code(config.url, metadata, storage,
                        redirect[0] if redirect else None, redirect[1] if redirect else None,
                        oauth.client_metadata_url)
    provider.kept = _Kept(config.name, oauth, storage, client_id, secret,
                          interactive=redirect is not None)
    return provider  # type: ignore[no-any-return]


def _machine_provider(config: MCPServerConfig, storage: StoredTokens, client_id: str,
                      secret: str | None) -> Any:
    """The client-credentials provider: with the client's secret, or with assertions signed
    by its private key (read now, from where no tool reaches it)."""
    from mcp.client.auth.extensions.client_credentials import SignedJWTParameters
    from mcp.shared.exceptions import MCPDeprecationWarning

    oauth = config.oauth
    assert oauth is not None and config.url is not None
    _code, machine, signed = _providers()
    with warnings.catch_warnings():  # no issuer: said once at start, in one line (confinement)
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        if oauth.private_key_file is None:
            assert secret is not None
            return machine(config.url, storage, client_id, secret,
                           oauth.token_endpoint_auth_method, oauth.scope, oauth.issuer)
        pem, algorithm = read_client_key(config.name, oauth.private_key_file,
                                         oauth.signing_algorithm)
        assertions = SignedJWTParameters(issuer=client_id, subject=client_id, signing_key=pem,
                                         signing_algorithm=algorithm)
        return signed(config.url, storage, client_id, assertions.create_assertion_provider(),
                      oauth.scope, oauth.issuer)


class _Kept:
    """What toolkeeper adds to a provider of the SDK (see the module's docstring)."""

    def __init__(self, name: str, oauth: UpstreamOAuth, storage: StoredTokens,
                 client_id: str | None, secret: str | None, *, interactive: bool) -> None:
        self.name, self.oauth, self.storage = name, oauth, storage
        self.client_id, self.secret, self.interactive = client_id, secret, interactive
        self.refresh_failed = False
        self.refused: str | None = None
        """The line of the last OAuth failure, until the upstream takes it (``refused``)."""

    def why(self, scope: str | None, granted: str | None) -> str:
        """Why a person must log in (for :class:`LoginNeeded`)."""
        more = sorted(set((scope or "").split()) - set((granted or "").split()))
        if self.refresh_failed:
            why = "could not refresh its OAuth token"
        elif granted is not None and more:
            why = f"asks for more OAuth scope ({' '.join(more)})"
        elif self.storage.has_tokens():
            why = "refused its OAuth token"
        else:
            why = "has no OAuth token yet"
        return f"MCP server '{self.name}' {why}: run `{login_command(self.name)}`"


class _OneLine(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "OAuth flow error"


@functools.cache
def _providers() -> tuple[type[Any], type[Any], type[Any]]:
    """The SDK's three providers with toolkeeper's additions (the SDK is imported when an
    upstream with OAuth connects, not by every command)."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.auth.extensions.client_credentials import (
        ClientCredentialsOAuthProvider,
        PrivateKeyJWTOAuthProvider,
    )
    from mcp.client.auth.utils import union_scopes
    from mcp.shared.auth import OAuthClientInformationFull

    # The SDK logs each failed flow with its traceback; the upstream says it in one line.
    logging.getLogger("mcp.client.auth.oauth2").addFilter(_OneLine())

    class Additions(OAuthClientProvider):
        kept: _Kept

        async def _load(self) -> None:
            tokens, expires_at = await self.kept.storage.load()
            self.context.current_tokens, self.context.token_expiry_time = tokens, expires_at

        async def _initialize(self) -> None:
            await self._load()
            self.context.client_info = self._fixed() or await self.kept.storage.get_client_info()
            self._initialized = True

        def _fixed(self) -> OAuthClientInformationFull | None:
            kept = self.kept
            if kept.client_id is None:
                return None
            method = kept.oauth.token_endpoint_auth_method if kept.secret else "none"
            return OAuthClientInformationFull(
                client_id=kept.client_id, client_secret=kept.secret,
                grant_types=["authorization_code", "refresh_token"],
                redirect_uris=[kept.oauth.redirect_uri],
                token_endpoint_auth_method=method, scope=kept.oauth.scope)

        async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
            refreshed = await super()._handle_refresh_response(response)
            self.kept.refresh_failed = not refreshed
            return refreshed

        async def _perform_authorization(self) -> httpx2.Request:
            metadata, kept = self.context.client_metadata, self.kept
            wanted = await kept.storage.wanted_scope()
            metadata.scope = union_scopes(union_scopes(metadata.scope, kept.oauth.scope), wanted)
            if isinstance(self, ClientCredentialsOAuthProvider | PrivateKeyJWTOAuthProvider) \
                    or kept.interactive:
                return await super()._perform_authorization()
            tokens = self.context.current_tokens or await kept.storage.get_tokens()
            if metadata.scope:
                await kept.storage.want_scope(metadata.scope)
            kept.refused = kept.why(metadata.scope, tokens.scope if tokens else None)
            raise LoginNeeded(kept.refused)

        @property
        def _initialized(self) -> bool:
            """Loaded, and holding a token still valid: an expired one is read from the
            store again before it is refreshed (another replica may have refreshed it)."""
            return getattr(self, "_loaded", False) and self.context.is_token_valid()

        @_initialized.setter
        def _initialized(self, loaded: bool) -> None:
            self._loaded = loaded

        async def _handle_token_response(self, response: httpx2.Response) -> None:
            try:
                await super()._handle_token_response(response)
            except Exception as exc:  # the transport may swallow it: kept for the upstream
                self.kept.refused = refusal(self.kept.name, exc)
                raise

    class Code(Additions):
        pass

    class Machine(Additions, ClientCredentialsOAuthProvider):
        def _fixed(self) -> OAuthClientInformationFull | None:
            kept = self.kept
            return OAuthClientInformationFull(
                client_id=kept.client_id, client_secret=kept.secret, redirect_uris=None,
                grant_types=["client_credentials"],
                token_endpoint_auth_method=kept.oauth.token_endpoint_auth_method,
                scope=kept.oauth.scope)

    class Signed(Additions, PrivateKeyJWTOAuthProvider):
        def _fixed(self) -> OAuthClientInformationFull | None:
            return OAuthClientInformationFull(
                client_id=self.kept.client_id, redirect_uris=None,
                grant_types=["client_credentials"], token_endpoint_auth_method="private_key_jwt",
                scope=self.kept.oauth.scope)

    return Code, Machine, Signed
