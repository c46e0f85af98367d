"""Artifacts: large results and media kept out of the conversation, passed around by ref."""

from .store import Blob, BlobStore, FileBlobStore, MemoryBlobStore, UnknownArtifactError

__all__ = ["Blob", "BlobStore", "FileBlobStore", "MemoryBlobStore", "UnknownArtifactError"]
