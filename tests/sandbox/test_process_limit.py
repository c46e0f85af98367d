"""A sandbox's process limit counts the sandbox's own processes — not every task of the uid it
shares with the server — and a sandbox that cannot start is an error naming why, never output.

The server here is an unprivileged user's process with many tasks of its own (threads of calls
waiting for approval, other sandboxes): the case where ``RLIMIT_NPROC`` set on the launcher
counted them all and every sandbox failed to start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SERVER_UID = 64_999
"""The server's user in these tests: one no other process uses, so its task count is its own."""

SERVER = """
import json, os, resource, subprocess, sys, time
from pathlib import Path
from toolkeeper.sandbox.base import Limits
from toolkeeper.sandbox.bubblewrap import run_confined
from toolkeeper.builtins.policy import SecurityPolicy
from toolkeeper.builtins.shell import shell_tool
from toolkeeper.sandbox import BubblewrapSandbox
from toolkeeper import AutoApprovalHandler, ToolCall, ToolInvoker
import asyncio

ws, case = Path(sys.argv[1]), sys.argv[2]
# The server's own tasks: more than any sandbox's limit.
others = [subprocess.Popen(["sleep", "60"]) for _ in range(48 if case == "busy-uid" else 0)]
try:
    if case == "busy-uid":
        limits = Limits(cpu_s=10, processes=32)
        few = run_confined(ws, ["/bin/sh", "-c", "sleep 0.1 & sleep 0.1 & wait; echo started"],
                           limits=limits, timeout_s=30)
        bomb = run_confined(ws, ["/bin/sh", "-c", "i=0; while [ $i -lt 100 ]; do sleep 3 & "
                                 "i=$((i+1)); done; echo all-100-started"],
                            limits=limits, timeout_s=30)
        print(json.dumps({"few": [few.exit_code, few.stdout, getattr(few, "start_error", "")],
                          "bomb": [bomb.exit_code, bomb.stdout, getattr(bomb, "start_error", "")]}))
    else:  # the host lets this user start no more processes: no sandbox can start
        tool = shell_tool(SecurityPolicy(workspace=ws), sandbox=BubblewrapSandbox())
        invoker = ToolInvoker([tool], approval_handler=AutoApprovalHandler())

        def tasks() -> int:  # every task (process or thread) of this uid
            count = 0
            for status in Path("/proc").glob("[0-9]*/task/[0-9]*/status"):
                try:
                    uid = status.read_text().split("Uid:", 1)[1].split()[0]
                except (OSError, IndexError):
                    continue
                count += uid == str(os.getuid())
            return count

        async def call(command):
            async with invoker.open_session() as session:
                return await invoker.invoke(ToolCall(id="c1", name="shell",
                                            arguments={"command": command}), session=session)

        async def both():
            warm = await call("echo warm")  # the worker thread the tool runs in exists now
            # a thread the warm call started may still be ending: count once the count holds
            # still (a thread that ends after it would leave room for the sandbox)
            seen, deadline = [tasks()], time.monotonic() + 10
            while time.monotonic() < deadline and (len(seen) < 3 or len(set(seen[-3:])) > 1):
                await asyncio.sleep(0.1)
                seen.append(tasks())
            limit = seen[-1] + 1  # room for the launcher, none for the sandbox it starts
            resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
            return warm, await call("echo hello")
        warm, result = asyncio.run(both())
        print(json.dumps({"warm": warm.result.text, "status": result.status,
                          "code": result.error_code, "text": result.result.text}))
finally:
    for proc in others:
        proc.kill()
"""


def _as_server(ws: Path, case: str) -> dict[str, Any]:
    command = [sys.executable, "-c", SERVER, str(ws), case]
    if os.geteuid() == 0:  # the server as an unprivileged user of its own, as it is deployed
        command = ["setpriv", f"--reuid={SERVER_UID}", f"--regid={SERVER_UID}",
                   "--clear-groups", *command]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd="/",
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp"})
    assert run.returncode == 0, run.stderr[-3000:]
    found: dict[str, object] = json.loads(run.stdout.strip().splitlines()[-1])
    return found


def test_a_sandbox_starts_while_its_uid_runs_more_tasks_than_its_limit(reachable: Path) -> None:
    ws = reachable / "ws"
    ws.mkdir()
    if os.geteuid() == 0:
        os.chown(ws, SERVER_UID, SERVER_UID)
    found = _as_server(ws, "busy-uid")
    assert found["few"] == [0, "started\n", ""]
    code, out, start_error = found["bomb"]
    assert start_error == ""  # it started; its own fork bomb hit its own limit
    assert "all-100-started" not in out
    assert code != 0


def test_a_sandbox_that_cannot_start_is_an_error_result_not_output(reachable: Path) -> None:
    ws = reachable / "ws"
    ws.mkdir()
    if os.geteuid() == 0:
        os.chown(ws, SERVER_UID, SERVER_UID)
    found = _as_server(ws, "host-limit")
    assert found["status"] == "error"
    assert found["code"] == "sandbox_unavailable"
    text = str(found["text"])
    # the launcher's own line: bwrap's, or the shell's that mounts the workspace's view first
    assert "the sandbox could not start (" in text and "did not run" in text
    assert "fork" in text.lower() or "bwrap: " in text
    assert "[exit code" not in text  # never shown as if the command had printed it
    assert found["warm"] == "warm\n\n[exit code 0]"  # the same tool ran before the host's limit
