"""A real load balancer for the tests: Debian's HAProxy, round-robin over the replicas a test
started, each request balanced on its own (no stickiness, no affinity), every answer naming the
replica that gave it (``x-replica: r0``), and its stats socket saying how many requests each
replica holds open."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

__all__ = ["REPLICA_HEADER", "Balancer", "balancer"]

REPLICA_HEADER = "x-replica"

_CONFIG = """\
global
    maxconn 2000
    stats socket {stats} mode 600 level admin

defaults
    mode http
    timeout connect 5s
    timeout client 180s
    timeout server 180s
    retries 3
    option redispatch 1

frontend mcp
    bind 127.0.0.1:{port}
    default_backend replicas

backend replicas
    balance roundrobin
    http-response set-header {header} %s
{servers}
"""


class Balancer:
    """A running HAProxy: its ``url``, the replicas' names (``r0``, ``r1``, …) in the order of
    the URLs it was given, and what each holds open (``open_requests``)."""

    def __init__(self, proc: subprocess.Popen[str], url: str, stats: Path, names: list[str]):
        self.proc, self.url, self.stats, self.names = proc, url, stats, names

    def admin(self, command: str) -> str:
        """What HAProxy answers ``command`` on its stats socket (``show stat``, ``disable
        server replicas/r0``, ``shutdown sessions server replicas/r0``, …)."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(10)
            sock.connect(str(self.stats))
            sock.sendall(command.encode() + b"\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        return data.decode()

    def cut(self, name: str) -> None:
        """Replica ``name`` gets no new request, and every connection to it is closed (the
        clients' open streams break, as when a replica is drained or its network fails)."""
        self.admin(f"disable server replicas/{name}")
        self.admin(f"shutdown sessions server replicas/{name}")

    def open_requests(self) -> dict[str, int]:
        """Requests each replica is answering now (HAProxy's ``scur``)."""
        data = self.admin("show stat")
        rows = [line.split(",") for line in data.splitlines() if line and line[0] != "#"]
        return {row[1]: int(row[4]) for row in rows if row[0] == "replicas" and row[1] in self.names}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int, proc: subprocess.Popen[str], deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else ""
            pytest.fail(f"haproxy ended at its start ({proc.returncode}): {err}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)  # polled against a deadline: the port opens when haproxy is up
    proc.kill()
    pytest.fail(f"haproxy did not listen on port {port} within {deadline_s} s")


@contextmanager
def balancer(urls: Sequence[str], tmp_path: Path) -> Iterator[Balancer]:
    """HAProxy round-robin over ``urls`` (``http://127.0.0.1:PORT`` each), stopped after."""
    haproxy = shutil.which("haproxy", path="/usr/sbin:/usr/bin:/sbin:/bin")
    assert haproxy, "HAProxy is not installed: apt-get install haproxy (make test installs it)"
    names = [f"r{i}" for i in range(len(urls))]
    servers = "\n".join(f"    server {name} {urlsplit(url).netloc}"
                        for name, url in zip(names, urls, strict=True))
    port, stats = _free_port(), tmp_path / "haproxy.sock"
    config = tmp_path / "haproxy.cfg"
    config.write_text(_CONFIG.format(stats=stats, port=port, header=REPLICA_HEADER,
                                     servers=servers))
    proc = subprocess.Popen([haproxy, "-db", "-f", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        _listening(port, proc, 30)
        yield Balancer(proc, f"http://127.0.0.1:{port}", stats, names)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
