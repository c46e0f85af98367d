"""Artifact refs: from here on the tool sees the content behind ``{"$artifact": ref}``."""

from __future__ import annotations

from ...artifacts.store import BlobStore
from ..results import InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["ArtifactRefGate"]


class ArtifactRefGate(Gate):
    name = "artifact_refs"

    def __init__(self, artifact_store: BlobStore | None = None) -> None:
        self.artifact_store = artifact_store

    def active(self) -> bool:
        return self.artifact_store is not None

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        if inv.resolved is None:
            return await call_next(inv)
        return await call_next(inv.evolve(arguments=inv.resolved, resolved=None))
