"""PostgreSQL for the tests: one real server per session (``toolkeeper.testing.postgres``), a
fresh database per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from toolkeeper.testing.postgres import create_database, postgres_server


@pytest.fixture(scope="session")
def postgres_base() -> Iterator[str]:
    with postgres_server() as base:
        yield base


@pytest.fixture
def postgres_url(postgres_base: str) -> str:
    return create_database(postgres_base)
