"""The rate limit's buckets in the store: processes counting one client at once (here, each
with its own connection to a real SQLite file or PostgreSQL database, as two workers have)
admit one burst between them, never one each; a worker takes a batch of a client's tokens in
one store write and spends them in memory, and the tokens in its hand never let the client past
its limit."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import anyio
import pytest

from toolkeeper.approval.sqlite import Connection, number
from toolkeeper.server.rate_buckets import Leases, SharedBuckets, batch_for, shared_rate


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


def _count_writes(buckets: SharedBuckets) -> list[int]:
    """A counter of ``buckets``' store transactions (its writes), kept up to date."""
    writes = [0]
    opened = buckets.db.transaction

    def counted() -> AbstractContextManager[Connection]:
        writes[0] += 1
        return opened()

    buckets.db.transaction = counted  # type: ignore[method-assign]
    return writes


def _leases(store: str, *, rate: float, burst: int, workers: int) -> Iterator[Leases]:
    """``workers`` processes' hands on one store's buckets, each with its own connection."""
    batch = batch_for(burst, workers)
    for _ in range(workers):
        yield Leases(SharedBuckets(store, rate=rate, burst=burst, held=workers * (batch - 1)),
                     batch=batch)


async def test_a_worker_writes_the_store_once_per_batch_of_requests_not_once_per_request(
        tmp_path: Path) -> None:
    leases = shared_rate(str(tmp_path / "toolkeeper.db"), rate=1000, burst=2000, workers=2)
    writes = _count_writes(leases.buckets)
    admitted = [await leases.admit("client 'agent'") for _ in range(160)]
    assert all(admitted)
    assert leases.batch == 16 and writes[0] <= 10, writes  # 160 requests, batches of 16


async def test_requests_of_one_client_at_once_in_a_worker_wait_for_one_store_write(
        tmp_path: Path) -> None:
    leases = shared_rate(str(tmp_path / "toolkeeper.db"), rate=1000, burst=2000, workers=2)
    writes = _count_writes(leases.buckets)
    admitted: list[bool] = []

    async def ask() -> None:
        admitted.append(await leases.admit("client 'agent'"))

    async with anyio.create_task_group() as group:
        for _ in range(16):
            group.start_soon(ask)
    assert admitted == [True] * 16 and writes[0] == 1


def test_two_workers_flooding_one_client_never_admit_more_than_its_limit(store: str) -> None:
    rate, burst = 50.0, 100
    workers = list(_leases(store, rate=rate, burst=burst, workers=2))
    admitted = [0, 0]

    def flood(k: int) -> None:
        async def asks() -> None:
            for _ in range(150):
                verdict = await workers[k].admit("client 'agent'")
                admitted[k] += verdict

        async def main() -> None:
            async with anyio.create_task_group() as group:
                for _ in range(4):
                    group.start_soon(asks)
        anyio.run(main)

    begun = time.monotonic()
    threads = [threading.Thread(target=flood, args=(k,)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    elapsed = time.monotonic() - begun
    assert 0 < sum(admitted) <= burst + rate * elapsed, (admitted, elapsed)


def test_tokens_in_a_workers_hand_and_in_the_refilled_bucket_stay_within_one_burst(
        store: str) -> None:
    # Nearly no refill by the clock: the bucket is refilled by hand, as if time had passed
    # while worker 0 held the rest of its batch.
    burst = 40
    workers = list(_leases(store, rate=0.001, burst=burst, workers=2))
    assert workers[0].batch == 5 and workers[0].buckets.room == burst - 2 * 4

    async def go() -> int:
        assert await workers[0].admit("client 'agent'")  # takes 5: spends 1, holds 4
        with workers[1].buckets.db.transaction() as conn:
            conn.execute("UPDATE rate_buckets SET counted_at = counted_at - 1e9")
        count = 0
        while await workers[1].admit("client 'agent'"):  # the bucket, full again
            count += 1
        while await workers[0].admit("client 'agent'"):  # the hand, then the empty bucket
            count += 1
        return count

    assert anyio.run(go) <= burst


def test_tokens_not_spent_within_the_lease_lapse_and_are_not_given_back(tmp_path: Path) -> None:
    store = str(tmp_path / "toolkeeper.db")
    hand, other = _leases(store, rate=0.001, burst=40, workers=2)
    writes = _count_writes(hand.buckets)

    async def go() -> None:
        assert await hand.admit("client 'agent'")  # 5 taken from 32: 1 spent, 4 in hand
        assert await hand.admit("client 'agent'") and writes[0] == 1
        lapses = time.monotonic() + hand.lease_s
        while time.monotonic() < lapses:  # the condition is the lease's end, on the clock
            await anyio.sleep(0.05)
        assert await hand.admit("client 'agent'") and writes[0] == 2  # lapsed: the store
        left = hand.buckets.db.query("SELECT tokens FROM rate_buckets")
        assert 21.9 < number(left[0][0]) < 22.1, left  # 32 - 5 - 5: the 3 lapsed stay gone
        admitted = 0
        while await other.admit("client 'agent'"):  # the other worker is not starved
            admitted += 1
        assert admitted == 22

    anyio.run(go)
