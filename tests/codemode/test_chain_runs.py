"""Code mode, the rest of a run's life with the real sandbox: media as files, a workspace the
policy gives, the Landlock fallback, approval that times out inside a script, memory floods,
nothing left running, and the warm pool."""

from __future__ import annotations

import os
import struct
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from toolkeeper import ToolInvoker, ToolRisk, tool
from toolkeeper.approval import CallbackApprovalHandler
from toolkeeper.artifacts import MemoryBlobStore
from toolkeeper.codemode import ToolChainTool
from toolkeeper.invoke import ChainPolicy
from toolkeeper.sandbox import LandlockSandbox

from ..processes import running

pytestmark = pytest.mark.anyio


def _png(width: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(2))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, 2, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


@tool
def screenshot(width: int) -> bytes:
    """A picture of the screen."""
    return _png(width)


@tool
def word_count(text: str) -> int:
    """Count words."""
    return len(text.split())


async def _gone(marker: str, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while running(marker):
        if time.monotonic() > deadline:
            return False
        await anyio.sleep(0.1)
    return True


async def test_media_become_files_under_media_the_script_can_read() -> None:
    invoker = ToolInvoker([screenshot], artifact_store=MemoryBlobStore())
    run = await ToolChainTool(invoker).run_chain(
        "a = screenshot(width=3)\nb = screenshot(width=5)\n"
        "result = [[f['path'] for f in a.files + b.files],\n"
        "          [open(f['path'], 'rb').read()[:8].hex() for f in a.files + b.files],\n"
        "          [f['artifact_ref'] for f in b.files]]")
    assert run.status == "ok", run.output_text
    paths, heads, refs = cast(Any, run.value)
    assert paths == ["media/screenshot_0.png", "media/screenshot_1.png"]
    assert heads == [b"\x89PNG\r\n\x1a\n".hex()] * 2
    assert [f.path for f in run.files] == paths
    assert [f.media_type for f in run.files] == ["image/png"] * 2
    assert run.files[1].artifact_ref == refs[0]
    assert invoker.artifact_store.resolve(refs[0]).data == _png(5)  # type: ignore[union-attr]


@pytest.fixture
def project() -> Iterator[Path]:
    """A directory the sandbox's unprivileged user can reach (pytest's tmp_path is 0700)."""
    with tempfile.TemporaryDirectory() as top:
        os.chmod(top, 0o755)
        path = Path(top) / "project"
        path.mkdir()
        yield path


async def test_the_workspace_is_read_only_unless_the_policy_makes_it_writable(
        project: Path) -> None:
    (project / "notes.txt").write_text("alpha beta gamma")
    os.chmod(project, 0o777)
    os.chmod(project / "notes.txt", 0o666)
    script = """
import os
text = open(os.path.join(WORKSPACE, 'notes.txt')).read()
try:
    open(os.path.join(WORKSPACE, 'new.txt'), 'w').write('x')
    wrote = True
except OSError as exc:
    wrote = type(exc).__name__
result = [word_count(text=text).structured, wrote]
"""
    invoker = ToolInvoker([word_count])
    assert f"workspace at {project} (read-only" in ToolChainTool(invoker, workspace=project
                                                                 ).description
    read_only = await ToolChainTool(invoker, workspace=project).run_chain(script)
    assert read_only.value == [{"result": 3}, "OSError"], read_only.output_text
    assert not (project / "new.txt").exists()
    writable = await ToolChainTool(invoker, workspace=project, writable=True).run_chain(script)
    assert writable.value == [{"result": 3}, True], writable.output_text
    assert (project / "new.txt").read_text() == "x"
    nothing = await ToolChainTool(invoker).run_chain(
        f"import os\nresult = [WORKSPACE, os.path.exists({str(project)!r})]")
    assert nothing.value == [None, False]


async def test_the_landlock_fallback_runs_scripts_through_the_same_bridge(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    run = await ToolChainTool(ToolInvoker([word_count]), sandbox=LandlockSandbox()).run_chain(
        f"try:\n    leaked = open({str(secret)!r}).read()\nexcept OSError as exc:\n"
        "    leaked = type(exc).__name__\n"
        "result = [word_count(text='one two').structured, leaked]")
    assert run.status == "ok", run.output_text
    assert run.value == [{"result": 2}, "PermissionError"]
    assert [r.tool for r in run.call_trace] == ["word_count"]


async def test_a_slow_human_inside_a_script_yields_expired_before_the_call_limit() -> None:
    sent: list[str] = []

    @tool(risk=ToolRisk.CRITICAL)
    def wire_money(amount: int) -> str:
        """Send money (needs approval)."""
        sent.append(str(amount))
        return "sent"

    async def never_answers(request: object) -> bool:
        await anyio.sleep(3600)
        return True

    invoker = ToolInvoker([wire_money, word_count],
                          approval_handler=CallbackApprovalHandler(never_answers))
    chain = ToolChainTool(invoker, policy=ChainPolicy(call_timeout_s=3, approval_timeout_s=0.5))
    started = time.monotonic()
    run = await chain.run_chain(
        "r = wire_money(amount=100)\nafter = word_count(text='still running')\n"
        "result = [r.status, r.error_code, r.text, after.ok]")
    assert run.status == "ok", run.output_text
    status, code, text, after = cast(Any, run.value)
    assert (status, code, after) == ("error", "expired", True) and sent == []
    assert "nobody decided within 0.5 s; it did not run" in text
    assert time.monotonic() - started < 3  # the wait, not the call limit
    assert [(r.tool, r.status) for r in run.call_trace] == [("wire_money", "expired"),
                                                            ("word_count", "ok")]


async def test_a_memory_flood_is_stopped_and_the_calls_before_it_are_kept() -> None:
    run = await ToolChainTool(ToolInvoker([word_count])).run_chain(
        "word_count(text='a b')\nblocks = []\nwhile True:\n    blocks.append(bytearray(64 << 20))")
    assert run.status in ("error", "killed")
    assert [r.tool for r in run.call_trace] == ["word_count"]


async def test_no_process_of_a_run_outlives_it_whatever_ends_it() -> None:
    spawn = ("import subprocess\nsubprocess.Popen(['/bin/sleep', '{m}'], start_new_session=True)"
             "\n{tail}")
    done = await ToolChainTool(ToolInvoker([word_count])).run_chain(
        spawn.format(m="987.125", tail="result = 'spawned'"))
    assert done.value == "spawned" and await _gone("987.125")
    timed = ToolChainTool(ToolInvoker([word_count]), policy=ChainPolicy(
        total_timeout_s=2, call_timeout_s=1, approval_timeout_s=0.5))
    late = await timed.run_chain(spawn.format(m="987.25", tail="import time\ntime.sleep(60)"))
    assert late.status == "timeout" and await _gone("987.25")
    chain = ToolChainTool(ToolInvoker([word_count]))
    async with anyio.create_task_group() as group:
        group.start_soon(chain.run_chain,
                         spawn.format(m="987.5", tail="import time\ntime.sleep(60)"))
        await anyio.sleep(1.5)
        assert running("987.5")
        group.cancel_scope.cancel()  # the caller gives up: the sandbox goes with it
    assert await _gone("987.5")


async def test_the_warm_pool_serves_each_run_a_fresh_sandbox_and_closes_cleanly() -> None:
    chain = ToolChainTool(ToolInvoker([word_count]), warm=2,
                          policy=ChainPolicy(total_timeout_s=2, call_timeout_s=1,
                                             approval_timeout_s=0.5))
    chain.warm_up()
    await anyio.sleep(2.5)  # longer than a run may take: the limit counts from the run's start
    first = await chain.run_chain(
        "open('/tmp/left', 'w').write('x')\nopen('left', 'w').write('x')\n"
        "result = word_count(text='warm start').structured")
    second = await chain.run_chain(
        "import os\nresult = [os.path.exists('/tmp/left'), os.path.exists('left')]")
    assert first.status == "ok" and first.value == {"result": 2}, first.output_text
    assert second.value == [False, False]  # nothing of one run reaches the next
    slow = await chain.run_chain("import time\ntime.sleep(30)")
    assert slow.status == "timeout" and slow.duration_ms < 10_000
    ready = list(chain._pool._ready)
    assert len(ready) == 2 and all(item.alive for item in ready)
    chain.close()
    for item in ready:
        assert await item.wait(10)
    assert not chain._pool._ready


async def test_what_the_model_reads_lists_calls_and_files_and_a_huge_script_is_refused() -> None:
    from toolkeeper.core.call import ToolCall

    invoker = ToolInvoker([screenshot, word_count], artifact_store=MemoryBlobStore())
    outer = ToolInvoker([ToolChainTool(invoker)])
    async with outer.open_session() as session:
        shown = await outer.invoke(ToolCall(id="c1", name="tool_chain", arguments={
            "code": "screenshot(width=2)\nword_count(text=3)\nresult = 'done'"}), session=session)
        huge = await outer.invoke(ToolCall(id="c2", name="tool_chain", arguments={
            "code": "x = 1\n" * 100_000}), session=session)
    assert shown.ok, shown.text
    assert "call 1: screenshot → ok" in shown.text
    assert "call 2: word_count → error (invalid_arguments)" in shown.text
    assert "file: media/screenshot_0.png (image/png" in shown.text
    assert not huge.ok and "at most 262144 bytes" in huge.text


async def test_a_dropped_chain_does_not_leave_its_warm_sandboxes_waiting() -> None:
    import gc

    chain = ToolChainTool(ToolInvoker([word_count]), warm=1)
    chain.warm_up()
    (waiting,) = list(chain._pool._ready)
    assert waiting.alive
    del chain
    gc.collect()
    assert await waiting.wait(10)


async def test_a_warm_sandbox_is_renewed_before_it_has_waited_too_long() -> None:
    """A pre-started sandbox may wait ``idle_s`` (its own deadline counts from its start): the
    pool replaces it before then, so a run after a quiet spell still takes a started one."""
    chain = ToolChainTool(ToolInvoker([word_count]), warm=1, idle_s=2.0)
    try:
        chain.warm_up()
        (first,) = list(chain._pool._ready)
        assert await first.wait(20), "the waiting sandbox was never renewed"
        deadline = time.monotonic() + 20
        while time.monotonic() - first.started < 2.5 and time.monotonic() < deadline:
            await anyio.sleep(0.05)  # past the first's idle_s: without renewal, none is ready
        taken = chain._pool.take()
        assert taken is not None and taken is not first and taken.alive
        taken.discard()
    finally:
        chain.close()


async def test_values_cross_the_bridge_intact_both_ways() -> None:
    seen: list[object] = []

    @tool
    def echo(value: object) -> dict:  # type: ignore[type-arg]
        """Echo a value."""
        seen.append(value)
        return {"value": value}

    @tool
    def length(text: str) -> int:
        """Length of a text."""
        seen.append(text)
        return len(text)

    script = r"""
tricky = {"quote\"s": 'back\\slash', "ctl": "\x00\x07\n\t\x1f", "uni": "naïve ☃ 𝄞",
          "nest": [1, [2.5, [True, None, False]]], "tuple": (1, 2),
          "big": 2**80, "neg": -0.0, "inf": float("inf"), 3: "int key", "obj": object}
r = echo(value=tricky)
lone = length(text="\udc80!")
expected = {**tricky, "tuple": [1, 2], "3": tricky[3], "obj": repr(object)}
del expected[3]
result = [r.status, r.structured["value"] == expected, lone.structured]
"""
    run = await ToolChainTool(ToolInvoker([echo, length])).run_chain(script)
    assert run.status == "ok", run.output_text
    assert run.value == ["ok", True, {"result": 2}]
    value, lone = seen
    assert value["quote\"s"] == "back\\slash" and value["ctl"] == "\x00\x07\n\t\x1f"  # type: ignore[index]
    assert value["uni"] == "naïve ☃ 𝄞" and lone == "\udc80!"  # type: ignore[index]
    assert value["big"] == 2**80 and value["inf"] == float("inf")  # type: ignore[index]


async def test_large_catalogs_are_found_with_search_tools_and_names_never_shadow() -> None:
    from toolkeeper.tools.tool import Tool

    def make(name: str, description: str) -> Tool:
        def run(**arguments: object) -> str:
            return f"{name} ran with {sorted(arguments.items())}"
        return Tool(name=name, description=description, callable=run, parameters={
            "type": "object", "properties": {"service": {"type": "string"}}})

    tools = [make(f"gauge_{i}", f"Read gauge number {i}.") for i in range(59)]
    tools += [make("p99_latency", "The 99th percentile request latency of a service."),
              make("print", "Print a document on paper."), make("a-b", "First."),
              make("a_b", "Second.")]
    chain = ToolChainTool(ToolInvoker(tools))
    assert "def gauge_0(" in chain.description and "def p99_latency(" not in chain.description
    assert "and 23 more tools: search_tools(query)" in chain.description
    run = await chain.run_chain(
        "found = search_tools('request latency percentile', limit=3)\n"
        "print('the builtin print still prints')\n"
        "result = [any(s.startswith('def p99_latency(') for s in found),\n"
        "          p99_latency(service='api').text, print_tool(service='x').text,\n"
        "          a_b(service='1').text, a_b_2(service='2').text]")
    assert run.status == "ok", run.output_text
    assert run.output_text == "the builtin print still prints\n"
    assert run.value == [True, "p99_latency ran with [('service', 'api')]",
                         "print ran with [('service', 'x')]", "a-b ran with [('service', '1')]",
                         "a_b ran with [('service', '2')]"]


async def test_what_a_script_sends_cannot_name_calls_or_flood_the_model() -> None:
    @tool
    def table(rows: int) -> dict:  # type: ignore[type-arg]
        """A big table."""
        return {"rows": [{"i": i, "pad": "x" * 100} for i in range(rows)]}

    invoker = ToolInvoker([word_count, table], artifact_store=MemoryBlobStore())
    # the prelude's own functions, dug out of its closures, with a 100 KB call id
    forged = """
cells = {c.cell_contents.__name__: c.cell_contents for c in call_tool.__closure__
         if callable(c.cell_contents) and hasattr(c.cell_contents, '__name__')}
send, answer = cells['send'], cells['answer']
send('"type":"call","id":"' + 'x' * 100_000 + '","tool":"word_count","arguments":{"text":"a b"}')
forged = answer()['status']
big = table(rows=20_000)
result = [forged, big.structured, 'stays on the host' in big.text, big.artifact_ref is not None,
          'y' * 100_000]
"""
    run = await ToolChainTool(invoker).run_chain(forged)
    assert run.status == "ok", run.output_text
    assert cast(Any, run.value)[:4] == ["ok", None, True, True], str(run.value)[:300]
    assert [r.call_id for r in run.call_trace] == ["chain-1", "chain-2"]
    from toolkeeper.core.call import ToolCall

    outer = ToolInvoker([ToolChainTool(invoker)])
    async with outer.open_session() as session:
        shown = await outer.invoke(ToolCall(id="c", name="tool_chain", arguments={
            "code": "result = 'y' * 100_000"}), session=session)
    assert len(shown.text) < 6000 and "more characters" in shown.text
    assert shown.structured == {"status": "ok", "value": None}


async def test_waiting_runs_hold_no_worker_thread_their_calls_need(tmp_path: Path) -> None:
    from toolkeeper.approval import PersistedApprovalHandler, SqliteApprovalStore

    @tool(risk=ToolRisk.CRITICAL)
    def deploy(version: str) -> str:
        """Deploy a version (needs approval)."""
        return f"deployed {version}"

    limiter = anyio.to_thread.current_default_thread_limiter()
    saved, limiter.total_tokens = limiter.total_tokens, 1  # the approval store's calls need it
    try:
        store = SqliteApprovalStore(tmp_path / "approvals.db")
        invoker = ToolInvoker([deploy], approval_handler=PersistedApprovalHandler(store, wait_s=0))
        # A run that held the one worker thread while it waited would leave the others
        # without it until their time limit: they would end 'error', not 'pending'. The
        # limit is generous so that a busy machine's slow sandbox start is not mistaken
        # for that.
        chain = ToolChainTool(invoker, policy=ChainPolicy(total_timeout_s=120))
        runs: list[object] = []

        async def one(i: int) -> None:
            runs.append(await chain.run_chain(f"result = deploy(version='v{i}').status"))

        async with anyio.create_task_group() as group:
            for i in range(3):
                group.start_soon(one, i)
    finally:
        limiter.total_tokens = saved
    seen = [(r.status, r.value, r.output_text) for r in cast(list[Any], runs)]
    assert [s[:2] for s in seen] == [("ok", "pending")] * 3, seen
    assert len(store.requests()) == 3


async def test_a_script_whose_sandbox_ends_before_its_last_frames_are_read_keeps_its_result(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A busy host may hear that the sandbox ended before it has read the frames the script
    sent just before ending ('done' with the result): those are read, not dropped."""
    from toolkeeper.codemode.bridge import Bridge

    receive = Bridge._receive

    async def late(self: Bridge) -> dict[str, Any] | None:
        await anyio.sleep(0.5)  # the host, busy elsewhere, reads the socket late
        return await receive(self)

    monkeypatch.setattr(Bridge, "_receive", late)
    run = await ToolChainTool(ToolInvoker([word_count])).run_chain(
        "print('counted')\nresult = word_count(text='a b c').text")
    assert (run.status, run.value, run.output_text) == ("ok", "3", "counted\n"), run.output_text
    assert [c.tool for c in run.call_trace] == ["word_count"]


async def test_a_refused_call_from_a_script_is_in_the_audit_log(tmp_path: Path) -> None:
    from toolkeeper.invoke.audit import SqliteAuditLog

    audit = SqliteAuditLog(tmp_path / "audit.db")
    invoker = ToolInvoker([word_count, screenshot], audit=audit)
    run = await ToolChainTool(invoker, tools=["word_count"]).run_chain(
        "word_count(text='a')\ncall_tool('screenshot', {'width': 1})\nresult = 1")
    assert run.value == 1
    rows = sorted((e.tool, e.status, e.error_code) for e in audit.query(limit=10))
    assert rows == [("screenshot", "denied", "policy_violation"), ("word_count", "ok", None)]


async def test_a_script_of_a_caller_limited_to_some_tools_sees_and_calls_only_those() -> None:
    from toolkeeper.core.context import Caller

    invoker = ToolInvoker([screenshot, word_count])
    run = await ToolChainTool(invoker).run_chain(
        "found = [s for s in search_tools('screen picture count words', limit=10)]\n"
        "refused = call_tool('screenshot', {'width': 3})\n"
        "result = [found, 'screenshot' in globals(), refused.status, word_count(text='a b').ok]",
        caller=Caller(client="oauth:agent", channel="mcp", tools=("word_*",)))
    assert run.status == "ok", run.output_text
    found, stub, refused, counted = cast(Any, run.value)
    assert "screenshot" not in str(found) and not stub
    assert (refused, counted) == ("denied", True)


def test_an_interpreter_that_exits_with_a_sandbox_starting_leaves_nothing_behind(
        tmp_path: Path) -> None:
    """A script that warms a pool up and ends at once: its exit ends the sandbox being started
    and removes its cgroup. Left to the interpreter, the sandbox's thread died unfinished: the
    call's cgroup stayed, and a sandbox caught in the middle of its start waited forever."""
    import subprocess
    import sys

    from toolkeeper.sandbox import cgroups

    memory = cgroups.probe().memory
    assert memory is not None, cgroups.probe().detail
    script = tmp_path / "warm.py"
    script.write_text(
        "import os\n"
        "from toolkeeper import ToolInvoker, tool\n"
        "from toolkeeper.codemode import ToolChainTool\n\n\n"
        "@tool\ndef word(text: str) -> int:\n    \"\"\"Count.\"\"\"\n    return len(text)\n\n\n"
        "chain = ToolChainTool(ToolInvoker([word]), warm=1)\n"
        "chain.warm_up()\n"
        "print(os.getpid(), flush=True)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.strip())
    try:
        assert list(memory.glob(f"toolkeeper-{pid}-*")) == []
    finally:
        cgroups.sweep_stale(memory)  # what the code before left


async def test_what_a_script_writes_to_its_scratch_folder_is_bounded_and_never_reaches_the_host(
        ) -> None:
    # the scratch folder was a host folder under the system's temporary directory: a script
    # wrote 376 MB there (each file under the 16 MiB file limit), bounded by nothing
    script = """
import os
written, error = 0, None
chunk = b"x" * (1 << 20)
try:
    for n in range(40):
        with open(os.path.join(os.getcwd(), "f%d" % n), "wb") as out:
            for _ in range(15):
                out.write(chunk)
                written += len(chunk)
except OSError as exc:
    error = exc.strerror
result = [os.getcwd(), written >> 20, error]
"""
    tmp = tempfile.gettempdir()
    before = {p.name for p in Path(tmp).glob("toolkeeper-chain-*")}
    run = await ToolChainTool(ToolInvoker([word_count])).run_chain(script)
    assert run.status == "ok", run.output_text
    where, written_mib, error = cast(Any, run.value)
    assert where == "/workspace" and error == "No space left on device", run.value
    assert 200 <= written_mib <= 256, written_mib  # the scratch holds 256 MiB, not 600
    # nothing of it was on the host: the folders made for runs meanwhile stayed small
    assert all(sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) < 1 << 20
               for p in Path(tmp).glob("toolkeeper-chain-*") if p.name not in before)
