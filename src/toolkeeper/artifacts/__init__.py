"""Artifacts: large results and media kept out of the conversation, passed around by ref."""

from .sql import SqlBlobStore
from .store import (
    Blob,
    BlobStore,
    FileBlobStore,
    MemoryBlobStore,
    SharedBlobStore,
    UnknownArtifactError,
)

__all__ = ["Blob", "BlobStore", "FileBlobStore", "MemoryBlobStore", "SharedBlobStore",
           "SqlBlobStore", "UnknownArtifactError"]
