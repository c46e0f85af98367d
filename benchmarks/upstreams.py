"""The upstream the gateway's benchmarks relay to: bench_mcp's bare SDK server (its ``add``)
over its own Streamable HTTP — stateless, JSON answers, on a free loopback port, in a process
of its own. Imported by ``bench_gateway.py`` and ``bench_relay.py``.

    python benchmarks/upstreams.py PORT_FILE    # serve; the port is written to PORT_FILE
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["serve_http", "start_http_upstream"]

HERE = Path(__file__).resolve()


def serve_http(port_file: str) -> None:
    """Serve the bare server until terminated, on a free loopback port written to
    ``port_file``."""
    import uvicorn
    from bench_mcp import bare_server

    app = bare_server().streamable_http_app(stateless_http=True, json_response=True)
    # made for TCP by name: asyncio sets TCP_NODELAY only on connections of such a socket,
    # and without it (uvicorn on asyncio's loop, no uvloop) every answer's second write
    # waited for the client's delayed ACK: 44 ms a call
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    Path(port_file).write_text(str(sock.getsockname()[1]))
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


def start_http_upstream(folder: Path, timeout_s: float = 60.0
                        ) -> tuple[subprocess.Popen[bytes], str]:
    """Start the upstream (its port file in ``folder``); the process and its ``/mcp`` URL.
    The benchmark ends naming what failed when it is not serving within ``timeout_s``."""
    port_file = folder / "upstream-port"
    proc = subprocess.Popen([sys.executable, str(HERE), str(port_file)])
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        port = port_file.read_text().strip() if port_file.exists() else ""
        if port:
            return proc, f"http://127.0.0.1:{port}/mcp"
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"the HTTP upstream did not start within {timeout_s:g} s "
                     f"(exit status {proc.poll()})")


if __name__ == "__main__":
    serve_http(sys.argv[1])
