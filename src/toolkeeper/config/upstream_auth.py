"""``[mcp.servers.oauth]``: how the gateway authenticates to an upstream MCP server reached over
HTTP with OAuth, as that server's authorization server offers.

Two grants:

- ``authorization_code`` (the default): a person consents once in a browser —
  ``toolkeeper upstream login NAME`` prints the link and finishes when the authorization
  server redirects to ``redirect_uri`` (a listener on loopback) or when the code is pasted
  back. The client is ``client_id`` when it was registered beforehand, else the
  ``client_metadata_url`` (a client ID metadata document the operator publishes) when the
  authorization server accepts those, else one registered dynamically (RFC 7591).
- ``client_credentials``: a machine's own ``client_id`` and, to prove it, its
  ``client_secret`` or a ``private_key_file`` (``private_key_jwt``: each token request carries
  an assertion signed with that key, RFC 7523), no person.

The authorization server is discovered from the upstream itself: its 401 names its protected
resource metadata (RFC 9728), which names the authorization server, whose metadata (RFC 8414)
names the endpoints. Tokens are refreshed before they expire and kept sealed in the store.
Secrets stay out of the file: ``client_id`` and ``client_secret`` may name environment
variables as ``${NAME}``; a private key is a file in a toolkeeper state folder, owner-only
(``gateway.client_key`` checks it), where no tool and no sandboxed upstream reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["UpstreamOAuth"]


class UpstreamOAuth(BaseModel):
    """OAuth to one upstream (``[mcp.servers.oauth]`` under its ``[[mcp.servers]]``)."""

    model_config = ConfigDict(extra="forbid")

    grant: Literal["authorization_code", "client_credentials"] = "authorization_code"
    client_id: str | None = None
    """A client registered beforehand (else a metadata document or dynamic registration)."""
    client_secret: str | None = None
    client_metadata_url: str | None = Field(default=None, pattern=r"^https://[^/]+/.+")
    """The HTTPS URL of a client ID metadata document, used as the client ID where the
    authorization server says it accepts them."""
    scopes: list[str] = Field(default_factory=list)
    """Asked for besides what the upstream challenges for (its 401 or 403 names them)."""
    redirect_uri: str = Field(default="http://127.0.0.1:33418/callback",
                              pattern=r"^https?://[^/]+(/.*)?$")
    """Where the authorization server sends the browser back: on ``127.0.0.1`` or
    ``localhost``, ``upstream login`` listens there; elsewhere, it asks for the code."""
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post",
                                        "private_key_jwt"] = "client_secret_basic"
    """How the client proves itself at the token endpoint; ``private_key_jwt`` whenever a
    ``private_key_file`` is given."""
    private_key_file: Path | None = None
    """The client's private key (PEM, unencrypted: RSA, EC P-256/384/521 or Ed25519) that signs
    its ``private_key_jwt`` assertions: an absolute path in a toolkeeper state folder (the
    state dir), readable by its owner only."""
    signing_algorithm: Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256",
                               "ES384", "ES512", "EdDSA"] | None = None
    """The assertion's JWS algorithm; by default the key's own (RS256, ES256/384/512 by the
    curve, EdDSA)."""
    issuer: str | None = Field(default=None, pattern=r"^https?://")
    """The authorization server ``client_id``/``client_secret`` belong to: their credentials
    are sent to no other, wherever the upstream points."""

    @model_validator(mode="after")
    def _grant_needs(self) -> UpstreamOAuth:
        if self.private_key_file is not None:
            self._key_needs(self.private_key_file)
        elif self.token_endpoint_auth_method == "private_key_jwt":
            raise ValueError("oauth token_endpoint_auth_method 'private_key_jwt' needs the "
                             "private_key_file that signs its assertions")
        elif self.grant == "client_credentials" and not (self.client_id and self.client_secret):
            raise ValueError("oauth grant 'client_credentials' needs client_id and "
                             "client_secret (they may name ${ENV} variables), or client_id "
                             "and private_key_file")
        if self.client_secret and not self.client_id:
            raise ValueError("oauth client_secret is given without its client_id")
        return self

    def _key_needs(self, key: Path) -> None:
        """A private key signs a ``client_credentials`` grant's assertions, nothing else."""
        if self.grant != "client_credentials" or not self.client_id:
            raise ValueError("oauth private_key_file is for grant = \"client_credentials\" "
                             "with its client_id")
        if self.client_secret:
            raise ValueError("oauth client_secret and private_key_file are two ways to prove "
                             "the client: give one")
        if "token_endpoint_auth_method" not in self.model_fields_set:
            self.token_endpoint_auth_method = "private_key_jwt"
        elif self.token_endpoint_auth_method != "private_key_jwt":
            raise ValueError("oauth private_key_file signs a private_key_jwt assertion: set "
                             "token_endpoint_auth_method = \"private_key_jwt\" or leave it out")
        if not key.is_absolute():
            raise ValueError("oauth private_key_file must be an absolute path (a file in the "
                             "state dir, readable by its owner only)")

    @property
    def scope(self) -> str | None:
        """The configured scopes as one space-separated string, or ``None``."""
        return " ".join(self.scopes) or None
