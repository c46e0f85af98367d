"""A conformance suite every ``BlobStore`` must pass (and every ``SharedBlobStore`` its part).

Subclass it in a pytest module and provide ``make_store``; a store that several processes
share opens a second view of the same blobs when called again with the same ``tmp_path``
(say so with ``shared = True``)::

    class TestMyBlobs(BlobStoreConformance):
        shared = True

        def make_store(self, tmp_path):
            return MyBlobStore(...)
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from ..artifacts.store import BlobStore, SharedBlobStore, UnknownArtifactError

__all__ = ["BlobStoreConformance"]

NEVER = "sha256:" + "0" * 64


class BlobStoreConformance:
    """What toolkeeper relies on: refs by content, blobs as stored, pins that keep a blob
    from ``gc`` until their last owner lets go, and — shared — every view alike."""

    shared = False
    """Whether ``make_store`` called again with the same ``tmp_path`` opens the same blobs."""

    def make_store(self, tmp_path: Path) -> BlobStore:
        raise NotImplementedError

    def test_a_ref_names_the_content_and_resolves_to_what_was_stored(self, tmp_path: Path
                                                                     ) -> None:
        store = self.make_store(tmp_path)
        data = bytes(range(256)) * 40
        ref = store.put(data, "application/octet-stream", name="bytes")
        assert ref == "sha256:" + hashlib.sha256(data).hexdigest()
        assert store.put(data, "application/octet-stream", name="bytes") == ref
        blob = store.resolve(ref)
        assert (blob.ref, blob.data, blob.media_type, blob.name, blob.size) == (
            ref, data, "application/octet-stream", "bytes", len(data))
        stat = store.stat(ref)
        assert stat is not None and stat.size == len(data)
        assert store.resolve(store.put(b"", "text/plain")).data == b""

    def test_an_unknown_ref_is_unknown(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        assert store.stat(NEVER) is None
        for ref in (NEVER, "sha256:../../etc/passwd", "not a ref"):
            try:
                store.resolve(ref)
            except UnknownArtifactError:
                continue
            raise AssertionError(f"resolve({ref!r}) did not raise UnknownArtifactError")

    def test_gc_removes_what_nobody_pins_once_older_than_the_ttl(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        kept, pinned = store.put(b"kept", "text/plain"), store.put(b"pinned", "text/plain")
        store.pin(pinned, "holder#one")
        store.pin(pinned, "holder#two")
        assert store.gc(3600) == 0 and store.stat(kept) is not None
        assert store.gc(-1) == 1  # every blob is older than a negative TTL
        assert store.stat(kept) is None and store.stat(pinned) is not None
        store.unpin(pinned, "holder#one")  # the other owner still holds it
        assert store.gc(-1) == 0 and store.stat(pinned) is not None
        store.unpin(pinned, "holder#two")
        store.unpin(pinned, "holder#two")  # twice: nothing more to do
        assert store.gc(-1) == 1 and store.stat(pinned) is None

    def test_concurrent_puts_of_the_same_bytes_make_one_blob(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        data = b"the same result\n" * 1000
        refs: list[str] = []
        threads = [threading.Thread(target=lambda: refs.append(store.put(data, "text/plain")))
                   for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert len(refs) == 8 and len(set(refs)) == 1
        assert store.resolve(refs[0]).data == data

    def test_a_shared_store_tells_what_a_holder_keeps_and_drops_stale_pins(
            self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        if not isinstance(store, SharedBlobStore):
            return  # a plain BlobStore need not know holders
        first, second = store.put(b"first", "text/plain"), store.put(b"second", "text/plain")
        store.pin(first, '["client-a", "a"]#one')
        store.pin(second, '["client-a", "a"]#two')
        store.pin(second, '["client-b", "b"]#one')
        assert store.pinned_by('["client-a", "a"]') == sorted([first, second])
        assert store.pinned_by('["client-b", "b"]') == [second]
        assert store.pinned_by('["client-a", "a"]#one') == [] == store.pinned_by("nobody")
        store.unpin(second, '["client-a", "a"]#two')
        assert store.pinned_by('["client-a", "a"]') == [first]
        assert store.drop_pins(3600) == 0
        if self.shared:  # pins a process left: they live in the store, not in it
            assert store.drop_pins(-1) == 2 and store.pinned_by('["client-b", "b"]') == []
            assert store.gc(-1) == 2

    def test_every_view_of_a_shared_store_sees_the_same_blobs_and_pins(
            self, tmp_path: Path) -> None:
        if not self.shared:
            return  # a store of one process
        one, other = self.make_store(tmp_path), self.make_store(tmp_path)
        assert isinstance(one, SharedBlobStore) and isinstance(other, SharedBlobStore)
        ref = one.put(b"stored by one replica", "text/plain", name="report")
        assert other.resolve(ref).data == b"stored by one replica"
        one.pin(ref, "client#on-one")
        assert other.pinned_by("client") == [ref]
        assert other.gc(-1) == 0 and other.stat(ref) is not None
        one.unpin(ref, "client#on-one")
        assert other.gc(-1) == 1 and one.stat(ref) is None
