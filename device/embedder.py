"""The device's sentence embedder: the files ``make model`` builds, loaded once per process.

Invariants: nothing is downloaded, ever. The folder is ``$MEMSYNC_MODEL_DIR`` when set,
else ``models/embedder`` at the root of the checkout this package lives in; a missing
file raises ``ModelMissing`` naming it. One ``Embedder`` per folder per process (it is
safe to share between threads); it runs on one core, the device's budget. The model id
is known without building an onnxruntime session: ``MANIFEST.json`` beside the model
names it, trusted only when its sha256 is the model file's own (else the session says);
either way it is the id the session would give. The session is built on first ``embed``.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from device.errors import ModelMissing

if TYPE_CHECKING:
    from protocol.embedding import Embedder

MODEL_DIR_ENV = "MEMSYNC_MODEL_DIR"
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_FILE = "MANIFEST.json"
THREADS = 1

_lock = threading.Lock()
_loaded: dict[Path, LazyEmbedder] = {}


def model_dir() -> Path:
    """Where the embedder's files are looked for."""
    configured = os.environ.get(MODEL_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path(__file__).resolve().parent.parent / "models" / "embedder"


def _check_files(directory: Path) -> tuple[Path, Path]:
    model, tokenizer = directory / MODEL_FILE, directory / TOKENIZER_FILE
    for path in (model, tokenizer):
        if not path.is_file():
            raise ModelMissing(path)
    return model, tokenizer


def load_embedder(directory: Path, *, threads: int = THREADS) -> Embedder:
    """A new ``Embedder`` from ``directory``; ``ModelMissing`` if a file is not there."""
    from protocol.embedding import Embedder  # onnxruntime only when a session is built

    model, tokenizer = _check_files(directory)
    return Embedder.from_bytes(
        model.read_bytes(), tokenizer.read_text(encoding="utf-8"), threads=threads
    )


def manifest_model_id(directory: Path) -> str | None:
    """The model id ``MANIFEST.json`` names, if its sha256 is that of the model file
    beside it (hashing 23 MB is far cheaper than building a session); else None."""
    model, _tokenizer = _check_files(directory)
    try:
        manifest = json.loads((directory / MANIFEST_FILE).read_text(encoding="utf-8"))
        claimed = manifest["outputs"][MODEL_FILE]["sha256"]
        model_id = manifest["model_id"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(model_id, str) or not isinstance(claimed, str):
        return None
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    if digest != claimed or not model_id.endswith("@" + digest[:12]):
        return None
    return model_id


class LazyEmbedder:
    """An embedder whose id is known at once and whose session is built on first use."""

    def __init__(self, directory: Path, *, threads: int = THREADS) -> None:
        self._directory = directory
        self._threads = threads
        self._lock = threading.Lock()
        self._model_id: str | None = None
        self._embedder: Embedder | None = None

    @property
    def model_id(self) -> str:
        if self._model_id is None:
            found = manifest_model_id(self._directory)
            self._model_id = found if found is not None else self.loaded().model_id
        return self._model_id

    def loaded(self) -> Embedder:
        """The real embedder (its onnxruntime session built now if it was not yet)."""
        with self._lock:
            if self._embedder is None:
                self._embedder = load_embedder(self._directory, threads=self._threads)
                self._model_id = self._embedder.model_id
            return self._embedder

    def embed(self, texts: Sequence[str]) -> Any:
        return self.loaded().embed(texts)

    def __repr__(self) -> str:
        return f"LazyEmbedder({self._directory})"


def default_embedder() -> LazyEmbedder:
    """The process-wide embedder for :func:`model_dir`, its session built on first use."""
    directory = model_dir().resolve()
    _check_files(directory)  # a missing model is named now, not at the first embed
    with _lock:
        embedder = _loaded.get(directory)
        if embedder is None:
            embedder = _loaded[directory] = LazyEmbedder(directory)
        return embedder
