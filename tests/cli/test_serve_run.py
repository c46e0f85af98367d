"""How ``toolkeeper serve`` runs once built: its startup objects are out of the garbage
collector's sight before the first request, so a full collection under load walks only what
requests made (full collections of the whole heap were the tail of the calls' latency), and
the youngest generation is collected every few thousand calls' allocations, not every other
call's."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from ..blocks import text_of
from ..server.test_serve import _client, _start

pytestmark = pytest.mark.anyio

TOOLS = '''
import gc

from toolkeeper import tool


@tool
def heap() -> str:
    """The objects frozen out of the collector's sight, and those it still tracks."""
    return f"{gc.get_freeze_count()} {len(gc.get_objects())}"


@tool
def young() -> int:
    """Allocations between collections of the youngest generation."""
    return gc.get_threshold()[0]
'''


async def test_the_startup_heap_is_frozen_before_serve_answers(tmp_path: Path) -> None:
    tools = tmp_path / "heap_tools.py"
    tools.write_text(TOOLS)
    proc, url = _start(tmp_path, tools=str(tools))
    try:
        async with _client(url) as client:
            frozen, tracked = map(int, text_of((await client.call_tool("heap", {})).content[0])
                                  .split())
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) in (0, 130)
    # everything imported and built (tens of thousands of objects) is frozen; what the
    # collector still walks is what the requests so far made
    assert frozen > 10_000 and tracked < frozen, (frozen, tracked)


async def test_the_youngest_generation_is_collected_every_ten_thousand_allocations(
        tmp_path: Path) -> None:
    tools = tmp_path / "heap_tools.py"
    tools.write_text(TOOLS)
    proc, url = _start(tmp_path, tools=str(tools))
    try:
        async with _client(url) as client:
            threshold = int(text_of((await client.call_tool("young", {})).content[0]))
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) in (0, 130)
    assert threshold == 10_000  # Python's default, 700, collected every other call
