"""Artifacts: large results and media kept out of the conversation, passed around by ref."""

from .s3 import S3BlobStore
from .sql import SqlBlobStore
from .store import (
    Blob,
    BlobStore,
    FileBlobStore,
    MemoryBlobStore,
    SharedBlobStore,
    UnknownArtifactError,
)

__all__ = ["Blob", "BlobStore", "FileBlobStore", "MemoryBlobStore", "S3BlobStore",
           "SharedBlobStore", "SqlBlobStore", "UnknownArtifactError"]
