"""Code mode's cold runs take a spare launch gate, prepared at ``warm_up`` and after each take."""

from __future__ import annotations

import anyio
import pytest

from toolkeeper import ToolInvoker, tool
from toolkeeper.codemode import ToolChainTool
from toolkeeper.sandbox import BubblewrapSandbox, cgroups
from toolkeeper.sandbox.bubblewrap import probe_bwrap
from toolkeeper.sandbox.limits import exec_helpers
from toolkeeper.sandbox.spare import spares

pytestmark = [pytest.mark.usefixtures("fresh_spares"), pytest.mark.skipif(
    not (cgroups.probe().available and probe_bwrap().available and exec_helpers() is not None),
    reason="no per-call cgroups, bubblewrap or launch helpers here")]


@tool
async def lookup(key: int) -> int:
    """Look a key up."""
    return key * 2


def test_warm_up_prepares_the_spare_the_first_cold_run_takes_and_the_next_gets_another() -> None:
    chain = ToolChainTool(ToolInvoker([lookup]), sandbox=BubblewrapSandbox())
    try:
        chain.warm_up()
        assert spares.wait_ready(30), f"no spare was prepared ({spares.failures} failures)"
        served = spares.served
        first = anyio.run(chain.run_chain, "result = lookup(key=21).text")
        assert first.status == "ok" and first.value == "42", first.output_text
        assert spares.served == served + 1
        assert spares.wait_ready(30)  # prepared again after the take
        second = anyio.run(chain.run_chain, "result = lookup(key=1).text")
        assert second.status == "ok" and second.value == "2"
        assert spares.served == served + 2
    finally:
        chain.close()
