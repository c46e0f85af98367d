"""Artifacts: stores, large results offloaded and pinned, media as files, inbound refs resolved."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import ImageBlock, ToolResult, tool
from toolkeeper.artifacts import FileBlobStore, MemoryBlobStore, UnknownArtifactError
from toolkeeper.core.context import Caller
from toolkeeper.invoke import ChainPolicy, InvocationResult, ToolInvoker
from toolkeeper.invoke.session import InvokerSession
from toolkeeper.toolbox import Toolbox

from ..invoke.helpers import call

pytestmark = pytest.mark.anyio
PNG = b"\x89PNG\r\n\x1a\n" + b"\x01" * 32


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> object:
    return MemoryBlobStore() if request.param == "memory" else FileBlobStore(tmp_path / "blobs")


def test_store_put_resolve_pin_and_gc(store: object) -> None:
    ref = store.put(b"hello", "text/plain", name="greeting")  # type: ignore[attr-defined]
    assert ref.startswith("sha256:") and store.put(b"hello", "text/plain") == ref  # type: ignore[attr-defined]
    blob = store.resolve(ref)  # type: ignore[attr-defined]
    assert (blob.data, blob.media_type, blob.size) == (b"hello", "text/plain", 5)
    with pytest.raises(UnknownArtifactError):
        store.resolve("sha256:" + "0" * 64)  # type: ignore[attr-defined]
    with pytest.raises(UnknownArtifactError):
        store.resolve("../../etc/passwd")  # type: ignore[attr-defined]
    store.pin(ref, "session-a")  # type: ignore[attr-defined]
    other = store.put(b"bye", "text/plain")  # type: ignore[attr-defined]
    if isinstance(store, FileBlobStore):
        for meta in store.root.glob("??/*.json"):
            os.utime(meta, (time.time() - 100, time.time() - 100))
    else:
        store._blobs = {k: v.__class__(**{**v.__dict__, "created_at": 0}) for k, v in store._blobs.items()}  # type: ignore[attr-defined]
    assert store.gc(ttl_s=10) == 1  # type: ignore[attr-defined]
    assert store.stat(other) is None and store.stat(ref) is not None  # type: ignore[attr-defined]
    store.unpin(ref, "session-a")  # type: ignore[attr-defined]
    assert store.gc(ttl_s=10) == 1  # type: ignore[attr-defined]


def _age(store: object, seconds: float) -> None:
    """Every blob of ``store`` made ``seconds`` old."""
    then = time.time() - seconds
    if isinstance(store, FileBlobStore):
        for meta in store.root.glob("??/*.json"):
            os.utime(meta, (then, then))
    else:
        store._blobs = {k: v.__class__(**{**v.__dict__, "created_at": then})  # type: ignore[attr-defined]
                        for k, v in store._blobs.items()}  # type: ignore[attr-defined]


def test_a_blob_stored_again_starts_its_ttl_again(store: object) -> None:
    ref = store.put(b"the same report", "text/plain")  # type: ignore[attr-defined]
    gone = store.put(b"stored once", "text/plain")  # type: ignore[attr-defined]
    _age(store, 100)
    assert store.put(b"the same report", "text/plain") == ref  # type: ignore[attr-defined]
    assert store.gc(ttl_s=10) == 1  # type: ignore[attr-defined]
    assert store.stat(ref) is not None and store.stat(gone) is None  # type: ignore[attr-defined]


def test_pins_a_killed_process_left_are_dropped_once_older_than_asked(tmp_path: Path) -> None:
    store = FileBlobStore(tmp_path / "blobs")
    left = store.put(b"pinned by a process that was killed", "text/plain")
    live = store.put(b"pinned by a live session", "text/plain")
    store.pin(left, "client-a#gone")
    store.pin(live, "client-b#here")
    _age(store, 7200)
    for pin in store.root.glob(f"pins/{left.removeprefix('sha256:')}/*"):
        os.utime(pin, (time.time() - 7200, time.time() - 7200))
    assert store.gc(ttl_s=60) == 0  # both pinned
    assert store.drop_pins(older_than_s=3600) == 1
    assert store.gc(ttl_s=60) == 1
    assert store.stat(left) is None and store.stat(live) is not None


async def test_a_session_releases_what_it_pinned_longer_ago_than_asked(store: object) -> None:
    inv = invoker(store)
    async with inv.open_session() as session:
        first = await inv.invoke(call("report", rows=500), session=session)
        again = await inv.invoke(call("report", rows=500), session=session)
        assert session.artifacts == (first.artifact_ref,)  # pinned once
        assert session.release(older_than_s=3600) == 0
        assert session.artifacts == (again.artifact_ref,)
        assert session.release(older_than_s=0) == 1
        assert list(session.artifacts) == []
        _age(store, 100)
        assert store.gc(ttl_s=10) == 1  # type: ignore[attr-defined]  # no longer pinned
        assert store.stat(first.artifact_ref) is None  # type: ignore[attr-defined]


@tool
def report(rows: int) -> str:
    """A long report."""
    return "\n".join(f"row {i}: " + "data " * 10 for i in range(rows))


@tool
def count_lines(text: str) -> int:
    """Count the lines of a text."""
    return len(text.splitlines())


@tool
def screenshot() -> ToolResult:
    """Take a screenshot."""
    return ToolResult(content=[{"type": "text", "text": "here it is"},
                               ImageBlock.from_bytes(PNG, "image/png")])


def invoker(store: object) -> ToolInvoker:
    return ToolInvoker(Toolbox([report, count_lines, screenshot]), artifact_store=store)  # type: ignore[arg-type]


async def test_large_results_are_offloaded_pinned_and_unpinned_on_exit(store: object) -> None:
    inv = invoker(store)
    session = inv.open_session()
    with pytest.raises(RuntimeError):
        async with session:
            result = await inv.invoke(call("report", rows=500), session=session)
            raise RuntimeError("the body failed")
    assert result.artifact_ref is not None and len(result.text) < 4096
    assert f'{{"$artifact": "{result.artifact_ref}"}}' in result.text
    assert store.resolve(result.artifact_ref).data.decode().count("\n") == 499  # type: ignore[attr-defined]
    assert session.pinned_refs == ()


async def test_a_large_result_holding_a_lone_surrogate_is_offloaded_with_it_escaped(
        store: object) -> None:
    # its UTF-8 failed after the tool had run: "the tool call could not be completed"
    @tool
    def noisy(n: int) -> str:
        """Text no UTF-8 holds as it is."""
        return "a\ud800b" * n

    inv = ToolInvoker(Toolbox([noisy]), artifact_store=store)  # type: ignore[arg-type]
    result = await inv.invoke(call("noisy", n=3000), session=inv.open_session())
    assert result.status == "ok" and result.artifact_ref is not None, result.text
    data = store.resolve(result.artifact_ref).data  # type: ignore[attr-defined]
    assert data.decode("utf-8") == "a\\ud800b" * 3000


async def test_inbound_artifact_refs_are_resolved_before_execution(store: object) -> None:
    inv = invoker(store)
    async with inv.open_session() as session:
        big = await inv.invoke(call("report", rows=300), session=session)
        counted = await inv.invoke(call("count_lines", text={"$artifact": big.artifact_ref}),
                                   session=session)
        unknown = await inv.invoke(call("count_lines", text={"$artifact": "sha256:" + "a" * 64}),
                                   session=session)
    assert counted.text == "300"
    assert unknown.status == "error" and "unknown artifact" in unknown.text


async def test_a_ref_resolves_only_for_its_owner_and_its_runs_and_while_they_hold_it(
        store: object) -> None:
    inv = invoker(store)
    alice, bob = Caller(client="alice", channel="mcp"), Caller(client="bob", channel="mcp")
    never = {"$artifact": "sha256:" + "0" * 64}

    async def count(session: InvokerSession, text: object) -> InvocationResult:
        return await inv.invoke(call("count_lines", text=text), session=session)

    async with inv.open_session(session_id="client-alice", caller=alice) as mine:
        big = await inv.invoke(call("report", rows=300), session=mine)
        ref = {"$artifact": big.artifact_ref}
        async with inv.open_session(session_id="client-alice", chain=True,
                                    caller=alice.through("code_mode")) as run:
            in_run = await count(run, ref)  # a script of the same client
        async with inv.open_session(session_id="client-bob", caller=bob) as theirs:
            refused, unknown = await count(theirs, ref), await count(theirs, never)
        async with inv.open_session(session_id="client-alice", caller=bob) as spoofed:
            by_name = await count(spoofed, ref)  # the session's id alone is not the owner
        own = await count(mine, ref)
    async with inv.open_session(session_id="client-alice", caller=alice) as later:
        released = await count(later, ref)  # no session of its owner holds it any more
    assert own.text == in_run.text == "300"
    for result in (refused, by_name, released):
        assert (result.status, result.error_code) == ("error", "invalid_arguments")
        assert result.text.replace(str(big.artifact_ref), "REF") == unknown.text.replace(
            str(never["$artifact"]), "REF")  # told as a ref that never existed
        assert "row 1:" not in result.text
    assert store.stat(str(big.artifact_ref)) is not None  # type: ignore[attr-defined]


async def test_a_refused_ref_argument_names_its_artifact_and_never_quotes_it(
        store: object) -> None:
    @tool
    def repeat(times: int, sep: str = " ") -> str:
        """Say ok as many times as asked."""
        return sep.join(["ok"] * times)

    inv = ToolInvoker(Toolbox([report, repeat]), artifact_store=store)  # type: ignore[arg-type]
    async with inv.open_session() as session:
        big = await inv.invoke(call("report", rows=300), session=session)
        refused = await inv.invoke(call("repeat", times={"$artifact": big.artifact_ref},
                                        sep=7), session=session)
    assert refused.error_code == "invalid_arguments" and "row " not in refused.text
    assert (f"argument 'times' refers to artifact {big.artifact_ref}, whose content does not "
            "fit it (it takes an integer)") in refused.text
    assert "argument 'sep'" in refused.text  # the other arguments' problems as ever


async def test_media_blocks_become_files_at_workspace_paths(store: object) -> None:
    inv = invoker(store)
    async with inv.open_session() as session:
        result = await inv.invoke(call("screenshot"), session=session)
        (file,) = result.files
        assert (file.path, file.media_type, file.size) == ("media/screenshot_0.png", "image/png",
                                                          len(PNG))
        assert store.resolve(file.artifact_ref).data == PNG  # type: ignore[attr-defined]


async def test_without_a_store_long_text_is_truncated_head_and_tail() -> None:
    inv = ToolInvoker(Toolbox([report]), policy=ChainPolicy(max_result_size=200))
    async with inv.open_session() as session:
        result = await inv.invoke(call("report", rows=100), session=session)
    assert "characters truncated" in result.text
    assert result.text.startswith("row 0:") and result.text.rstrip().endswith("data")
    assert result.artifact_ref is None


async def test_truncation_reaches_what_is_rendered_for_the_model() -> None:
    """The shaped text is what every way out sends: to_tool_result, rendered provider
    messages and Toolbox.execute_tool_calls."""
    from toolkeeper import export

    box = Toolbox([report])
    inv = ToolInvoker(box, policy=ChainPolicy(max_result_size=200))
    async with inv.open_session() as session:
        result = await inv.invoke(call("report", rows=100), session=session)
    shaped = result.to_tool_result()
    assert shaped.text == result.text and "characters truncated" in shaped.text
    exported = export([report], "anthropic")
    message: Any
    (message,) = exported.render([(call("report", rows=100), shaped)])
    (block,) = message["content"]
    assert "characters truncated" in str(block["content"]) and len(str(block["content"])) < 400
    batch: Any
    (batch,) = box.execute_tool_calls([call("report", rows=100)], invoker=inv)
    assert batch.text == result.text


@tool
def tabled(rows: int) -> ToolResult:
    """A long report with its rows as structured content (and no declared output schema)."""
    lines = [f"row {i}: " + "data " * 10 for i in range(rows)]
    return ToolResult(content=[{"type": "text", "text": "\n".join(lines)}],
                      structured_content={"rows": lines})


async def test_a_result_cut_short_is_cut_short_in_its_structured_content_too(
        store: object) -> None:
    inv = ToolInvoker(Toolbox([report, tabled]), artifact_store=store)  # type: ignore[arg-type]
    cut = ToolInvoker(Toolbox([report]), policy=ChainPolicy(max_result_size=300))
    async with inv.open_session() as session, cut.open_session() as other:
        text = await inv.invoke(call("report", rows=500), session=session)
        table = await inv.invoke(call("tabled", rows=500), session=session)
        truncated = await cut.invoke(call("report", rows=500), session=other)
    assert text.artifact_ref is not None and len(text.text) < 4096
    assert text.result.structured_content == {"result": text.text}  # its schema takes it
    assert table.artifact_ref is not None and table.result.structured_content is None
    assert "characters truncated" in truncated.text
    assert truncated.result.structured_content == {"result": truncated.text}


async def test_a_code_mode_scripts_call_keeps_its_structured_content_whole() -> None:
    """What a script gets goes into its sandbox, not to the model: the data it works on."""
    inv = ToolInvoker(Toolbox([tabled]), artifact_store=MemoryBlobStore())
    async with inv.open_session(chain=True) as run:
        result = await inv.invoke(call("tabled", rows=500), session=run)
    assert result.artifact_ref is not None and len(result.text) < 4096
    assert result.result.structured_content is not None
    assert len(result.result.structured_content["rows"]) == 500  # type: ignore[arg-type]
