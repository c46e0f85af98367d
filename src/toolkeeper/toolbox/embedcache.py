"""Tool embeddings kept on disk between processes, so a large catalog is embedded once.

Embedding 1,100 tools takes half a minute of CPU; a process that finds their vectors here
starts searching at once. One file per model: the vectors of texts keyed by the SHA-256 of
the text, under a name made from the model's identity (its config, the sizes and times of its
weights and tokenizer, and the encoder's version), so a new or changed model never reads
another's vectors. The file holds vectors and hashes only — no text — and is read with
pickling off; written whole to a new file that replaces the old one, so a reader sees either.
It lives in the user's cache directory (``$TOOLKEEPER_CACHE_DIR/embeddings``, else
``$XDG_CACHE_HOME/toolkeeper/embeddings``, else ``~/.cache/toolkeeper/embeddings``), never in a
project folder. Only tool texts are stored, never queries.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .encoder import ENCODER_VERSION, _np

if TYPE_CHECKING:
    from .encoder import Array

__all__ = ["EmbeddingCache", "default_cache_dir", "model_fingerprint"]

_LIMIT = 50_000  # vectors per model file (384 float32 each: 77 MB at most)


def default_cache_dir() -> Path:
    """``$TOOLKEEPER_CACHE_DIR/embeddings``, else ``$XDG_CACHE_HOME/toolkeeper/embeddings``,
    else ``~/.cache/toolkeeper/embeddings``."""
    own = os.environ.get("TOOLKEEPER_CACHE_DIR", "").strip()
    if own:
        return Path(own) / "embeddings"
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    root = Path(base) if base else Path.home() / ".cache"
    return root / "toolkeeper" / "embeddings"


def model_fingerprint(model_dir: Path, runtime: str | None = None) -> str:
    """A name for the model's vectors: its config, the size and time of its weights and
    tokenizer, and the encoder's version (a reinstalled or different model gets a new one);
    ``runtime`` names what computes them when it is not the numpy forward pass (an ONNX
    graph, made int8 or not, and how it is run: ``onnxencoder.vectors_identity``)."""
    parts: list[str] = [str(ENCODER_VERSION), str(model_dir.resolve())]
    if runtime is not None:
        parts.append(runtime)
    for name in ("config.json", "sentence_bert_config.json"):
        path = model_dir / name
        parts.append(path.read_text() if path.exists() else "")
    for name in ("model.safetensors", "tokenizer.json"):
        info = (model_dir / name).stat()
        parts.append(f"{info.st_size}:{info.st_mtime_ns}")
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:24]


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class EmbeddingCache:
    """The vectors of one model's texts, read once from disk and written back when new ones
    are added.

    Args:
        directory: Where the model files are kept (created, owner-only).
        fingerprint: The model's name there (``model_fingerprint``).
    """

    def __init__(self, directory: Path, fingerprint: str) -> None:
        self.path = directory / f"{fingerprint}.npz"
        self._rows: dict[bytes, Array] | None = None
        self._lock = threading.Lock()

    def get(self, texts: Sequence[str]) -> dict[str, Array]:
        """The stored vectors of those ``texts`` that have one."""
        with self._lock:
            rows = self._loaded()
            found = {text: rows.get(_digest(text)) for text in texts}
        return {text: vector for text, vector in found.items() if vector is not None}

    def put(self, vectors: dict[str, Array]) -> None:
        """Store the vectors of these texts (with the file's current ones; the oldest are
        left out past 50,000). A cache that cannot be written is skipped, not an error."""
        if not vectors:
            return
        with self._lock:
            rows = self._loaded()
            rows.update(self._read())  # what other processes wrote since
            for text, vector in vectors.items():
                rows.pop(_digest(text), None)
                rows[_digest(text)] = vector
            while len(rows) > _LIMIT:
                del rows[next(iter(rows))]
            with contextlib.suppress(OSError):
                self._write(rows)

    def _loaded(self) -> dict[bytes, Array]:
        if self._rows is None:
            self._rows = self._read()
        return self._rows

    def _read(self) -> dict[bytes, Array]:
        """The file's vectors; nothing when it is missing, unreadable or not ours."""
        np = _np()
        try:
            with np.load(self.path, allow_pickle=False) as data:
                keys, matrix = data["keys"], data["vectors"]
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return {}
        if keys.ndim != 2 or keys.shape[1] != 32 or len(keys) != len(matrix):
            return {}
        return {bytes(key): row for key, row in zip(keys, matrix.astype(np.float32), strict=True)}

    def _write(self, rows: dict[bytes, Array]) -> None:
        np = _np()
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        keys = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(len(rows), 32)
        fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=".embeddings-", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as out:
                np.savez(out, keys=keys, vectors=np.stack(list(rows.values())))
            os.replace(temp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
