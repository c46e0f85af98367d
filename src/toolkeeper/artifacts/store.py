"""``BlobStore``: where large results and media go, addressed by content.

A ref is ``sha256:<hex>`` of the bytes. ``pin`` keeps a blob alive for an owner (a session);
``gc`` removes unpinned blobs older than a TTL.

An owner ``"HOLDER#PRIVATE"`` pins for a holder: several sessions (on several processes, when
the store is shared) pin for one holder, each unpinning only its own pins, and a store that
several processes share (``SharedBlobStore``) tells which refs a holder's sessions keep
anywhere (``pinned_by``) and drops the pins a killed process left (``drop_pins``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..errors import StoreError

__all__ = ["Blob", "BlobStore", "FileBlobStore", "MemoryBlobStore", "SharedBlobStore",
           "UnknownArtifactError", "holder_of"]


class UnknownArtifactError(KeyError):
    """No blob has this ref."""


@dataclass(frozen=True, kw_only=True)
class Blob:
    """Stored bytes and what they are."""

    ref: str
    data: bytes
    media_type: str
    name: str | None = None
    created_at: float = field(default_factory=time.time)

    @property
    def size(self) -> int:
        return len(self.data)


@runtime_checkable
class BlobStore(Protocol):
    """put → ref, resolve, stat, pin, unpin, gc."""

    def put(self, data: bytes, media_type: str, *, name: str | None = None) -> str: ...
    def resolve(self, ref: str) -> Blob: ...
    def stat(self, ref: str) -> Blob | None: ...
    def pin(self, ref: str, owner: str) -> None: ...
    def unpin(self, ref: str, owner: str) -> None: ...
    def gc(self, ttl_s: float) -> int: ...


@runtime_checkable
class SharedBlobStore(BlobStore, Protocol):
    """A store several processes share: who holds what, and the pins nobody renews."""

    def pinned_by(self, holder: str) -> list[str]:
        """The refs pinned by an owner ``holder`` or ``holder#…``, by any process."""
        ...

    def drop_pins(self, older_than_s: float) -> int:
        """Remove pins made (or renewed) more than ``older_than_s`` seconds ago. Returns how
        many."""
        ...


def content_ref(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def holder_of(owner: str) -> str:
    """Whom an owner pins for: ``HOLDER`` of ``HOLDER#PRIVATE``, else the owner itself."""
    return owner.rsplit("#", 1)[0]


def key_of(name: str) -> str:
    """A fixed-length key for a holder or an owner, as a shared store records it."""
    return hashlib.sha256(name.encode()).hexdigest()[:32]


class MemoryBlobStore:
    """Blobs in memory (one process, tests, short runs)."""

    def __init__(self) -> None:
        self._blobs: dict[str, Blob] = {}
        self._pins: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def put(self, data: bytes, media_type: str, *, name: str | None = None) -> str:
        ref = content_ref(data)
        with self._lock:
            found = self._blobs.get(ref)  # stored again: its TTL starts again
            self._blobs[ref] = replace(found, created_at=time.time()) if found else Blob(
                ref=ref, data=bytes(data), media_type=media_type, name=name)
        return ref

    def resolve(self, ref: str) -> Blob:
        blob = self._blobs.get(ref)
        if blob is None:
            raise UnknownArtifactError(ref)
        return blob

    def stat(self, ref: str) -> Blob | None:
        return self._blobs.get(ref)

    def pin(self, ref: str, owner: str) -> None:
        with self._lock:
            self._pins.setdefault(ref, set()).add(owner)

    def unpin(self, ref: str, owner: str) -> None:
        with self._lock:
            owners = self._pins.get(ref)
            if owners is not None:
                owners.discard(owner)
                if not owners:
                    del self._pins[ref]

    def pinned(self, ref: str) -> bool:
        return bool(self._pins.get(ref))

    def pinned_by(self, holder: str) -> list[str]:
        with self._lock:
            return sorted(ref for ref, owners in self._pins.items()
                          if any(holder_of(owner) == holder for owner in owners))

    def drop_pins(self, older_than_s: float) -> int:
        """None to drop: the pins live and die with this process."""
        del older_than_s
        return 0

    def gc(self, ttl_s: float) -> int:
        cutoff = time.time() - ttl_s
        with self._lock:
            stale = [r for r, b in self._blobs.items() if b.created_at < cutoff and r not in self._pins]
            for ref in stale:
                del self._blobs[ref]
        return len(stale)


class FileBlobStore:
    """Blobs as files under a directory, content-addressed (``ab/cdef….bin`` + ``.json`` meta).

    Pins are files in ``pins/<ref>/<holder>.<owner>`` (each a digest), so several processes
    on one machine can share the store.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        try:
            (self.root / "pins").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the artifact store at {self.root}: {exc}") from exc

    def _paths(self, ref: str) -> tuple[Path, Path]:
        digest = ref.removeprefix("sha256:")
        if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
            raise UnknownArtifactError(ref)
        base = self.root / digest[:2] / digest[2:]
        return base.with_suffix(".bin"), base.with_suffix(".json")

    def put(self, data: bytes, media_type: str, *, name: str | None = None) -> str:
        ref = content_ref(data)
        blob_path, meta_path = self._paths(ref)
        if blob_path.exists():
            try:
                os.utime(meta_path)  # stored again: its TTL starts again
                return ref
            except FileNotFoundError:
                pass  # removed meanwhile: written again below
        blob_path.parent.mkdir(parents=True, exist_ok=True)
        for path, payload in ((blob_path, bytes(data)), (meta_path, json.dumps(
                {"media_type": media_type, "name": name, "created_at": time.time()}).encode())):
            tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
            tmp.write_bytes(payload)
            os.replace(tmp, path)
        return ref

    def stat(self, ref: str) -> Blob | None:
        try:
            return self.resolve(ref)
        except UnknownArtifactError:
            return None

    def resolve(self, ref: str) -> Blob:
        blob_path, meta_path = self._paths(ref)
        try:
            meta = json.loads(meta_path.read_text())
            data = blob_path.read_bytes()
        except (OSError, ValueError) as exc:
            raise UnknownArtifactError(ref) from exc
        return Blob(ref=ref, data=data, media_type=meta["media_type"], name=meta.get("name"),
                    created_at=meta.get("created_at", 0.0))

    def _pin_dir(self, ref: str) -> Path:
        return self.root / "pins" / ref.removeprefix("sha256:")

    def _pin_file(self, ref: str, owner: str) -> Path:
        return self._pin_dir(ref) / f"{key_of(holder_of(owner))}.{key_of(owner)}"

    def pin(self, ref: str, owner: str) -> None:
        pin = self._pin_file(ref, owner)
        pin.parent.mkdir(parents=True, exist_ok=True)
        pin.touch()

    def unpin(self, ref: str, owner: str) -> None:
        directory = self._pin_dir(ref)
        self._pin_file(ref, owner).unlink(missing_ok=True)
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()

    def pinned_by(self, holder: str) -> list[str]:
        return sorted({"sha256:" + pin.parent.name
                       for pin in self.root.glob(f"pins/*/{key_of(holder)}.*")})

    def drop_pins(self, older_than_s: float) -> int:
        """Remove pins made (or renewed) more than ``older_than_s`` seconds ago: those a
        process left when it ended without unpinning (killed), which would keep their blobs
        from ``gc`` for ever. Only for a store whose owners renew or release their pins within
        that time. Returns how many."""
        cutoff = time.time() - older_than_s
        dropped = 0
        for pin in self.root.glob("pins/*/*"):
            with contextlib.suppress(OSError):
                if pin.stat().st_mtime >= cutoff:
                    continue
                pin.unlink()
                dropped += 1
                pin.parent.rmdir()  # only when it was the ref's last pin
        return dropped

    def gc(self, ttl_s: float) -> int:
        cutoff = time.time() - ttl_s
        removed = 0
        for meta_path in self.root.glob("??/*.json"):
            ref = "sha256:" + meta_path.parent.name + meta_path.stem
            if self._pin_dir(ref).is_dir():
                continue
            if meta_path.stat().st_mtime < cutoff:
                meta_path.with_suffix(".bin").unlink(missing_ok=True)
                meta_path.unlink(missing_ok=True)
                removed += 1
        return removed
