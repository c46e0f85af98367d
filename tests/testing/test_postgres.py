"""The throwaway PostgreSQL server works for whoever runs it, not only for root."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys

from toolkeeper.sandbox.base import UNPRIVILEGED_UID

SCRIPT = """
import psycopg
from toolkeeper.testing.postgres import create_database, postgres_server
with postgres_server() as base:
    url = create_database(base)
    with psycopg.connect(url) as conn:
        print("answer", conn.execute("select 6 * 7").fetchone()[0])
"""


def test_a_user_who_is_not_root_gets_a_server_even_where_a_postgres_account_exists() -> None:
    pwd.getpwnam("postgres")  # Debian's postgresql package makes it: the case that failed
    command = [sys.executable, "-c", SCRIPT]
    if os.geteuid() == 0:
        command = ["setpriv", f"--reuid={UNPRIVILEGED_UID}", f"--regid={UNPRIVILEGED_UID}",
                   "--clear-groups", *command]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd="/",
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert "answer 42" in run.stdout


def test_the_server_never_runs_as_root() -> None:
    from toolkeeper.testing.postgres import postgres_server

    with postgres_server() as base:
        port = base.rsplit(":", 1)[1]
        owners = subprocess.run(["ps", "-o", "user=", "-C", "postgres"], capture_output=True,
                                text=True, timeout=60).stdout.split()
    assert port and owners and "root" not in owners
