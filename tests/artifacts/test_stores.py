"""Every artifact store passes ``BlobStoreConformance``: in memory, files, a SQLite table, a
table of a real PostgreSQL server (the store replicas share), a bucket of a local
S3-compatible server."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper.approval.pg import open_database
from toolkeeper.artifacts import FileBlobStore, MemoryBlobStore, S3BlobStore, SqlBlobStore
from toolkeeper.artifacts.sql import SCHEMA
from toolkeeper.errors import StoreError
from toolkeeper.testing import BlobStoreConformance


class TestMemoryBlobStore(BlobStoreConformance):
    def make_store(self, tmp_path: Path) -> MemoryBlobStore:
        return MemoryBlobStore()


class TestFileBlobStore(BlobStoreConformance):
    shared = True

    def make_store(self, tmp_path: Path) -> FileBlobStore:
        return FileBlobStore(tmp_path / "artifacts")


class TestSqliteBlobStore(BlobStoreConformance):
    shared = True

    def make_store(self, tmp_path: Path) -> SqlBlobStore:
        return SqlBlobStore(open_database(tmp_path / "artifacts.db", SCHEMA, "artifacts"))


class TestPostgresBlobStore(BlobStoreConformance):
    shared = True

    @pytest.fixture(autouse=True)
    def _database(self, postgres_url: str) -> None:
        self.url = postgres_url

    def make_store(self, tmp_path: Path) -> SqlBlobStore:
        return SqlBlobStore(open_database(self.url, SCHEMA, "artifacts"))


def test_a_blob_over_the_tables_cap_is_refused_saying_how_to_raise_it(tmp_path: Path) -> None:
    store = SqlBlobStore(open_database(tmp_path / "a.db", SCHEMA, "artifacts"), max_bytes=1000)
    assert store.resolve(store.put(b"x" * 1000, "text/plain")).size == 1000
    with pytest.raises(StoreError, match=r"1001 bytes is over the artifact store's cap of "
                                         r"1000 bytes.*max_bytes"):
        store.put(b"x" * 1001, "text/plain")


class TestS3BlobStore(BlobStoreConformance):
    shared = True

    @pytest.fixture(autouse=True)
    def _bucket(self, s3_url: str) -> None:
        self.url = s3_url

    def make_store(self, tmp_path: Path) -> S3BlobStore:
        return S3BlobStore(self.url)


def test_a_bucket_that_cannot_be_reached_is_one_store_error(s3_url: str) -> None:
    store = S3BlobStore(s3_url.replace("s3://", "s3://no-such-bucket-") )
    with pytest.raises(StoreError, match=r"^the artifact bucket s3://no-such-bucket-.*AWS_\*"):
        store.put(b"x", "text/plain")
