"""``text_browser``: a page as readable text with its links numbered, under the fetch rules.

The page is fetched exactly as ``web_fetch`` fetches (``http.exchange``: http(s) only, public
addresses only unless allowed, the connection pinned to the checked address, every redirect
checked again, the body capped, one deadline over the whole exchange). Each link becomes
``text [n]`` in the text and ``[n] absolute-url`` in the list below it, so a model can follow
one by calling the tool again with that URL. Scripts, styles and images are left out; links
that are not http(s) (``javascript:``, ``mailto:``, fragments) keep their text and get no
number.
"""

from __future__ import annotations

import html
from html.parser import HTMLParser
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

import anyio

from ..core.metadata import ToolMetadata
from ..core.risk import ToolRisk
from ..errors import ToolRaisedError
from ..extras import missing
from ..tools.tool import Tool
from .http import exchange, load_httpx, url_preflight
from .policy import SecurityPolicy

if TYPE_CHECKING:
    pass

__all__ = ["numbered_links", "text_browser_tool"]

_SKIP = {"script", "style", "noscript", "template", "svg", "iframe"}


class _Links(HTMLParser):
    """Re-writes a page with every http(s) anchor replaced by ``text [n]``."""

    def __init__(self, base: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base, self.out, self.links = base, [], []  # type: ignore[var-annotated]
        self.open: list[int | None] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self.skipping += 1
        elif tag == "base" and dict(attrs).get("href"):
            self.base = urljoin(self.base, dict(attrs)["href"] or "")
        elif tag == "a":
            self.open.append(self._number(dict(attrs).get("href")))
        elif not self.skipping:
            self.out.append(self.get_starttag_text() or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag == "a":
            number = self.open.pop() if self.open else None
            if number is not None and not self.skipping:
                self.out.append(f" [{number}]")
        elif not self.skipping:
            self.out.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.out.append(html.escape(data, quote=False))

    def _number(self, href: str | None) -> int | None:
        if not href:
            return None
        url = urljoin(self.base, href.strip()).split("#", 1)[0]
        if urlsplit(url).scheme not in ("http", "https"):
            return None
        if url not in self.links:
            self.links.append(url)
        return self.links.index(url) + 1


def numbered_links(page: str, base_url: str) -> tuple[str, list[str]]:
    """The readable text of an HTML page with its links numbered, and the links (absolute)."""
    parser = _Links(base_url)
    parser.feed(page)
    parser.close()
    try:
        import html2text
    except ImportError as exc:
        raise missing("builtins", "the text_browser tool") from exc
    converter = html2text.HTML2Text()
    converter.ignore_images = True
    converter.ignore_links = True
    converter.body_width = 0
    return converter.handle("".join(parser.out)).strip(), parser.links


def text_browser_tool(policy: SecurityPolicy, *, timeout_s: float = 30.0) -> Tool:
    """``text_browser`` bound to ``policy`` (its domains and address rules)."""

    async def check(url: str) -> None:
        await url_preflight(url, policy)

    async def text_browser(url: str) -> str:
        """Open a web page as plain text with its links numbered; follow a link by opening its URL.

        Args:
            url: An http or https URL on the public internet.
        """
        httpx = load_httpx("the text_browser tool")
        try:
            with anyio.fail_after(timeout_s):
                async with httpx.AsyncClient(trust_env=False, follow_redirects=False,
                                             timeout=timeout_s) as client:
                    done = await exchange(client, "GET", url, policy)
        except TimeoutError:
            raise ToolRaisedError(f"opening {url} took longer than the {timeout_s:g} s time "
                                  "limit and was stopped", tool_name="text_browser") from None
        except httpx.HTTPError as exc:
            raise ToolRaisedError(f"opening {url} failed: {exc}",
                                  tool_name="text_browser") from exc
        page = done.body.decode(done.response.encoding or "utf-8", errors="replace")
        if "html" in done.response.headers.get("content-type", ""):
            text, links = numbered_links(page, str(done.url))
        else:
            text, links = page, []
        parts = [f"[{done.response.status_code}] {done.url}", text]
        if links:
            parts.append("Links:\n" + "\n".join(f"[{n}] {link}"
                                                for n, link in enumerate(links, start=1)))
        if done.truncated:
            parts.append(f"[page cut at {policy.max_output_bytes} bytes]")
        return "\n\n".join(parts)

    return Tool.from_function(text_browser, risk=ToolRisk.SENSITIVE, metadata=ToolMetadata(
        read_only_hint=True, open_world_hint=True, category="research",
        tags=frozenset({"network"}), timeout=timeout_s + 5), preflight=check)
