"""Where ``toolkeeper serve`` offloads large results: a ``FileBlobStore`` under the state dir
(``[server] artifact_dir`` or ``--artifacts DIR`` elsewhere, ``--artifacts off`` or
``[server] artifacts = false`` for none), swept of what is older than ``[server]
artifact_ttl_s`` as serve starts and every ``min(ttl / 2, 10 min)`` while it runs.

A client reads its artifacts (``toolkeeper://artifact/sha256:…``) by its identity — the client
token's name — not by a connection's MCP session: serve answers statelessly, so the session
that pins them is the client's, which lives as long as the server. The sweep releases what a
client's calls stored more than the TTL ago, then removes unpinned blobs older than the TTL.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from ..artifacts.store import FileBlobStore
from ..config.model import ServerSection, ToolkeeperConfig
from ..errors import ConfigError
from ..mcp.server import release_artifacts

__all__ = ["ARTIFACTS_DIR", "ArtifactKeeper", "artifact_keeper"]

ARTIFACTS_DIR = "artifacts"
"""The store's directory in the state dir, by default."""
SWEEP_EVERY_S = 600.0


@dataclass(frozen=True, kw_only=True)
class ArtifactKeeper:
    """The store serve offloads to, and how long what it holds stays readable."""

    store: FileBlobStore
    ttl_s: float

    def sweep(self, server: Any = None) -> int:
        """Release the clients' artifacts stored more than ``ttl_s`` ago; drop the pins a
        killed process left (a live one renews or releases its pins within ``ttl_s`` and a
        sweep); remove the unpinned blobs older than ``ttl_s``. Returns how many blobs were
        removed."""
        release_artifacts(self.ttl_s, server)
        self.store.drop_pins(2 * self.ttl_s + SWEEP_EVERY_S)
        return self.store.gc(self.ttl_s)

    async def run(self, server: Any = None) -> None:
        """Sweep every ``min(ttl_s / 2, 10 min)`` until cancelled (off the event loop)."""
        while True:
            await anyio.sleep(min(self.ttl_s / 2, SWEEP_EVERY_S))
            await anyio.to_thread.run_sync(self.sweep, server)


def artifact_keeper(settings: ToolkeeperConfig | None, state_dir: Path, *,
                    given: str | None, workspace: Path | None) -> ArtifactKeeper | None:
    """The store in force (swept once, now), or None when it is turned off.

    Args:
        settings: The config (its ``[server]`` section), if any.
        state_dir: Where the store goes by default (``artifacts/``).
        given: ``--artifacts``: a directory, or ``off``; it wins over the config.
        workspace: The directory the built-in tools reach, if they are served: the store may
            not be in it (a tool would read every client's results), nor it in the store.

    Raises:
        ConfigError: the directory is within reach of a tool, or cannot be made.
    """
    section = settings.server if settings is not None else ServerSection()
    if given == "off" or (given is None and not section.artifacts):
        return None
    root = Path(given) if given else section.artifact_dir or state_dir / ARTIFACTS_DIR
    root = root.expanduser().resolve()
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
    keeper = ArtifactKeeper(store=store, ttl_s=section.artifact_ttl_s)
    keeper.sweep()
    return keeper
