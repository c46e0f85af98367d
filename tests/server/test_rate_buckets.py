"""The rate limit's buckets in the store: processes counting one client at once (here, each
with its own connection to a real SQLite file or PostgreSQL database, as two workers have)
admit one burst between them, never one each."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from toolkeeper.server.rate_buckets import SharedBuckets


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "toolkeeper.db")
    return str(request.getfixturevalue("postgres_url"))


def test_workers_counting_one_client_at_once_admit_one_burst_between_them(store: str) -> None:
    workers = [SharedBuckets(store, rate=0.001, burst=5) for _ in range(2)]
    admitted: list[bool] = []
    lock = threading.Lock()

    def count(buckets: SharedBuckets) -> None:
        for _ in range(10):
            verdict = buckets.admit("client 'agent'")
            with lock:
                admitted.append(verdict)

    threads = [threading.Thread(target=count, args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(admitted) == 20 and admitted.count(True) == 5
    assert workers[1].admit("client 'other'")  # another client has its own bucket


def test_a_bucket_refills_with_time_and_a_refilled_one_is_forgotten(store: str) -> None:
    # A billion a second, one at a time: the bucket is full again by the next statement.
    buckets = SharedBuckets(store, rate=1e9, burst=1)
    assert all(buckets.admit("client 'agent'") for _ in range(5))
    buckets.sweep()  # every bucket is full: all forgotten, which changes nothing
    assert buckets.db.query("SELECT COUNT(*) FROM rate_buckets") == [(0,)]
    assert buckets.admit("client 'agent'")
