"""What the serving benchmarks share: start ``toolkeeper serve`` (or another server) and wait
until it answers, stop it, find a free port. Imported by the ``bench_*.py`` scripts beside it."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["free_port", "start_serve", "stop", "until_listening"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_serve(tools: Path, state: Path, *, args: Sequence[str] = (), cpu: int | None = None,
                launcher: Sequence[str] = ("-m", "toolkeeper.cli"),
                env: dict[str, str] | None = None, timeout_s: float = 120
                ) -> tuple[subprocess.Popen[str], str, str]:
    """``toolkeeper serve TOOLS`` without built-ins, on a free port, rate limit off unless
    ``args`` say otherwise, its state in ``state/state`` and ``state`` its workspace (and
    working folder); pinned to ``cpu`` when given. Returns the process, its base URL (no
    ``/mcp``) and the client token it wrote. ``launcher``: how Python runs the command."""
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "TOOLKEEPER_TOKEN"}
    proc = subprocess.Popen(
        [*pin, sys.executable, *launcher, "serve", str(tools), "--no-builtins", "--port", "0",
         *(() if "--rate-limit" in args else ("--rate-limit", "0")), "--state-dir",
         str(state / "state"), "--workspace", str(state), *args],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=state)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    line = proc.stdout.readline() if ready else ""
    if not line.startswith("toolkeeper serving on "):
        proc.kill()
        raise SystemExit(f"toolkeeper serve did not start: {line!r}")
    return proc, line.split()[3], (state / "state" / "client-token").read_text().strip()


def until_listening(proc: subprocess.Popen[str], port: int, what: str,
                    timeout_s: float = 60) -> None:
    """Wait until something accepts connections on loopback ``port`` (``proc`` is killed and
    the benchmark ends when nothing does in time)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"{what} did not start")


def stop(proc: subprocess.Popen[str], timeout_s: float = 30) -> None:
    """Terminate ``proc``; kill it if it has not ended within ``timeout_s``."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
