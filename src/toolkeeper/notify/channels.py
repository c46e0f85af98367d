"""Where notifications go: an Apprise URL, or a webhook toolkeeper posts itself.

Apprise (the ``notify`` extra) reaches ntfy, email, Telegram, Matrix, Discord, Pushover, Slack,
Teams and about a hundred more from one URL each; toolkeeper adds what a service can show:
ntfy's action buttons and click target, an HTML mail whose buttons are links. Webhooks in a
service's own JSON (``slack``, ``teams``) carry real link buttons, and toolkeeper's own JSON
event (``json://``, ``jsons://`` or ``format = "json"``) is signed (``signing.py``) — Apprise's
JSON webhook cannot sign. A send either returns or raises ``SendFailed`` with a line saying why;
its secrets (tokens, passwords, a webhook's path) are never in that line nor in ``shown``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from typing import Protocol
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import anyio
import anyio.to_thread

from ..config.notify import Target, WebhookTarget, expand_env
from ..errors import ConfigError
from .message import Notice, as_html, as_json, as_slack, as_teams, as_text, ntfy_actions
from .signing import sign

__all__ = ["AppriseChannel", "Channel", "SendFailed", "WebhookChannel", "channel_for"]

_EMAIL = ("mailto", "mailtos")
_NTFY = ("ntfy", "ntfys")
THREADS = 8
"""Sends at once through one Apprise channel: threads of its own (the notifier's limit per
channel is the same)."""


class SendFailed(Exception):
    """A channel did not take a message; the message says why (no secret in it)."""


class Channel(Protocol):
    """One place messages go."""

    @property
    def name(self) -> str:
        """What kind of channel (``ntfy``, ``mailto``, ``slack``, ``json``): the metrics'
        label and, for a decision made through one of its links, the approver ``notify:NAME``."""
    @property
    def key(self) -> str:
        """A digest of its URL: which channel a claim is for."""
    @property
    def shown(self) -> str:
        """Its URL without secrets, for messages."""

    async def send(self, notice: Notice, timeout_s: float) -> None: ...


def _key(url: str) -> str:
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:32]


def _host_only(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}/…"


class _ThreadLog(logging.Handler):
    """Apprise's warnings and errors logged by one thread (one send): why it failed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread, self.lines = threading.get_ident(), list[str]()

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.lines.append(record.getMessage())


class AppriseChannel:
    """An Apprise URL. ntfy gets the buttons as its actions (and the card as its click
    target), email an HTML body with link buttons; every other service plain text with each
    link on a line of its own.

    Apprise sends synchronously. Each send runs in a thread of this channel's own (at most
    ``THREADS``), never one of the pool the server's calls use, and Apprise runs it in that
    thread rather than in its process-wide pool (a few threads shared by every channel): a
    receiver that hangs then holds only this channel's sends."""

    def __init__(self, url: str, where: str) -> None:
        import apprise

        plugin = apprise.Apprise.instantiate(url)
        if plugin is None:
            scheme = url.split("://", 1)[0] if "://" in url else url[:20]
            raise ConfigError(f"{where}: {scheme}:// is not a notification URL Apprise can use "
                              "(unknown service, or a malformed URL: see the Apprise wiki's page "
                              "for the service)")
        self.url, self.key = url, _key(url)
        self.scheme = url.split("://", 1)[0].lower()
        names = [getattr(plugin, a) for a in ("protocol", "secure_protocol")]
        first = [n[0] if isinstance(n, tuple | list) else n for n in names if n]
        self.name = str(first[0]) if first else self.scheme
        shown = plugin.url(privacy=True)  # type: ignore[no-untyped-call]
        self.shown = str(shown).split("?", 1)[0]
        # no time limit of Apprise's own (the notifier's timeout_s is the limit): Apprise then
        # sends in the calling thread, not in its shared pool
        self.asset = apprise.AppriseAsset(service_timeout=0)
        self._threads: anyio.CapacityLimiter | None = None  # made in the event loop

    async def send(self, notice: Notice, timeout_s: float) -> None:
        if self._threads is None:
            self._threads = anyio.CapacityLimiter(THREADS)
        with anyio.fail_after(timeout_s):
            failure = await anyio.to_thread.run_sync(self._send, notice, abandon_on_cancel=True,
                                                     limiter=self._threads)
        if failure is not None:
            raise SendFailed(failure)

    def _send(self, notice: Notice) -> str | None:
        import apprise

        sender = apprise.Apprise(asset=self.asset)
        log, logger = _ThreadLog(), logging.getLogger("apprise")
        logger.addHandler(log)
        try:
            if not sender.add(self._url_for(notice)):
                return f"{self.shown}: Apprise refused the URL"
            email = self.scheme in _EMAIL
            sent = sender.notify(
                body=as_html(notice) if email else as_text(notice), title=notice.title,
                body_format=apprise.NotifyFormat.HTML if email else apprise.NotifyFormat.TEXT)
        finally:
            logger.removeHandler(log)
        if sent:
            return None
        said = " ".join(log.lines[-2:]) or "the service did not take the message"
        return f"{self.shown}: {said}"[:500]

    def _url_for(self, notice: Notice) -> str:
        """The URL with this message's ntfy actions and click target (ntfy reads them from
        its URL's query), no retries of Apprise's own (the notifier retries), and — unless the
        URL asks for it — no icon (Apprise's is a link to a third party's server, which would
        learn of every message)."""
        parts = urlsplit(self.url)
        given = parse_qsl(parts.query, keep_blank_values=True)
        extra = {"retry": "0"}
        if self.scheme in _NTFY:
            if notice.buttons:
                extra["actions"] = ntfy_actions(notice)
            if notice.where.startswith(("http://", "https://")):
                extra["click"] = notice.where
            if not any(k == "image" for k, _ in given):
                extra["image"] = "no"
        query = [(k, v) for k, v in given if k not in extra]
        query_text = urlencode([*query, *extra.items()], quote_via=quote)  # Apprise reads
        return urlunsplit(parts._replace(query=query_text))  # '+' as itself, not a space


class WebhookChannel:
    """A webhook posted by toolkeeper in the service's own JSON: ``slack``, ``teams``, or
    ``json`` (toolkeeper's event, signed with ``key``)."""

    def __init__(self, url: str, kind: str, *, key: bytes | None = None) -> None:
        self.url, self.name, self.signing_key = url, kind, key
        self.key = _key(url)
        self.shown = _host_only(url)

    async def send(self, notice: Notice, timeout_s: float) -> None:
        import httpx

        payload = {"slack": as_slack, "teams": as_teams}.get(self.name, as_json)(notice)
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        headers = {"content-type": "application/json", "user-agent": "toolkeeper-notify"}
        if self.signing_key is not None:
            headers.update(sign(self.signing_key, body))
        try:
            with anyio.fail_after(timeout_s):
                async with httpx.AsyncClient(timeout=timeout_s, follow_redirects=False,
                                             trust_env=False) as client:
                    answer = await client.post(self.url, content=body, headers=headers)
        except TimeoutError:
            raise SendFailed(f"{self.shown}: no answer within {timeout_s:g} s") from None
        except httpx.HTTPError as exc:
            raise SendFailed(f"{self.shown}: {type(exc).__name__}: {exc}"[:500]) from None
        if not 200 <= answer.status_code < 300:
            raise SendFailed(f"{self.shown}: answered HTTP {answer.status_code}")


def channel_for(target: Target, where: str, *, signing_key: str) -> Channel:
    """The channel of one configured entry (``where``: its place in the config, for
    errors), with its ``${NAME}``s read from the environment."""
    if isinstance(target, WebhookTarget):
        url, kind = expand_env(target.url, where), target.format
    else:
        url = expand_env(target, where)
        scheme = url.split("://", 1)[0].lower()
        if scheme not in ("json", "jsons"):
            return AppriseChannel(url, where)
        url, kind = ("https" if scheme == "jsons" else "http") + url[len(scheme):], "json"
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{where}: a webhook URL is http:// or https://")
    if kind != "json":
        return WebhookChannel(url, kind)
    key = expand_env(signing_key, "[approval.notify] signing_key")
    if len(key) < 16:
        raise ConfigError("[approval.notify] signing_key: a JSON webhook is signed with a key "
                          "of at least 16 characters (a random one: python -c 'import secrets; "
                          "print(secrets.token_urlsafe(32))')")
    return WebhookChannel(url, kind, key=key.encode("utf-8"))
