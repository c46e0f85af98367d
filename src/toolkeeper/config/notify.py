"""``[approval.notify]``: tell a person, where they are, that a call waits for them.

A request goes to ``urls`` (every request) and to the ``urls`` of each ``[[approval.notify.routes]]``
it matches (by risk, tool, client, upstream); still pending after ``remind_after`` it is told
again, and after ``escalate_after`` to ``escalate_urls``. An entry is an Apprise URL
(``ntfys://ntfy.example.com/approvals``, ``mailtos://…``, ``tgram://…``, ``slack://…``; ~100
services) or a webhook that toolkeeper posts itself in the service's own JSON, with buttons:
``json://`` / ``jsons://`` (toolkeeper's event, signed with HMAC-SHA256 over the timestamp and
the body), or ``{ url = "https://…", format = "slack" | "teams" | "json" }``. Secrets stay out of
the file: an entry and ``signing_key`` may name environment variables as ``${NAME}``.
"""

from __future__ import annotations

import fnmatch
import os
import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from ..core.risk import ToolRisk
from ..errors import ConfigError

__all__ = ["NotifyRoute", "NotifySection", "WebhookTarget", "expand_env", "parse_duration"]

_VAR = re.compile(r"\$\{(\w+)\}")
_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)\s*h)?\s*(?:(\d+(?:\.\d+)?)\s*m(?:in)?)?\s*"
                       r"(?:(\d+(?:\.\d+)?)\s*s)?\s*$")


def parse_duration(value: object) -> object:
    """Seconds as a number, or a text like ``"90s"``, ``"15m"``, ``"2h"``, ``"1h30m"``."""
    if not isinstance(value, str):
        return value
    match = _DURATION.match(value)
    if not value.strip() or match is None or not any(match.groups()):
        raise ValueError(f"{value!r} is not a duration: write seconds (900) or a text like "
                         "'90s', '15m', '2h', '1h30m'")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


Duration = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]


def expand_env(value: str, where: str) -> str:
    """``${NAME}`` replaced by the environment variable (secrets stay out of the config);
    ``ConfigError`` naming ``where`` when one is not set."""
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ConfigError(f"{where} names ${{{name}}}, which is not set in the "
                              "environment; export it before starting")
        return os.environ[name]
    return _VAR.sub(one, value)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WebhookTarget(_Section):
    """A webhook toolkeeper posts itself, in the service's own JSON (with link buttons):
    ``slack`` (Block Kit: Slack's incoming webhooks, and Mattermost's and Rocket.Chat's, which
    take the same), ``teams`` (an Adaptive Card: a Teams workflow's webhook) or ``json``
    (toolkeeper's event, signed)."""

    url: str = Field(pattern=r"^(https?://|\$\{)")
    format: Literal["json", "slack", "teams"]


Target = str | WebhookTarget


class NotifyRoute(_Section):
    """``[[approval.notify.routes]]``: where the requests that match go, besides ``urls``. Every
    condition given must hold; a list holds when one of its entries does (``tools`` are name
    patterns: ``git_*``)."""

    urls: list[Target] = Field(min_length=1)
    min_risk: ToolRisk | None = None
    tools: list[str] = Field(default_factory=list)
    clients: list[str] = Field(default_factory=list)
    upstreams: list[str] = Field(default_factory=list)
    """Names of ``[[mcp.servers]]``: the requests for their tools."""

    def matches(self, *, risk: ToolRisk, tool: str, client: str, upstream: str | None) -> bool:
        if self.min_risk is not None and risk < self.min_risk:
            return False
        if self.tools and not any(fnmatch.fnmatchcase(tool, p) for p in self.tools):
            return False
        if self.clients and client not in self.clients:
            return False
        return not self.upstreams or upstream in self.upstreams


class NotifySection(_Section):
    """``[approval.notify]``: notifications of approval requests (the ``notify`` extra)."""

    urls: list[Target] = Field(default_factory=list)
    """Every request goes here."""
    routes: list[NotifyRoute] = Field(default_factory=list)
    remind_after: Duration | None = None
    """Still pending this long after it was asked: told once more, to the same places."""
    escalate_after: Duration | None = None
    """Still pending this long after it was asked: told to ``escalate_urls``."""
    escalate_urls: list[Target] = Field(default_factory=list)
    direct_decisions: bool = False
    """Buttons that decide (single-use links bound to the request and its arguments) instead
    of buttons that open the card, where the person's login decides. Whoever holds the
    message can then decide."""
    page_url: str | None = Field(default=None, pattern=r"^https?://")
    """The approval page as the person reaches it (behind a proxy); default: the address
    ``toolkeeper serve`` listens on."""
    signing_key: str = "${TOOLKEEPER_NOTIFY_KEY}"
    """The HMAC key of the ``json`` webhooks (needed only when there is one)."""
    timeout_s: float = Field(default=10.0, gt=0, le=120)
    """One attempt to reach a channel, every byte of it."""
    attempts: int = Field(default=4, ge=1, le=10)
    """Tries per message (with backoff) before it counts as failed."""

    @model_validator(mode="after")
    def _escalation_has_somewhere_to_go(self) -> NotifySection:
        if self.escalate_after is not None and not self.escalate_urls:
            raise ValueError("escalate_after needs escalate_urls (where escalations go)")
        if self.escalate_urls and self.escalate_after is None:
            raise ValueError("escalate_urls needs escalate_after (when to escalate)")
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.urls or self.routes or self.escalate_urls)
