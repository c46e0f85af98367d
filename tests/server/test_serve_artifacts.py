"""``toolkeeper serve`` offloads large results to its artifact store: real server processes, an
upstream written with the MCP SDK alone, the official MCP client with two clients' tokens.

- A result above ``max_inline_result_bytes`` (a local tool's or an upstream's) reaches the client
  as a preview and a ``resource_link`` to ``toolkeeper://artifact/sha256:…``; reading it gives
  the whole result to the client that made the call, and to no other (refused as an unknown
  URI is).
- An offloaded result is offloaded in every part of the answer: its ``structuredContent`` is
  the same preview (``{"result": …}``) where the tool's output schema takes it, so a 1 MB result
  is a few KiB on the wire; a closed schema keeps its object whole (it must conform).
- The store lives under the state dir; blobs older than ``[server] artifact_ttl_s`` are removed
  as serve starts; ``[server] artifacts = false`` turns the store off (results inline)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from toolkeeper import FileBlobStore

from .test_serve import CLIENT_TOKENS, _client, _start, _started, _tokens
from .test_serve_gateway import _until_listed

pytestmark = pytest.mark.anyio
UPSTREAM = str(Path(__file__).resolve().parents[1] / "gateway" / "upstream_server.py")
TOOLS = '''
from pydantic import BaseModel

from toolkeeper import tool


@tool
def report(lines: int) -> str:
    """A report of as many numbered lines as asked."""
    return "".join(f"line {i}: all is well\\n" for i in range(lines))


@tool
def megabyte() -> str:
    """A megabyte of text."""
    return "".join(f"{i:09d}\\n" for i in range(100_000)) + "x" * 48_576


@tool
def labels(n: int) -> dict[str, str]:
    """As many labels as asked, by key (an open object)."""
    return {f"key{i}": "label " * 10 for i in range(n)}


class Inventory(BaseModel):
    items: list[str]


@tool
def inventory(n: int) -> Inventory:
    """As many items as asked (a closed object: its fields are required)."""
    return Inventory(items=[f"item {i}" for i in range(n)])
'''


def _config(tmp_path: Path, server: str = "") -> Path:
    (tmp_path / "tools.json").write_text(json.dumps([{"name": "big"}]))
    config = tmp_path / "toolkeeper.toml"
    config.write_text(
        f"{'[server]' if server else ''}\n{server}\n[mcp]\nenabled = true\n[[mcp.servers]]\nname = \"up\"\n"
        "sandbox = false\n"  # a test server of ours, with the test's own folder
        f"command = {json.dumps(sys.executable)}\nargs = {json.dumps([UPSTREAM, str(tmp_path)])}\n"
        "connect_timeout_s = 30\nrisk = \"safe\"\n")
    return config


def _serve(tmp_path: Path, server: str = "") -> tuple[Any, str]:
    tools = tmp_path / "reports.py"
    tools.write_text(TOOLS)
    return _start(tmp_path, "--config", str(_config(tmp_path, server)), tools=str(tools))


def _link(result: Any) -> Any:
    links = [b for b in result.content if b.type == "resource_link"]
    assert len(links) == 1, result.content
    return links[0]


async def _refusal(client: Any, uri: str) -> tuple[int, str]:
    with pytest.raises(MCPError) as refused:
        await client.read_resource(uri)
    return refused.value.error.code, refused.value.error.message.replace(uri, "URI")


async def test_a_large_result_is_a_preview_and_a_link_only_its_client_can_read(
        tmp_path: Path) -> None:
    alice = _tokens(tmp_path, "add", "alice").stdout.strip()
    proc, url = _serve(tmp_path)
    try:
        async with _client(url) as client:
            small = await client.call_tool("report", {"lines": 3})
            large = await client.call_tool("report", {"lines": 2000})
            link = _link(large)
            full = (await client.read_resource(link.uri)).contents[0]
            await _until_listed(client, "up-big")
            relayed = await client.call_tool("up-big", {"size": 300_000})
            relayed_link = _link(relayed)
            relayed_full = (await client.read_resource(relayed_link.uri)).contents[0]
            mine = {str(r.uri): r for r in (await client.list_resources()).resources}
        async with _client(url, token=alice) as other:
            theirs = await _refusal(other, link.uri)
            unknown = await _refusal(other, "toolkeeper://artifact/sha256:" + "0" * 64)
            listed = [str(r.uri) for r in (await other.list_resources()).resources]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    expected = "".join(f"line {i}: all is well\n" for i in range(2000))
    assert [b.type for b in small.content] == ["text"]
    assert small.content[0].text.startswith("line 0: all is well")  # type: ignore[union-attr]
    preview = large.content[0].text  # type: ignore[union-attr]
    assert len(preview) < 4096 and "artifact sha256:" in preview
    assert link.uri.startswith("toolkeeper://artifact/sha256:")
    assert link.mime_type == "text/plain" and link.size == len(expected.encode())
    assert full.text == expected  # type: ignore[union-attr]
    assert (tmp_path / "state" / "artifacts").is_dir()
    assert len(relayed.content[0].text) < 4096  # type: ignore[union-attr]
    assert relayed_link.size == 300_000 and relayed_full.text == "x" * 300_000  # type: ignore[union-attr]
    assert mine[link.uri].size == link.size and mine[link.uri].mime_type == "text/plain"
    assert mine[link.uri].name == "report result" and relayed_link.uri in mine
    assert theirs == unknown and theirs[0] == -32602  # 2026-07-28: another client's is as if not there
    assert link.uri not in listed


async def test_an_offloaded_result_is_offloaded_in_every_part_of_the_answer(
        tmp_path: Path) -> None:
    proc, url = _serve(tmp_path)
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "megabyte", "arguments": {}}})
        raw = httpx.post(f"{url}/mcp", content=body, timeout=60, headers={
            "Authorization": f"Bearer {CLIENT_TOKENS[url]}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream"})
        async with _client(url) as client:  # it checks each result against the tool's schema
            large = await client.call_tool("megabyte", {})
            whole = (await client.read_resource(_link(large).uri)).contents[0]
            opened = await client.call_tool("labels", {"n": 200})
            closed = await client.call_tool("inventory", {"n": 600})
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert len(raw.content) < 12_000, len(raw.content)  # not 1 MB (twice, with the text)
    preview = large.content[0].text  # type: ignore[union-attr]
    assert not large.is_error and "artifact sha256:" in preview
    assert large.structured_content == {"result": preview}
    assert len(whole.text) == 1_048_576  # type: ignore[union-attr]
    assert opened.structured_content == {"result": opened.content[0].text}  # type: ignore[union-attr]
    assert len(opened.content[0].text) < 4096  # type: ignore[union-attr]
    # a closed schema would refuse the preview: the object stays whole, as MCP requires
    assert closed.structured_content is not None and len(closed.structured_content["items"]) == 600
    assert len(closed.content[0].text) < 4096  # type: ignore[union-attr]


async def test_old_artifacts_are_removed_at_start_and_the_store_can_be_turned_off(
        tmp_path: Path) -> None:
    store = FileBlobStore(tmp_path / "state" / "artifacts")
    old = store.put(b"from last week", "text/plain")
    kept = store.put(b"from a minute ago", "text/plain")
    week_ago = time.time() - 7 * 86400
    for meta in (tmp_path / "state" / "artifacts").glob("??/*.json"):
        if old.removeprefix("sha256:").endswith(meta.stem):
            os.utime(meta, (week_ago, week_ago))
    proc, url = _serve(tmp_path, "artifact_ttl_s = 86400\nartifacts = false\n")
    try:
        async with _client(url) as client:
            large = await client.call_tool("report", {"lines": 2000})
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert [b.type for b in large.content] == ["text"]  # no store: inline, as before
    assert large.content[0].text.endswith("line 1999: all is well\n")  # type: ignore[union-attr]
    assert store.stat(kept) is not None and store.stat(old) is not None  # off: not touched

    proc, url = _serve(tmp_path, "artifact_ttl_s = 86400\n")
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=20)
    assert store.stat(old) is None and store.stat(kept) is not None


def test_the_server_pages_store_settings_load_as_written(tmp_path: Path) -> None:
    from toolkeeper.config import load_config

    page = (Path(__file__).resolve().parents[2] / "docs" / "server.md").read_text()
    section = page.split("## Large results", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```toml\n(.*?)```", section, flags=re.S)
    (tmp_path / "toolkeeper.toml").write_text(block)
    server = load_config(tmp_path / "toolkeeper.toml").server
    assert server.artifacts and server.artifact_ttl_s == 86400
    assert server.artifact_dir == Path("/var/lib/toolkeeper/artifacts")


def test_a_store_inside_the_workspace_is_refused_in_one_line(tmp_path: Path) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    refused = subprocess.run(
        [sys.executable, "-m", "toolkeeper.cli", "serve", "--port", "0", "--workspace",
         str(workspace), "--state-dir", str(tmp_path / "state"), "--artifacts",
         str(workspace / "results")],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "TOOLKEEPER_TOKEN": "test-operator-token-0123456789"})
    assert refused.returncode == 2, refused.stdout
    (line,) = refused.stderr.strip().splitlines()
    assert f"the artifact dir {workspace / 'results'} and the workspace" in line
    assert "--artifacts DIR outside" in line and not (workspace / "results").exists()


OWNED = '''
from toolkeeper import tool


@tool
def report(lines: int) -> str:
    """A report of as many numbered lines as asked."""
    return "".join(f"line {i}: all is well\\n" for i in range(lines))


@tool
def count_lines(text: str) -> int:
    """Count the lines of a text."""
    return text.count("\\n")


@tool
def repeat(times: int) -> str:
    """Say ok as many times as asked."""
    return "ok" * times
'''


def _serve_with_builtins(tmp_path: Path) -> tuple[subprocess.Popen[str], str]:
    """serve with the built-in tools (file_read among them) over a workspace of its own, the
    tools above, and code mode for ``count_lines``."""
    tools = tmp_path / "owned_tools.py"
    tools.write_text(OWNED)
    (tmp_path / "ws").mkdir()
    config = tmp_path / "toolkeeper.toml"
    config.write_text('[codemode]\nenabled = true\ntools = ["count_lines"]\n')
    env = {**os.environ, "TOOLKEEPER_TOKEN": "test-operator-token-0123456789"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "serve", str(tools), "--port", "0",
         "--workspace", str(tmp_path / "ws"), "--state-dir", str(tmp_path / "state"),
         "--config", str(config), "--approval-wait", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    return proc, _started(proc, tmp_path / "state")


def _said(result: Any) -> str:
    return "\n".join(getattr(b, "text", "") for b in result.content)


async def test_an_artifact_ref_resolves_only_for_the_client_it_was_made_for(
        tmp_path: Path) -> None:
    alice = _tokens(tmp_path, "add", "alice").stdout.strip()
    never = "sha256:" + "0" * 64
    proc, url = _serve_with_builtins(tmp_path)
    try:
        async with _client(url) as owner:
            ref = _link(await owner.call_tool("report", {"lines": 2000})).uri.removeprefix(
                "toolkeeper://artifact/")
            counted = await owner.call_tool("count_lines", {"text": {"$artifact": ref}})
            scripted = await owner.call_tool("tool_chain", {"code": (
                f"c = count_lines(text={{'$artifact': {ref!r}}})\nresult = c.text")})
            misfit = await owner.call_tool("repeat", {"times": {"$artifact": ref}})
        answers: dict[str, list[str]] = {}
        async with _client(url, token=alice) as other:
            for tried in (ref, never):
                answers[tried] = [_said(await other.call_tool(name, arguments)) for name,
                                  arguments in (("count_lines", {"text": {"$artifact": tried}}),
                                                ("file_read", {"path": {"$artifact": tried}}),
                                                ("repeat", {"times": {"$artifact": tried}}))]
                answers[tried].append(_said(await other.call_tool("tool_chain", {"code": (
                    f"c = count_lines(text={{'$artifact': {tried!r}}})\n"
                    "print(c.status, c.text)")})))
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    theirs = [text.replace(ref, "REF") for text in answers[ref]]
    for text in theirs:
        assert "unknown artifact 'REF'" in text and "all is well" not in text, text
    assert theirs == [text.replace(never, "REF") for text in answers[never]]  # as if none
    assert _said(counted) == "2000"  # its own client, and that client's script, read it
    assert scripted.structured_content is not None
    assert scripted.structured_content["value"] == "2000", _said(scripted)
    assert misfit.is_error and f"refers to artifact {ref}, whose content does not fit" in \
        _said(misfit) and "all is well" not in _said(misfit)  # not even to its owner
