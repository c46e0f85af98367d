"""A throwaway PostgreSQL server for tests and benchmarks: ``initdb`` in a temporary directory
on a free loopback port, trust auth, no fsync; stopped and removed on exit. It runs as the user
who starts it — or, started as root (the server refuses to run as root), as ``postgres`` (else
``nobody``). Needs Debian's ``postgresql`` package (its
binaries under ``/usr/lib/postgresql/*/bin``) and ``toolkeeper[postgres]``."""

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StoreError

__all__ = ["create_database", "postgres_server"]


def _binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise StoreError("PostgreSQL is not installed: apt-get install postgresql (make test "
                         "does it as root)")
    return Path(found[-1]).parent


def _user() -> tuple[int, int]:
    """Who runs the server: the caller, unless root, who hands it to an unprivileged account."""
    if os.geteuid() != 0:
        return os.getuid(), os.getgid()
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
            return entry.pw_uid, entry.pw_gid
        except KeyError:
            continue
    return os.getuid(), os.getgid()


def _as(uid: int, gid: int) -> Callable[[], None] | None:
    if os.geteuid() != 0:
        return None

    def drop() -> None:
        os.setgid(gid)
        os.setuid(uid)
    return drop


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a server; yields its base URL (``postgresql://postgres@127.0.0.1:PORT``)."""
    import psycopg

    bindir = _binaries()
    uid, gid = _user()
    root = Path(tempfile.mkdtemp(prefix="toolkeeper-pg-"))
    if os.geteuid() == 0:
        os.chown(root, uid, gid)
    data = root / "data"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    subprocess.run([str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
                    "--no-sync", "-E", "UTF8"], check=True, capture_output=True,
                   preexec_fn=_as(uid, gid), cwd=root)
    server = subprocess.Popen(
        [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(root),
         "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=300",
         "-c", "synchronous_commit=off"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_as(uid, gid),
        cwd=root)
    base = f"postgresql://postgres@127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with psycopg.connect(f"{base}/postgres", connect_timeout=2):
                    break
            except psycopg.OperationalError as exc:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise StoreError("the throwaway PostgreSQL server did not start") from exc
                time.sleep(0.1)
        yield base
    finally:
        server.send_signal(signal.SIGINT)  # fast shutdown: pools may still hold connections
        server.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


def create_database(base: str) -> str:
    """A new empty database on the server at ``base``; its URL."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{base}/{name}"
