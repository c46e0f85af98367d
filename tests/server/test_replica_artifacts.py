"""Two ``toolkeeper serve`` replicas on one real PostgreSQL store, no session affinity, their
artifacts in PostgreSQL (the default there) or in a bucket of a local S3-compatible server
(``--artifacts s3://…``): a large result one offloads is read (``resources/read`` of its link,
with the official MCP client) and passed on (``{"$artifact": ref}``) through the other; no
other client reads it on either; once its TTL has passed it is gone on both, and from the
shared store."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import psycopg
import pytest
from mcp.shared.exceptions import MCPError

from ..blocks import text_of
from ..processes import no_traceback
from .test_serve import CLIENT_TOKENS, _client, _start

pytestmark = pytest.mark.anyio
TOOLS = '''
from toolkeeper import tool


@tool
def report(lines: int) -> str:
    """A report of as many numbered lines as asked."""
    return "".join(f"line {i}: all is well\\n" for i in range(lines))


@tool
def count_lines(text: str) -> int:
    """Count the lines of a text."""
    return text.count("\\n")
'''
EXPECTED = "".join(f"line {i}: all is well\n" for i in range(2000))


def _replicas(tmp_path: Path, store: str, artifacts: str | None, ttl_s: float = 86400
              ) -> list[tuple[subprocess.Popen[str], str]]:
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "toolkeeper.toml").write_text(f"[server]\nartifact_ttl_s = {ttl_s}\n")
    where = ("--artifacts", artifacts) if artifacts else ()
    started = [_start(tmp_path, "--store", store, "--config", str(tmp_path / "toolkeeper.toml"),
                      *where, tools=str(tmp_path / "tools.py"), state=f"r{i}")
               for i in range(2)]
    for _, url in started:  # the first made the store's default client: one agent, 2 replicas
        CLIENT_TOKENS[url] = CLIENT_TOKENS[started[0][1]]
    return started


@pytest.fixture(params=["postgresql", "s3"])
def shared(request: pytest.FixtureRequest, postgres_url: str) -> tuple[str, str | None]:
    """(the PostgreSQL store, ``--artifacts``): none (in PostgreSQL, by default), a bucket."""
    if request.param == "s3":
        return postgres_url, str(request.getfixturevalue("s3_url"))
    return postgres_url, None


def _kept(store: str, artifacts: str | None) -> tuple[int, int]:
    """How many blobs and pins the shared store holds (read without toolkeeper)."""
    if artifacts is None:
        with psycopg.connect(store) as db:
            (rows,) = db.execute("SELECT count(*) FROM toolkeeper_artifacts").fetchone() or (0,)
            (pins,) = db.execute("SELECT count(*) FROM toolkeeper_artifact_pins").fetchone() \
                or (0,)
        return int(rows), int(pins)
    bucket, prefix = artifacts.removeprefix("s3://").split("/", 1)
    listed = httpx.get(f"{os.environ['AWS_ENDPOINT_URL']}/{bucket}", timeout=30,
                       params={"list-type": "2", "prefix": prefix + "/"}).text
    keys = re.findall(r"<Key>([^<]+)</Key>", listed)
    return (len([k for k in keys if "/blobs/" in k]), len([k for k in keys if "/pins/" in k]))


@pytest.fixture
def replicas(tmp_path: Path, shared: tuple[str, str | None]) -> Iterator[list[str]]:
    started = _replicas(tmp_path, *shared)
    yield [url for _, url in started]
    _stop(started)


def _stop(started: list[tuple[subprocess.Popen[str], str]]) -> None:
    for proc, _ in started:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        no_traceback(proc)


def _alice(tmp_path: Path, store: str) -> str:
    added = subprocess.run([sys.executable, "-m", "toolkeeper.cli", "tokens", "add", "alice",
                            "--store", store], capture_output=True, text=True, timeout=60,
                           check=False, cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    return added.stdout.strip()


def _link(result: Any) -> str:
    links = [b for b in result.content if b.type == "resource_link"]
    assert len(links) == 1, result.content
    return str(links[0].uri)


async def _refused(client: Any, uri: str) -> tuple[int, str]:
    with pytest.raises(MCPError) as refused:
        await client.read_resource(uri)
    return refused.value.error.code, refused.value.error.message.replace(uri, "URI")


async def test_a_result_offloaded_by_one_replica_is_read_through_the_other_by_its_client_only(
        replicas: list[str], tmp_path: Path, shared: tuple[str, str | None]) -> None:
    a, b = replicas
    alice = _alice(tmp_path, shared[0])
    async with _client(a) as on_a:
        uri = _link(await on_a.call_tool("report", {"lines": 2000}))
    ref = uri.removeprefix("toolkeeper://artifact/")
    async with _client(b) as on_b:
        read = (await on_b.read_resource(uri)).contents[0]
        listed = [str(r.uri) for r in (await on_b.list_resources()).resources]
        counted = await on_b.call_tool("count_lines", {"text": {"$artifact": ref}})
    never = "toolkeeper://artifact/sha256:" + "0" * 64
    theirs: dict[str, list[tuple[int, str]]] = {}
    for url in (a, b):
        async with _client(url, token=alice) as other:
            theirs[url] = [await _refused(other, uri), await _refused(other, never)]
            passed = await other.call_tool("count_lines", {"text": {"$artifact": ref}})
            assert passed.is_error and f"unknown artifact '{ref}'" in text_of(passed.content[0])
            assert uri not in [str(r.uri) for r in (await other.list_resources()).resources]
    assert read.text == EXPECTED  # type: ignore[union-attr]
    assert uri in listed
    assert not counted.is_error and text_of(counted.content[0]) == "2000"
    for refusals in theirs.values():  # another client's is as if it never existed
        assert refusals[0] == refusals[1] and refusals[0][0] == -32602
    assert _kept(*shared) == (1, 1)  # in the shared store, not in a replica's dir
    assert not any((tmp_path / f"r{i}" / "artifacts").exists() for i in range(2))


async def test_an_expired_artifact_is_gone_on_every_replica(
        tmp_path: Path, shared: tuple[str, str | None]) -> None:
    started = _replicas(tmp_path, *shared, ttl_s=10)
    (_, a), (_, b) = started
    seen: dict[str, object] = {}
    try:
        async with _client(a) as on_a, _client(b) as on_b:
            uri = _link(await on_a.call_tool("report", {"lines": 2000}))
            assert (await on_b.read_resource(uri)).contents[0].text == EXPECTED  # type: ignore[union-attr]
            with anyio.move_on_after(120):  # the keepers sweep every 5 s: released, removed
                while len([c for c in (on_a, on_b) if await _gone(c, uri)]) < 2 or _kept(
                        *shared) != (0, 0):
                    await anyio.sleep(0.2)
            seen = {"a": await _gone(on_a, uri), "b": await _gone(on_b, uri),
                    "listed": [str(r.uri) for r in (await on_b.list_resources()).resources]}
    finally:
        _stop(started)
    assert seen["a"] and seen["b"], seen
    assert uri not in seen["listed"]  # type: ignore[operator]
    assert _kept(*shared) == (0, 0)  # no blob, no pin left in the shared store


async def _gone(client: Any, uri: str) -> bool:
    try:
        await client.read_resource(uri)
    except MCPError as exc:
        return exc.error.code == -32602
    return False
