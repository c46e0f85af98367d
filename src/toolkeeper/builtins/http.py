"""``http_fetch`` and ``http_request``: the web, without reaching inside the network.

http(s) only; no credentials in URLs; the host is resolved once and every address must be
globally routable (loopback, private, link-local — cloud metadata at 169.254.169.254 —, ULA and
unspecified addresses are refused; an IPv6 address that carries an IPv4 one is judged by it, or
refused outright — ``public_address``); the connection goes to the validated address
(the Host header and TLS SNI carry the name), so DNS cannot change between check and use; every
redirect is validated again (at most 5); the body is capped after decompression and the whole
exchange by one absolute deadline; proxy variables in the environment are ignored; an allowlist
of domains matches on label boundaries. HTML comes back as readable text (html2text).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from ..core.json import JsonObject
from ..core.metadata import ToolMetadata
from ..core.risk import ToolRisk
from ..errors import PolicyViolationError, ToolRaisedError
from ..extras import missing
from ..tools.tool import Tool
from .policy import SecurityPolicy

if TYPE_CHECKING:
    import httpx

__all__ = ["PREFLIGHT_RESOLVE_S", "Exchange", "check_url", "checked", "domain_allowed",
           "exchange", "http_tools", "load_httpx", "public_address", "url_preflight"]

MAX_REDIRECTS = 5
PREFLIGHT_RESOLVE_S = 3.0
"""How long a pre-flight waits for the host's addresses before leaving the judgement to the
tool's run."""
_LOOPBACK = {ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")}
_CARRIERS = (ipaddress.ip_network("::ffff:0:0/96"),  # IPv4-mapped
             ipaddress.ip_network("64:ff9b::/96"))  # NAT64's well-known prefix
"""IPv6 forms whose last 32 bits are the IPv4 address the packet ends up at: judged by it."""
_REFUSED_V6 = (ipaddress.ip_network("::/96"),  # IPv4-compatible (deprecated), ::1 and ::
               ipaddress.ip_network("::ffff:0:0:0/96"),  # IPv4-translated
               ipaddress.ip_network("64:ff9b:1::/48"),  # local-use NAT64: this network's own
               ipaddress.ip_network("2001::/32"))  # Teredo
"""IPv6 forms that a tunnel or translator inside the network takes to IPv4, wherever the IPv4
address sits in them: refused whatever they carry."""


def load_httpx(what: str = "the http_fetch and http_request tools") -> ModuleType:
    """httpx, imported when a request is made (the ``builtins`` extra)."""
    try:
        import httpx
    except ImportError as exc:
        raise missing("builtins", what) from exc
    return httpx


@dataclass(frozen=True)
class Target:
    url: httpx.URL
    host: str
    address: str


def _refuse(message: str, rule: str) -> PolicyViolationError:
    return PolicyViolationError(message, tool_name="http_fetch", details={"rule": rule})


def domain_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    """Whether ``host`` is one of ``allowed`` or below one (matched on label boundaries)."""
    host = host.lower().rstrip(".")
    return any(host == d.lower().strip(".") or host.endswith("." + d.lower().strip("."))
               for d in allowed)


def public_address(address: str) -> bool:
    """Whether ``address`` is on the public internet: globally routable, not multicast. An IPv6
    address that carries an IPv4 one is judged by the IPv4 address (IPv4-mapped, NAT64's
    ``64:ff9b::/96``, 6to4's ``2002::/16``), or refused whatever it carries where a tunnel or
    translator inside the network would take it (IPv4-compatible ``::a.b.c.d``, IPv4-translated,
    local-use NAT64 ``64:ff9b:1::/48``, Teredo ``2001::/32``)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in net for net in _REFUSED_V6):
            return False
        if any(ip in net for net in _CARRIERS):
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        elif ip.sixtofour is not None:
            ip = ip.sixtofour
    return ip.is_global and not ip.is_multicast


def _address_ok(address: str, policy: SecurityPolicy) -> bool:
    return public_address(address) or (
        policy.allow_loopback_http and ipaddress.ip_address(address.split("%", 1)[0]) in _LOOPBACK)


def check_url(url: str, policy: SecurityPolicy) -> Target:
    """Validate a URL and resolve its host to one allowed address.

    Raises:
        PolicyViolationError: naming the rule (scheme, credentials, domain, address).
    """
    httpx = load_httpx()
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise _refuse(f"{url!r} is not a valid URL ({exc})", "url") from exc
    if parsed.scheme not in ("http", "https"):
        raise _refuse(f"scheme '{parsed.scheme}' is refused; only http and https are fetched",
                      "http.scheme")
    if parsed.userinfo:
        raise _refuse("URLs with credentials (user:password@) are refused", "http.userinfo")
    host = parsed.host
    if not host:
        raise _refuse(f"{url!r} has no host", "url")
    if policy.allowed_domains and not domain_allowed(host, policy.allowed_domains):
        raise _refuse(f"'{host}' is not in {policy.allowed_domains_key} "
                      f"({', '.join(policy.allowed_domains)}); add it to allow it",
                      "allowed_domains")
    addresses = _resolve(host, parsed, policy)
    bad = [a for a in addresses if not _address_ok(a, policy)]
    if bad or not addresses:
        raise _refuse(f"'{host}' resolves to {', '.join(bad or ['nothing'])}, which is not a "
                      "public address; requests inside the network are refused (rule "
                      "http.non_global_address)", "http.non_global_address")
    return Target(url=parsed, host=host, address=addresses[0])


async def checked(url: str, policy: SecurityPolicy) -> Target:
    """``check_url`` off the event loop (it resolves the host)."""
    return await anyio.to_thread.run_sync(check_url, url, policy, abandon_on_cancel=True)


async def url_preflight(url: str, policy: SecurityPolicy) -> None:
    """A web tool's pre-flight: the rules ``check_url`` applies to ``url`` before anything is
    sent. Resolving the host is part of the address rule, so it is looked up too, for at most
    ``PREFLIGHT_RESOLVE_S``: a slower lookup decides nothing here (the tool resolves again, and
    connects to the address it checked, when it runs).

    Raises:
        PolicyViolationError: what the tool's run would raise for ``url``.
    """
    with anyio.move_on_after(PREFLIGHT_RESOLVE_S):
        await checked(url, policy)


def _resolve(host: str, parsed: httpx.URL, policy: SecurityPolicy) -> list[str]:
    pinned = dict(policy.hosts).get(host.lower().rstrip("."))
    if pinned is not None:
        return [pinned]
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise _refuse(f"'{host}' cannot be resolved ({exc})", "http.dns") from exc
    return [str(info[4][0]) for info in infos]


def _pinned(target: Target) -> httpx.URL:
    address = target.address
    return target.url.copy_with(host=f"[{address}]" if ":" in address else address)


async def _fetch(method: str, url: str, policy: SecurityPolicy, headers: dict[str, str] | None,
                 body: str | None, timeout_s: float) -> tuple[httpx.Response, bytes, bool]:
    """The whole exchange — resolving, connecting, the status line and headers, the body and
    every redirect — under one absolute deadline: a server that dribbles its headers a byte
    at a time cannot keep the call alive past it (a per-read timeout restarts on every byte)."""
    try:
        with anyio.fail_after(timeout_s):
            return await _exchange(method, url, policy, headers, body, timeout_s)
    except TimeoutError:
        raise ToolRaisedError(f"{method} {url} took longer than the {timeout_s:g} s time limit "
                              "and was stopped", tool_name="http_fetch") from None


@dataclass(frozen=True)
class Exchange:
    """The end of one exchange: the last URL asked (after redirects), its response, the body
    (capped) and whether it was cut."""

    url: httpx.URL
    response: httpx.Response
    body: bytes
    truncated: bool


async def exchange(client: httpx.AsyncClient, method: str, url: str, policy: SecurityPolicy, *,
                   headers: dict[str, str] | None = None, body: bytes | None = None,
                   cap: int | None = None) -> Exchange:
    """One request under the address rules, following at most ``MAX_REDIRECTS`` redirects,
    each checked again as if it were the first URL. ``client`` must not follow redirects or
    trust the environment's proxies.

    Raises:
        PolicyViolationError: a URL (the first or a redirect's) the rules refuse.
    """
    for _ in range(MAX_REDIRECTS + 1):
        target = await checked(url, policy)
        request = client.build_request(
            method, _pinned(target), content=body,
            headers={**(headers or {}), "Host": target.url.netloc.decode()},
            extensions={"sni_hostname": target.host} if target.url.scheme == "https" else {})
        response = await client.send(request, stream=True)
        try:
            if response.is_redirect and "location" in response.headers:
                url = str(target.url.join(response.headers["location"]))
                if response.status_code in (301, 302, 303):
                    method, body = "GET", None
                continue
            data, truncated = await _read_capped(response, cap or policy.max_output_bytes)
            return Exchange(target.url, response, data, truncated)
        finally:
            await response.aclose()
    raise _refuse(f"more than {MAX_REDIRECTS} redirects", "http.redirects")


async def _exchange(method: str, url: str, policy: SecurityPolicy,
                    headers: dict[str, str] | None, body: str | None, timeout_s: float
                    ) -> tuple[httpx.Response, bytes, bool]:
    httpx = load_httpx()
    async with httpx.AsyncClient(trust_env=False, follow_redirects=False,
                                 timeout=timeout_s) as client:
        done = await exchange(client, method, url, policy, headers=headers,
                              body=body.encode() if body is not None else None)
        return done.response, done.body, done.truncated


async def _read_capped(response: httpx.Response, cap: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            return b"".join(chunks)[:cap], True
    return b"".join(chunks), False


def _as_text(response: httpx.Response, data: bytes) -> str:
    kind = response.headers.get("content-type", "")
    text = data.decode(response.encoding or "utf-8", errors="replace")
    if "html" in kind:
        try:
            import html2text
        except ImportError as exc:
            raise missing("builtins", "http_fetch's HTML to text") from exc
        converter = html2text.HTML2Text()
        converter.ignore_images = True
        converter.body_width = 0
        return converter.handle(text).strip()
    return text


def http_tools(policy: SecurityPolicy, *, timeout_s: float = 30.0) -> list[Tool]:
    """``http_fetch`` (GET, readable text) and ``http_request`` (any method) bound to ``policy``."""

    async def check_fetch(url: str) -> None:
        await url_preflight(url, policy)

    async def check_request(method: str, url: str, headers: dict[str, str] | None = None,
                            body: str | None = None) -> None:
        _verb(method)
        await url_preflight(url, policy)

    async def http_fetch(url: str) -> str:
        """Fetch a web page or document and return it as readable text.

        Args:
            url: An http or https URL on the public internet.
        """
        httpx = load_httpx()
        try:
            response, data, truncated = await _fetch("GET", url, policy, None, None, timeout_s)
        except httpx.HTTPError as exc:
            raise ToolRaisedError(f"fetching {url} failed: {exc}", tool_name="http_fetch") from exc
        text = _as_text(response, data)
        note = f"\n[body cut at {policy.max_output_bytes} bytes]" if truncated else ""
        return f"[{response.status_code}] {response.url.path}\n{text}{note}"

    async def http_request(method: str, url: str, headers: dict[str, str] | None = None,
                     body: str | None = None) -> JsonObject:
        """Send an HTTP request to a public API and return the status, headers and body.

        Args:
            method: GET, POST, PUT, PATCH, DELETE or HEAD.
            url: An http or https URL on the public internet.
            headers: Request headers.
            body: Request body (text or JSON text).
        """
        verb = _verb(method)
        httpx = load_httpx()
        try:
            response, data, truncated = await _fetch(verb, url, policy, headers, body, timeout_s)
        except httpx.HTTPError as exc:
            raise ToolRaisedError(f"{verb} {url} failed: {exc}", tool_name="http_request") from exc
        return {"status": response.status_code,
                "headers": dict(response.headers), "body": _as_text(response, data),
                "truncated": truncated}

    return [
        Tool.from_function(http_fetch, risk=ToolRisk.SENSITIVE, metadata=ToolMetadata(
            read_only_hint=True, open_world_hint=True, category="research",
            tags=frozenset({"network"}), timeout=timeout_s + 5), preflight=check_fetch),
        Tool.from_function(http_request, risk=ToolRisk.HIGH, metadata=ToolMetadata(
            open_world_hint=True, category="research", tags=frozenset({"network"}),
            timeout=timeout_s + 5), preflight=check_request),
    ]


def _verb(method: str) -> str:
    verb = method.upper()
    if verb not in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"):
        raise _refuse(f"method {method!r} is refused", "http.method")
    return verb
