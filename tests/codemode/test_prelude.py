"""The prelude reaches the sandbox's interpreter compiled by the host: the interpreter starts
with a short boot that reads it from the bridge, and compiles its source only when the host's
bytecode is not its own."""

from __future__ import annotations

import json
import marshal
import os
import socket
import subprocess
from typing import Any

import pytest

from toolkeeper import ToolInvoker, tool
from toolkeeper.codemode import ToolChainTool
from toolkeeper.codemode.prelude import BOOT, PRELUDE
from toolkeeper.codemode.runner import PYTHON

pytestmark = pytest.mark.anyio


@tool
def double(n: int) -> int:
    """Twice ``n``."""
    return 2 * n


async def test_a_sandbox_runs_the_prelude_the_host_compiled_without_compiling_it() -> None:
    run = await ToolChainTool(ToolInvoker([double])).run_chain(
        "import sys\n"
        "result = [len(sys.orig_argv[-1]), sys._getframe(1).f_code.co_filename,"
        " double(n=21).structured]")
    assert run.status == "ok", run.output_text
    assert isinstance(run.value, list)
    program, runs_in, answer = run.value
    # the command line holds the boot, not the prelude's source, and the script is run by
    # the prelude's code as the host compiled it
    assert isinstance(program, int) and program < 1000 < len(PRELUDE)
    assert runs_in == "<prelude>" and answer == {"result": 42}


def _frame(value: Any) -> bytes:
    body = marshal.dumps(value, 4)
    return len(body).to_bytes(4, "big") + body


def _read_frame(sock: socket.socket) -> dict[str, object]:
    data = b""
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
        chunk = sock.recv(65536)
        assert chunk, f"the interpreter closed the bridge; it sent {data!r}"
        data += chunk
    found: dict[str, object] = json.loads(data[4:])
    return found


def test_a_prelude_compiled_for_another_interpreter_is_compiled_from_its_source() -> None:
    host, child = socket.socketpair()
    with host, child:
        host.settimeout(30)
        # bytecode the interpreter cannot read, under a tag that is not its own: it must not
        # try it, and run the source instead
        host.sendall(_frame(("cpython-0", b"not bytecode", PRELUDE)))
        host.sendall(_frame({"type": "start", "secret": "s" * 32, "code": "result = 6 * 7",
                             "workspace": None, "tools": []}))
        process = subprocess.Popen(
            [PYTHON, "-I", "-S", "-c", BOOT], pass_fds=(child.fileno(),),
            env={"TOOLKEEPER_BRIDGE_FD": str(child.fileno()), "PATH": os.defpath},
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            done = _read_frame(host)
        finally:
            process.kill()
            _, stderr = process.communicate(timeout=30)
    assert done.get("type") == "done" and done.get("value") == 42, stderr.decode()


async def test_a_script_starts_without_the_os_module_and_without_the_bridge_in_its_env() -> None:
    run = await ToolChainTool(ToolInvoker([double])).run_chain(
        "import sys\n"
        "loaded = 'os' in sys.modules\n"
        "import os, subprocess\n"
        "child = subprocess.run(['/usr/bin/env'], capture_output=True, text=True).stdout\n"
        "result = [loaded, sorted(k for k in os.environ if 'BRIDGE' in k), 'BRIDGE' in child,"
        " double(n=4).structured]")
    assert run.status == "ok", run.output_text
    # ``os`` is the script's to import (about 1 ms of every cold start otherwise); the
    # bridge's fd left both the script's environment and what a program it starts inherits
    assert run.value == [False, [], False, {"result": 8}]


async def test_a_scripts_error_names_the_script_and_its_line() -> None:
    run = await ToolChainTool(ToolInvoker([double])).run_chain(
        "def twice(n):\n    return double(n=n).structured['result']\n"
        "first = twice(1)\nraise ValueError('boom at %d' % first)\n")
    assert run.status != "ok"
    assert 'File "<script>", line 4' in run.output_text, run.output_text
    assert "ValueError: boom at 2" in run.output_text
    assert "<string>" not in run.output_text
