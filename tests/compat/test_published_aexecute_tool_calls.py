"""toolregistry's published tests (test_aexecute_tool_calls.py), run against toolkeeper's import of
its API.

Adapted from Oaklight/ToolRegistry tests/test_aexecute_tool_calls.py (version 0.19.0).
Copyright (c) 2025 Peng Ding, MIT License: see tests/compat/TOOLREGISTRY_LICENSE.
Changes: the import of ``toolregistry`` became ``toolkeeper.compat.toolregistry`` (imports
sorted, unused ones removed); ``@pytest.mark.asyncio`` dropped (async tests run on anyio
here); left out, each for a reason:

- ``TestBatchBackendResolution``: toolregistry's backend resolution (_resolve_backend) is its own
  internals.
- ``test_concurrency_unsafe_runs_sequentially``: a timed assertion; held by
  test_toolregistry_import.py with events instead.
- ``test_async_tools_overlap``: a timed assertion; held by test_toolregistry_import.py with events
  instead.
"""

import asyncio
import threading
import time

import pytest

from toolkeeper.compat.toolregistry import Tool, ToolRegistry
from toolkeeper.compat.toolregistry.llm.tool_calls import ErrorResult, ResultList, ToolCallResult
from toolkeeper.compat.toolregistry.tool import ToolMetadata


def _tc(cid: str, name: str, args: str):
    return {
        "id": cid,
        "type": "function",
        "function": {"name": name, "arguments": args},
    }


@pytest.fixture
def registry():
    reg = ToolRegistry()

    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    def mul(a: int, b: int) -> int:
        """Multiply."""
        return a * b

    async def aslow(n: int) -> int:
        """Async slow echo."""
        await asyncio.sleep(0.2)
        return n

    reg.register(add)
    reg.register(mul)
    reg.register(aslow)
    return reg


class TestAexecuteToolCalls:
    async def test_basic_batch(self, registry):
        tcs = [
            _tc("c1", "add", '{"a": 2, "b": 3}'),
            _tc("c2", "mul", '{"a": 4, "b": 5}'),
        ]
        r = await registry.aexecute_tool_calls(tcs)
        assert isinstance(r, ResultList)
        assert r["c1"].result == "5"
        assert r["c2"].result == "20"
    async def test_ordering_preserved(self, registry):
        tcs = [
            _tc("c1", "add", '{"a": 1, "b": 1}'),
            _tc("c2", "mul", '{"a": 2, "b": 3}'),
            _tc("c3", "add", '{"a": 5, "b": 5}'),
        ]
        r = await registry.aexecute_tool_calls(tcs)
        assert [x.id for x in r] == ["c1", "c2", "c3"]
    async def test_tool_error_is_error_result(self, registry):
        def boom(x: int) -> int:
            raise ValueError("broken")

        registry.register(boom)
        tcs = [
            _tc("c1", "add", '{"a": 1, "b": 2}'),
            _tc("c2", "boom", '{"x": 1}'),
        ]
        r = await registry.aexecute_tool_calls(tcs)
        assert isinstance(r["c1"], ToolCallResult)
        assert isinstance(r["c2"], ErrorResult)
        assert "broken" in r["c2"].message
    async def test_disabled_tool_is_error_result(self, registry):
        registry.disable("mul", reason="maint")
        tcs = [
            _tc("c1", "add", '{"a": 1, "b": 2}'),
            _tc("c2", "mul", '{"a": 2, "b": 3}'),
        ]
        r = await registry.aexecute_tool_calls(tcs)
        assert isinstance(r["c1"], ToolCallResult)
        assert isinstance(r["c2"], ErrorResult)





class TestInlineTimeoutInBatch:
    """Per-tool timeout is honored for inline tools in both batch paths."""

    @staticmethod
    def _registry_with_slow_inline_tool():
        reg = ToolRegistry()

        async def slow_remote(n: int) -> int:
            """Simulates an MCP/OpenAPI call that hangs."""
            await asyncio.sleep(5)
            return n

        reg.register(
            Tool.from_function(
                slow_remote,
                metadata=ToolMetadata(natural_backend="inline", timeout=0.2),
            )
        )
        return reg

    def test_sync_batch_inline_tool_times_out(self):
        """execute_tool_calls honors timeout for inline tools.

        InlineExecutionHandle.result() cannot enforce a deadline, so the
        registry drives such handles through AsyncRuntime instead.
        """
        reg = self._registry_with_slow_inline_tool()
        tcs = [_tc("c1", "slow_remote", '{"n": 1}')]

        start = time.perf_counter()
        r = reg.execute_tool_calls(tcs)
        elapsed = time.perf_counter() - start

        assert isinstance(r["c1"], ErrorResult)
        assert "timed out" in r["c1"].message
        assert elapsed < 2.0
    async def test_async_batch_inline_tool_times_out(self):
        reg = self._registry_with_slow_inline_tool()
        tcs = [_tc("c1", "slow_remote", '{"n": 1}')]

        start = time.perf_counter()
        r = await reg.aexecute_tool_calls(tcs)
        elapsed = time.perf_counter() - start

        assert isinstance(r["c1"], ErrorResult)
        assert "timed out" in r["c1"].message
        assert elapsed < 2.0

    def test_inline_tool_without_timeout_unaffected(self):
        """No timeout set — the plain sync path is used, no loop hop."""
        reg = ToolRegistry()
        seen: dict[str, int] = {}

        def plain(x: int) -> int:
            """Inline tool with no timeout."""
            seen["thread"] = threading.get_ident()
            return x * 2

        reg.register(
            Tool.from_function(plain, metadata=ToolMetadata(natural_backend="inline"))
        )

        result = reg.invoke("plain", {"x": 21})
        assert result.result == "42"
        # Sync path promotes inline to thread — runs in pool thread.
        assert seen["thread"] != threading.get_ident()
