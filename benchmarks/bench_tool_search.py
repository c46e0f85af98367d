"""Benchmark: the tokens of ``tools/list`` for a 500-tool gateway, with and without
``serve --tool-search``.

The upstream is an official-SDK low-level server run from this file (``--upstream``): 500
tools, 50 services × 10 actions, each with a one-sentence description and two to four
described parameters — the shape of a gateway in front of a few dozen SaaS servers. A real
``toolkeeper serve --stdio`` serves it through its gateway; the official MCP client lists the
tools once every upstream tool is attached, then (with ``--tool-search``) searches once and
lists again. What is counted is the ``tools`` array of the ``tools/list`` result as JSON — what
a client hands its model, give or take its provider's wrapping — in tokens of the
``o200k_base`` encoding: through ``tiktoken`` when it is installed and has its tables, else
``bpe-openai`` (the same tables, shipped in the package), else ``len(json) / 4`` (said so).

    python benchmarks/bench_tool_search.py [--tools 500]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve()
SERVICES = ["github", "gitlab", "jira", "linear", "slack", "teams", "gmail", "outlook",
            "calendar", "drive", "dropbox", "notion", "confluence", "salesforce", "hubspot",
            "zendesk", "intercom", "stripe", "shopify", "quickbooks", "xero", "asana", "trello",
            "monday", "airtable", "figma", "sentry", "datadog", "pagerduty", "grafana", "aws",
            "gcp", "azure", "kubernetes", "docker", "postgres", "snowflake", "bigquery",
            "mongodb", "redis", "twilio", "sendgrid", "mailchimp", "zoom", "box", "okta",
            "workday", "greenhouse", "docusign", "youtube"]
ACTIONS = [("list", "List the {s} items that match a filter, newest first."),
           ("get", "Get one {s} item by its id, with every field."),
           ("create", "Create a {s} item from a title and a body."),
           ("update", "Change the fields of a {s} item."),
           ("delete", "Delete a {s} item for good."),
           ("search", "Search {s} for items whose text matches a query."),
           ("comment", "Add a comment to a {s} item."),
           ("assign", "Assign a {s} item to a person."),
           ("export", "Export {s} items as CSV for a date range."),
           ("archive", "Archive a {s} item so it no longer shows in lists.")]
PARAMS = {"id": ("string", "The item's id, as the service shows it."),
          "query": ("string", "Words to match, in the service's search syntax."),
          "title": ("string", "A short title, one line."),
          "body": ("string", "The text, in Markdown."),
          "assignee": ("string", "The person's login or e-mail address."),
          "since": ("string", "The first day, as YYYY-MM-DD."),
          "limit": ("integer", "How many items at most (1 to 100).")}
QUERY = "create a github item from a title"
SHAPES = [["query", "limit"], ["id"], ["title", "body"], ["id", "title", "body"], ["id"],
          ["query", "limit", "since"], ["id", "body"], ["id", "assignee"],
          ["since", "limit"], ["id"]]


def _declarations(count: int) -> list[dict[str, Any]]:
    tools = []
    for n in range(count):
        service, (action, text) = SERVICES[n // 10 % 50], ACTIONS[n % 10]
        names = SHAPES[n % 10]
        tools.append({"name": f"{service}_{action}" + (f"_{n // 500}" if n >= 500 else ""),
                      "description": text.format(s=service.capitalize()),
                      "inputSchema": {"type": "object", "properties": {
                          p: {"type": PARAMS[p][0], "description": PARAMS[p][1]} for p in names},
                          "required": [p for p in names if p != "limit"]}})
    return tools


def upstream(count: int) -> None:
    """The upstream process: ``count`` tools over stdio, each answering ``done``."""
    import mcp_types as types
    from mcp.server.lowlevel.server import Server
    from mcp.server.stdio import stdio_server

    listed = types.ListToolsResult(tools=[types.Tool.model_validate(d)
                                          for d in _declarations(count)])

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return listed

    async def call_tool(_ctx: Any, _params: Any) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text="done")])

    server: Server[Any] = Server("saas", on_list_tools=list_tools, on_call_tool=call_tool)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


def counter() -> tuple[str, Callable[[str], int]]:
    """(the tokenizer's name, a function counting a text's tokens)."""
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("o200k_base")
        return "o200k_base (tiktoken)", lambda text: len(encoding.encode(text))
    except Exception:  # not installed, or its tables cannot be fetched
        pass
    try:
        import bpe_openai

        shipped = bpe_openai.get_encoding("o200k_base")
        return "o200k_base (bpe-openai)", lambda text: len(shipped.encode(text))
    except Exception:
        return "approximation: JSON characters / 4", lambda text: len(text) // 4


def _config(folder: Path, count: int) -> Path:
    config = folder / "toolkeeper.toml"
    config.write_text(
        "[mcp]\nenabled = true\n[[mcp.servers]]\nname = \"saas\"\nsandbox = false\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps([str(HERE), '--upstream', '--tools', str(count)])}\n"
        f"risk = \"safe\"\nmax_tools = {count}\nconnect_timeout_s = 60\n")
    return config


async def _listing(client: Any) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools += [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools]
        cursor = page.next_cursor
        if cursor is None:
            return tools


async def _served(folder: Path, count: int, search: bool) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    args = ["-m", "toolkeeper.cli", "serve", "--stdio", "--no-builtins", "--config",
            str(_config(folder, count)), "--state-dir", str(folder / f"state-{search}")]
    params = StdioServerParameters(command=sys.executable,
                                   args=[*args, *(["--tool-search"] if search else [])])
    seen: dict[str, Any] = {}
    with (folder / "serve.log").open("a") as errlog, anyio.fail_after(180):
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            if not search:
                while len(tools := await _listing(client)) < count:
                    await anyio.sleep(0.2)
                return {"list": tools}
            seen["list"] = await _listing(client)
            while True:  # the upstream's tools are attached in the background
                found = await client.call_tool("tool_search", {"query": QUERY})
                if found.structured_content and found.structured_content["tools"]:
                    break
                await anyio.sleep(0.2)
            seen["search"] = found.structured_content
            seen["after"] = await _listing(client)
    return seen


def _tokens(count_tokens: Callable[[str], int], value: object) -> tuple[int, int]:
    text = json.dumps(value, separators=(",", ":"))
    return count_tokens(text), len(text)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=500)
    parser.add_argument("--upstream", action="store_true")
    args = parser.parse_args()
    if args.upstream:
        upstream(args.tools)
        return
    name, count_tokens = counter()
    with tempfile.TemporaryDirectory() as folder:
        full = anyio.run(_served, Path(folder), args.tools, False)
        searched = anyio.run(_served, Path(folder), args.tools, True)
    rows = [("tools/list, every tool", full["list"]),
            ("tools/list with --tool-search", searched["list"]),
            ("tool_search's result (5 tools found)", searched["search"]),
            ("tools/list after that search", searched["after"])]
    print(f"{args.tools}-tool gateway; tokens: {name}")
    print(f"{'what':<40} {'tools':>6} {'tokens':>8} {'bytes':>8}")
    for label, value in rows:
        tokens, size = _tokens(count_tokens, value)
        listed = len(value) if isinstance(value, list) else len(value["tools"])
        print(f"{label:<40} {listed:>6} {tokens:>8,} {size:>8,}")
    print(f"found for {QUERY!r}:",
          ", ".join(str(t["name"]) for t in searched["search"]["tools"]))


if __name__ == "__main__":
    main()
