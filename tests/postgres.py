"""A real PostgreSQL server for the tests: ``initdb`` in a temporary directory as an unprivileged
user (the server refuses to run as root), on a free loopback port, removed afterwards. Each test
gets its own database."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def _binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.fail("PostgreSQL is not installed: make test installs Debian's postgresql "
                    "(as root), or: apt-get install postgresql")
    return Path(found[-1]).parent


def _user() -> tuple[int, int]:
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
            return entry.pw_uid, entry.pw_gid
        except KeyError:
            continue
    return os.getuid(), os.getgid()


def _as(uid: int, gid: int) -> object:
    if os.geteuid() != 0:
        return None

    def drop() -> None:
        os.setgid(gid)
        os.setuid(uid)
    return drop


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The server's base URL (``postgresql://postgres@127.0.0.1:PORT``)."""
    bindir = _binaries()
    uid, gid = _user()
    root = Path(tempfile.mkdtemp(prefix="toolkeeper-pg-"))
    os.chown(root, uid, gid)
    data = root / "data"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    subprocess.run([str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
                    "--no-sync", "-E", "UTF8"], check=True, capture_output=True,
                   preexec_fn=_as(uid, gid), cwd=root)  # type: ignore[arg-type]
    server = subprocess.Popen(
        [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(root),
         "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=300",
         "-c", "synchronous_commit=off"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_as(uid, gid),  # type: ignore[arg-type]
        cwd=root)
    base = f"postgresql://postgres@127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    import psycopg

    while True:
        try:
            with psycopg.connect(f"{base}/postgres", connect_timeout=2):
                break
        except psycopg.OperationalError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                pytest.fail("the test PostgreSQL server did not start")
            time.sleep(0.1)
    yield base
    server.send_signal(signal.SIGINT)  # fast shutdown: pools may still hold connections
    server.wait(timeout=30)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """A fresh, empty database on the test server."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(f"{postgres_server}/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{postgres_server}/{name}"
