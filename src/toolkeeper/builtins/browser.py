"""``browser`` and ``browser_open``: a headless Chromium confined to the allowed domains.

Every request the page makes — the navigation, each redirect, each subresource, each
``fetch`` — is intercepted and made by toolkeeper, not by the browser, through the same
``http.exchange`` as ``web_fetch``: the domain allowlist (label boundaries), public addresses
only (unless loopback is allowed), the connection pinned to the checked address, every redirect
checked again. A request that fails the rules is aborted and reported. The browser itself
cannot reach anything: it resolves no name (``--host-resolver-rules=MAP * ~NOTFOUND``) and
anything that escapes interception (a WebSocket, a redirect the browser would follow itself, a
prefetch) goes to a proxy that does not exist. WebRTC, which no interception sees and which
sends UDP (STUN to any address a page names, connectivity checks to any candidate), is turned
off twice: the constructors are removed from every frame before its scripts run (``NO_WEBRTC``),
and Chromium may send WebRTC traffic only through the proxy (``--webrtc-ip-handling-policy=
disable_non_proxied_udp``), which leaves no UDP at all — so a frame that got hold of a
constructor anyway still sends nothing. Service workers and downloads are off. Each call starts a
fresh browser (no cookies or storage carried between calls) under one deadline.

Chromium is the system's (``executable_path``; Playwright never downloads one), driven through
Playwright, an optional dependency: ``pip install 'toolkeeper[browser]'``.
"""

from __future__ import annotations

import html
import importlib.util
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict

from ..core.metadata import ToolMetadata
from ..core.results import ImageBlock, TextBlock, ToolResult
from ..core.risk import ToolRisk
from ..errors import PolicyViolationError, ToolRaisedError
from ..tools.tool import Tool
from .http import checked, exchange, load_httpx, url_preflight
from .policy import SecurityPolicy

if TYPE_CHECKING:
    import httpx

__all__ = ["BROWSER_ARGS", "NO_WEBRTC", "BrowserAction", "browser_tools", "playwright_missing"]

BROWSER_ARGS = ("--host-resolver-rules=MAP * ~NOTFOUND",
                "--proxy-server=socks5://unreachable.invalid:1", "--proxy-bypass-list=<-loopback>",
                "--webrtc-ip-handling-policy=disable_non_proxied_udp",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-extensions", "--no-first-run", "--mute-audio")
NO_WEBRTC = """(() => {
  for (const name of ["RTCPeerConnection", "webkitRTCPeerConnection", "RTCIceTransport",
                      "WebTransport"]) {
    try { delete globalThis[name]; } catch (_) {}
  }
})();"""
"""Run in every frame before the page's scripts: the interfaces that open peer-to-peer or
QUIC connections are gone."""
MAX_RESOURCE_BYTES = 10 << 20
MAX_TEXT_CHARS = 20_000
_DROPPED = {"host", "content-length", "content-encoding", "transfer-encoding", "connection",
            "keep-alive", "proxy-connection", "upgrade"}
INSTALL = "pip install 'toolkeeper[browser]'"


def playwright_missing() -> str | None:
    """Why the browser tools cannot run here (no Playwright), or ``None``."""
    if importlib.util.find_spec("playwright") is None:
        return f"needs Playwright, the browser extra: {INSTALL}"
    return None


class BrowserAction(BaseModel):
    """One step on the page after it loads."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    action: Literal["click", "fill", "press", "wait_for"]
    selector: str
    """A CSS or Playwright selector of the element (``button#send``, ``text=Sign in``)."""
    text: str = ""
    """For ``fill``: the value to type; for ``press``: the key (``Enter``)."""


@dataclass
class _Traffic:
    """What the interception let through and refused during one call."""

    policy: SecurityPolicy
    client: httpx.AsyncClient
    blocked: list[str] = field(default_factory=list)
    refused_navigation: PolicyViolationError | None = None
    landed: str | None = None

    async def handle(self, route: Any) -> None:
        request = route.request
        httpx = load_httpx("the browser tools")
        try:
            headers = {k: v for k, v in (await request.all_headers()).items()
                       if k.lower() not in _DROPPED and not k.startswith(":")}
            done = await exchange(self.client, request.method, request.url, self.policy,
                                  headers=headers, body=request.post_data_buffer,
                                  cap=MAX_RESOURCE_BYTES)
        except PolicyViolationError as exc:
            self.blocked.append(f"{request.url}: {exc}")
            if request.is_navigation_request() and request.frame.parent_frame is None:
                self.refused_navigation = exc
            await route.abort("blockedbyclient")
            return
        except httpx.HTTPError:
            await route.abort("failed")
            return
        body = done.body
        if request.is_navigation_request() and request.frame.parent_frame is None:
            self.landed = str(done.url)
            if self.landed != request.url and b"<" in body:  # redirected: links resolve there
                body = f'<base href="{html.escape(self.landed)}">'.encode() + body
        await route.fulfill(status=done.response.status_code, body=body, headers={
            k: v for k, v in done.response.headers.items() if k.lower() not in _DROPPED})


async def _run(policy: SecurityPolicy, executable: Path, timeout_s: float, url: str,
               then: Callable[[Any], Awaitable[None]], screenshot: bool) -> ToolResult:
    await checked(url, policy)  # refused before a browser starts
    try:
        from playwright.async_api import Error as PlaywrightError
        from playwright.async_api import async_playwright
    except ImportError as exc:
        raise ToolRaisedError(f"the browser tools {playwright_missing()}",
                              tool_name="browser") from exc
    httpx = load_httpx("the browser tools")
    async with httpx.AsyncClient(trust_env=False, follow_redirects=False,
                                 timeout=timeout_s) as client, async_playwright() as driver:
        traffic = _Traffic(policy, client)
        browser = await driver.chromium.launch(
            executable_path=str(executable), headless=True, args=list(BROWSER_ARGS),
            chromium_sandbox=os.geteuid() != 0, env={"PATH": os.environ.get("PATH", "")})
        try:
            context = await browser.new_context(service_workers="block", accept_downloads=False)
            await context.add_init_script(script=NO_WEBRTC)
            await context.route("**/*", traffic.handle)
            page = await context.new_page()
            page.set_default_timeout(timeout_s * 1000)
            try:
                await page.goto(url)
                await then(page)
            except PlaywrightError as exc:
                if traffic.refused_navigation is not None:
                    raise traffic.refused_navigation from None
                raise ToolRaisedError(f"the browser could not finish on {url}: "
                                      f"{str(exc).splitlines()[0]}", tool_name="browser") from None
            return await _report(page, traffic, screenshot)
        finally:
            await browser.close()


async def _report(page: Any, traffic: _Traffic, screenshot: bool) -> ToolResult:
    text = (await page.inner_text("body"))[:MAX_TEXT_CHARS]
    lines = [f"{await page.title()} — {traffic.landed or page.url}", "", text]
    if traffic.blocked:
        lines += ["", f"blocked {len(traffic.blocked)} request(s):",
                  *(f"- {b}" for b in traffic.blocked)]
    blocks: list[TextBlock | ImageBlock] = [TextBlock(text="\n".join(lines))]
    if screenshot:
        blocks.append(ImageBlock.from_bytes(await page.screenshot(type="png"), "image/png"))
    return ToolResult(content=tuple(blocks))


def browser_tools(policy: SecurityPolicy, *, executable_path: str | Path = "/usr/bin/chromium",
                  timeout_s: float = 30.0) -> list[Tool]:
    """``browser`` (open a page, act on it, read it) and ``browser_open`` (open and read), both
    confined to ``policy.allowed_domains``."""
    executable = Path(executable_path)

    async def run(url: str, then: Callable[[Any], Awaitable[None]], shot: bool) -> ToolResult:
        try:
            with anyio.fail_after(timeout_s):
                return await _run(policy, executable, timeout_s, url, then, shot)
        except TimeoutError:
            raise ToolRaisedError(f"the browser took longer than {timeout_s:g} s on {url} and "
                                  "was stopped", tool_name="browser") from None

    async def check_open(url: str) -> None:
        await url_preflight(url, policy)

    async def check(url: str, actions: list[BrowserAction] | None = None,
                    screenshot: bool = True) -> None:
        await url_preflight(url, policy)

    async def browser_open(url: str) -> ToolResult:
        """Open a web page in a headless browser; returns its text and a screenshot.

        Args:
            url: An http or https URL on an allowed domain.
        """
        async def nothing(page: Any) -> None:
            return None
        return await run(url, nothing, True)

    async def browser(url: str, actions: list[BrowserAction] | None = None,
                      screenshot: bool = True) -> ToolResult:
        """Open a web page in a headless browser, act on it, and return its text and a screenshot.

        Args:
            url: An http or https URL on an allowed domain.
            actions: Steps to take in order once the page has loaded.
            screenshot: Whether to include a screenshot of the page at the end.
        """
        async def act(page: Any) -> None:
            for step in actions or []:
                target = page.locator(step.selector).first
                if step.action == "click":
                    await target.click()
                elif step.action == "fill":
                    await target.fill(step.text)
                elif step.action == "press":
                    await target.press(step.text)
                else:
                    await target.wait_for()
            await page.wait_for_load_state()
        return await run(url, act, screenshot)

    meta = {"open_world_hint": True, "category": "research", "tags": frozenset({"network"}),
            "timeout": timeout_s + 10}
    return [Tool.from_function(browser, risk=ToolRisk.HIGH, metadata=ToolMetadata(**meta),
                               preflight=check),
            Tool.from_function(browser_open, risk=ToolRisk.SENSITIVE, preflight=check_open,
                               metadata=ToolMetadata(read_only_hint=True, **meta))]
