"""Where ``toolkeeper serve`` offloads large results: a ``FileBlobStore`` under the state dir
(``[server] artifact_dir`` or ``--artifacts DIR`` elsewhere, ``--artifacts off`` or
``[server] artifacts = false`` for none), or a ``SqlBlobStore`` in PostgreSQL — by default when
the store is PostgreSQL, so every replica reads what another stored — or an ``S3BlobStore`` in
a bucket (``--artifacts s3://bucket/prefix``), swept of what is older
than ``[server] artifact_ttl_s`` as serve starts and every ``min(ttl / 2, 10 min)`` while it
runs.

A client reads its artifacts (``toolkeeper://artifact/sha256:…``) by its identity — the client
token's name — not by a connection's MCP session: serve answers statelessly, so the session
that pins them is the client's, which lives as long as the server. The sweep releases what a
client's calls stored more than the TTL ago, then removes unpinned blobs older than the TTL.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread

from ..approval.pg import open_database
from ..artifacts.s3 import S3BlobStore
from ..artifacts.sql import SCHEMA, SqlBlobStore
from ..artifacts.store import FileBlobStore, SharedBlobStore
from ..errors import ConfigError

__all__ = ["ArtifactKeeper", "artifact_store"]

SWEEP_EVERY_S = 600.0


@dataclass(frozen=True, kw_only=True)
class ArtifactKeeper:
    """The store serve offloads to, how long what it holds stays readable, and who holds what
    the clients' calls stored (``release``: unpin what is older than so many seconds, and say
    how many — the MCP face's client sessions)."""

    store: SharedBlobStore
    ttl_s: float
    release: Callable[[float], int]

    def sweep(self) -> int:
        """Release the clients' artifacts stored more than ``ttl_s`` ago; drop the pins a
        killed process left (a live one renews or releases its pins within ``ttl_s`` and a
        sweep); remove the unpinned blobs older than ``ttl_s``. Returns how many blobs were
        removed."""
        self.release(self.ttl_s)
        self.store.drop_pins(2 * self.ttl_s + SWEEP_EVERY_S)
        return self.store.gc(self.ttl_s)

    async def run(self) -> None:
        """Sweep every ``min(ttl_s / 2, 10 min)`` until cancelled (off the event loop)."""
        while True:
            await anyio.sleep(min(self.ttl_s / 2, SWEEP_EVERY_S))
            await anyio.to_thread.run_sync(self.sweep)


def artifact_store(root: Path | None, *, ttl_s: float, workspace: Path | None,
                   url: str | None = None) -> SharedBlobStore | None:
    """The store at ``url`` or ``root`` (made owner-only), swept once, now; None when off.

    Args:
        root: The directory it keeps its files in (``--artifacts`` over ``[server]``,
            resolved by the settings); ``None``: off, or in ``url``.
        ttl_s: How long a blob stays once nobody holds it (nobody does yet: serve starts).
        workspace: The directory the built-in tools reach, if they are served: the store may
            not be in it (a tool would read every client's results), nor it in the store.
        url: A ``postgresql://`` database or an ``s3://bucket/prefix`` to keep the blobs in,
            shared by replicas.

    Raises:
        ConfigError: the directory is within reach of a tool, or cannot be made.
        StoreError: the database or the bucket cannot be reached.
        MissingExtraError: ``s3://`` without ``toolkeeper[s3]``.
    """
    store: SharedBlobStore
    if url is not None and url.startswith("s3://"):
        store = S3BlobStore(url)
    elif url is not None:
        store = SqlBlobStore(open_database(url, SCHEMA, "artifacts"))
    elif root is not None:
        store = _directory(root, workspace)
    else:
        return None
    ArtifactKeeper(store=store, ttl_s=ttl_s, release=lambda _s: 0).sweep()
    return store


def _directory(root: Path, workspace: Path | None) -> FileBlobStore:
    if workspace is not None:
        ws = workspace.expanduser().resolve()
        if root == ws or ws in root.parents or root in ws.parents:
            raise ConfigError(f"the artifact dir {root} and the workspace {ws} overlap: a tool "
                              "could read every client's results; pass --artifacts DIR outside "
                              "the workspace (the default is artifacts/ in the state dir)")
    store = FileBlobStore(root)
    try:
        os.chmod(root, 0o700)  # owner-only, even inside a state dir others may pass through
    except OSError as exc:
        raise ConfigError(f"cannot use the artifact dir {root}: {exc.strerror or exc}; pass "
                          "--artifacts DIR (a directory you own) or --artifacts off") from exc
    return store
