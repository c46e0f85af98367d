"""``S3BlobStore``: artifacts in an S3-compatible bucket (AWS S3, MinIO, Ceph, R2, …) through
obstore (install ``toolkeeper[s3]``), so every replica reads what another stored.

Under the URL's prefix: ``blobs/<hex>`` holds a blob (one line of JSON saying its media type
and name, then the bytes), ``pins/<holder>/<hex>/<owner>`` is a pin (empty; holder and owner
are digests). Ages are the objects' ``Last-Modified`` times: storing a blob again, or pinning
it again, starts its time again.

Credentials and the endpoint come from the environment as the AWS tools read it
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``,
``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP`` for a plain-HTTP endpoint, web identity and instance
roles): never from a client of the server.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ..extras import missing
from .store import Blob, UnknownArtifactError, content_ref, holder_of, key_of

if TYPE_CHECKING:
    from obstore.store import S3Store

__all__ = ["S3BlobStore"]


_CODES = {"NoSuchBucket": "no such bucket (make it, or name another)",
          "AccessDenied": "access denied (check the credentials and the bucket's policy)",
          "InvalidAccessKeyId": "the access key is not known (check the credentials)",
          "SignatureDoesNotMatch": "the secret key does not match (check the credentials)"}
"""S3's error codes, in the words an operator acts on."""


def _digest(ref: str) -> str:
    digest = ref.removeprefix("sha256:")
    if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
        raise UnknownArtifactError(ref)
    return digest


class S3BlobStore:
    """Blobs and pins as objects under ``s3://bucket/prefix``."""

    def __init__(self, url: str) -> None:
        try:
            import obstore
            from obstore.store import S3Store
        except ImportError as exc:
            raise missing("s3", "an s3:// artifact store") from exc
        self.url = url
        self._obs: Any = obstore
        try:
            self.bucket: S3Store = S3Store.from_url(url)
        except Exception as exc:  # obstore's configuration errors
            raise StoreError(f"cannot use the artifact bucket {url}: {exc}") from exc

    def _failed(self, exc: Exception) -> StoreError:
        said = str(exc).strip().splitlines()
        first = said[0][:200] if said else type(exc).__name__
        for code, meaning in _CODES.items():
            if code in str(exc):
                first = meaning
        if isinstance(exc, FileNotFoundError):
            first = _CODES["NoSuchBucket"]
        return StoreError(f"the artifact bucket {self.url}: {first}; credentials and endpoint "
                          "come from the AWS_* environment variables")

    def _call(self, name: str, *args: Any, found: bool = False) -> Any:
        """obstore's ``name`` on the bucket; ``found``: a missing object is
        ``FileNotFoundError`` (else, as any failure, a ``StoreError``)."""
        try:
            return getattr(self._obs, name)(self.bucket, *args)
        except FileNotFoundError:
            if found:
                raise
            raise self._failed(FileNotFoundError()) from None
        except Exception as exc:
            raise self._failed(exc) from exc

    def _listed(self, prefix: str) -> Iterator[tuple[str, float]]:
        """(path, last modified) of every object under ``prefix``."""
        try:
            for chunk in self._obs.list(self.bucket, prefix=prefix):
                for meta in chunk:
                    modified: datetime = meta["last_modified"]
                    yield str(meta["path"]), modified.timestamp()
        except Exception as exc:
            raise self._failed(exc) from exc

    def put(self, data: bytes, media_type: str, *, name: str | None = None) -> str:
        ref = content_ref(data)
        head = json.dumps({"media_type": media_type, "name": name}).encode()
        self._call("put", f"blobs/{_digest(ref)}", head + b"\n" + bytes(data))
        return ref

    def resolve(self, ref: str) -> Blob:
        try:
            got = self._call("get", f"blobs/{_digest(ref)}", found=True)
            body = bytes(got.bytes())
        except FileNotFoundError as exc:
            raise UnknownArtifactError(ref) from exc
        head, _, data = body.partition(b"\n")
        try:
            meta = json.loads(head)
        except ValueError as exc:
            raise UnknownArtifactError(ref) from exc
        return Blob(ref=ref, data=data, media_type=str(meta["media_type"]), name=meta.get("name"),
                    created_at=got.meta["last_modified"].timestamp())

    def stat(self, ref: str) -> Blob | None:
        try:
            return self.resolve(ref)
        except UnknownArtifactError:
            return None

    def _pin_path(self, ref: str, owner: str) -> str:
        return f"pins/{key_of(holder_of(owner))}/{_digest(ref)}/{key_of(owner)}"

    def pin(self, ref: str, owner: str) -> None:
        self._call("put", self._pin_path(ref, owner), b"")

    def unpin(self, ref: str, owner: str) -> None:
        try:
            path = self._pin_path(ref, owner)
        except UnknownArtifactError:
            return  # not a ref: never pinned
        self._call("delete", path)  # none there: nothing to do

    def pinned_by(self, holder: str) -> list[str]:
        return sorted({"sha256:" + path.split("/")[2]
                       for path, _ in self._listed(f"pins/{key_of(holder)}/")})

    def drop_pins(self, older_than_s: float) -> int:
        cutoff = time.time() - older_than_s
        stale = [path for path, at in self._listed("pins/") if at < cutoff]
        if stale:
            self._call("delete", stale)
        return len(stale)

    def gc(self, ttl_s: float) -> int:
        pinned = {path.split("/")[2] for path, _ in self._listed("pins/")}
        cutoff = time.time() - ttl_s
        stale = [path for path, at in self._listed("blobs/")
                 if at < cutoff and path.removeprefix("blobs/") not in pinned]
        if stale:
            self._call("delete", stale)
        return len(stale)
