"""``[mcp.servers.oauth]``: how the gateway authenticates to an upstream MCP server reached over
HTTP with OAuth, as that server's authorization server offers.

Two grants:

- ``authorization_code`` (the default): a person consents once in a browser —
  ``toolkeeper upstream login NAME`` prints the link and finishes when the authorization
  server redirects to ``redirect_uri`` (a listener on loopback) or when the code is pasted
  back. The client is ``client_id`` when it was registered beforehand, else the
  ``client_metadata_url`` (a client ID metadata document the operator publishes) when the
  authorization server accepts those, else one registered dynamically (RFC 7591).
- ``client_credentials``: a machine's own ``client_id`` and ``client_secret``, no person.

The authorization server is discovered from the upstream itself: its 401 names its protected
resource metadata (RFC 9728), which names the authorization server, whose metadata (RFC 8414)
names the endpoints. Tokens are refreshed before they expire and kept sealed in the store.
Secrets stay out of the file: ``client_id`` and ``client_secret`` may name environment
variables as ``${NAME}``.
"""

from __future__ import annotations

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
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post"] = \
        "client_secret_basic"
    issuer: str | None = Field(default=None, pattern=r"^https?://")
    """The authorization server ``client_id``/``client_secret`` belong to: their credentials
    are sent to no other, wherever the upstream points."""

    @model_validator(mode="after")
    def _grant_needs(self) -> UpstreamOAuth:
        if self.grant == "client_credentials" and not (self.client_id and self.client_secret):
            raise ValueError("oauth grant 'client_credentials' needs client_id and "
                             "client_secret (they may name ${ENV} variables)")
        if self.client_secret and not self.client_id:
            raise ValueError("oauth client_secret is given without its client_id")
        return self

    @property
    def scope(self) -> str | None:
        """The configured scopes as one space-separated string, or ``None``."""
        return " ".join(self.scopes) or None
