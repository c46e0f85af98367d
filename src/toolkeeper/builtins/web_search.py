"""``web_search_tool``: a web search through a provider's API (Brave Search).

The request goes to the provider's API root the operator configured (``[web_search]
base_url``), never to an address the model chose, so the fetch tools' address rules do not
apply to it; what comes back is capped and the whole exchange runs under one deadline. The API
key travels in the request header only: it is not in the tool's description, arguments or
result.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

import anyio

from ..core.json import JsonObject
from ..core.metadata import ToolMetadata
from ..core.risk import ToolRisk
from ..errors import ToolRaisedError
from ..tools.tool import Tool
from .http import load_httpx

__all__ = ["BRAVE_API", "web_search_tool"]

BRAVE_API = "https://api.search.brave.com/res/v1"
MAX_RESPONSE_BYTES = 4 << 20
_TAG = re.compile(r"<[^>]+>")


def _plain(text: object) -> str:
    """Brave marks matched words with ``<strong>``; the model gets plain text."""
    return html.unescape(_TAG.sub("", str(text or ""))).strip()


def _results(payload: Any, limit: int) -> list[JsonObject]:
    web = payload.get("web") if isinstance(payload, dict) else None
    rows = web.get("results") if isinstance(web, dict) else None
    if not isinstance(rows, list):
        return []
    out: list[JsonObject] = []
    for row in rows[:limit]:
        if isinstance(row, dict) and row.get("url"):
            out.append({"title": _plain(row.get("title")), "url": str(row["url"]),
                        "description": _plain(row.get("description")),
                        **({"age": str(row["age"])} if row.get("age") else {})})
    return out


async def _get(url: str, params: dict[str, str | int], key: str, timeout_s: float) -> Any:
    headers = {"Accept": "application/json", "X-Subscription-Token": key}
    httpx = load_httpx("the web_search_tool")
    async with httpx.AsyncClient(trust_env=False, follow_redirects=False,
                                 timeout=timeout_s) as client, \
            client.stream("GET", url, params=params, headers=headers) as response:
        data = bytearray()
        async for chunk in response.aiter_bytes():
            data += chunk
            if len(data) > MAX_RESPONSE_BYTES:
                raise ToolRaisedError(f"the search provider answered with more than "
                                      f"{MAX_RESPONSE_BYTES} bytes", tool_name="web_search_tool")
        if response.status_code != 200:
            raise ToolRaisedError(
                f"the search provider answered {response.status_code}: "
                f"{_plain(bytes(data[:300]).decode('utf-8', 'replace'))}",
                tool_name="web_search_tool")
        return json.loads(bytes(data)) if data else {}


def web_search_tool(*, api_key: str, base_url: str = BRAVE_API, max_results: int = 5,
                    timeout_s: float = 15.0) -> Tool:
    """``web_search_tool`` over the Brave Search API at ``base_url`` with ``api_key``."""
    endpoint = base_url.rstrip("/") + "/web/search"

    async def web_search_tool(query: str, count: int = max_results) -> str:
        """Search the web and return the top results: title, URL and a short description.

        Args:
            query: What to search for, as you would type it into a search engine.
            count: How many results to return (1 to 20).
        """
        if not query.strip():
            raise ToolRaisedError("the query is empty; say what to search for",
                                  tool_name="web_search_tool")
        wanted = max(1, min(count, 20))
        httpx = load_httpx("the web_search_tool")
        try:
            with anyio.fail_after(timeout_s):
                payload = await _get(endpoint, {"q": query, "count": wanted}, api_key, timeout_s)
        except TimeoutError:
            raise ToolRaisedError(f"the search took longer than {timeout_s:g} s and was "
                                  "stopped", tool_name="web_search_tool") from None
        except (httpx.HTTPError, ValueError) as exc:
            raise ToolRaisedError(f"the search failed: {exc}",
                                  tool_name="web_search_tool") from exc
        results = _results(payload, wanted)
        if not results:
            return f"no results for {query!r}"
        return "\n\n".join(
            f"{n}. {r['title']}\n   {r['url']}" + (f"\n   {r['description']}"
                                                   if r["description"] else "")
            for n, r in enumerate(results, start=1))

    return Tool.from_function(web_search_tool, risk=ToolRisk.SENSITIVE, metadata=ToolMetadata(
        read_only_hint=True, open_world_hint=True, category="research",
        tags=frozenset({"network"}), locality="remote", timeout=timeout_s + 5))
