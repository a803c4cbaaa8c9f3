"""The cloud's sentence embedder: the files ``make model`` builds, loaded once per process.

Invariants: nothing is downloaded, ever. The folder is ``$MEMSYNC_MODEL_DIR`` when set,
else ``models/embedder`` at the root of the checkout this package lives in; a missing
file raises ``ModelMissing`` naming it. One ``Embedder`` per folder per process (it is
safe to share between threads); each call runs on one core, so concurrent requests
use the cores in parallel and one request cannot take them all.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from cloud.errors import ModelMissing
from protocol.embedding import Embedder

MODEL_DIR_ENV = "MEMSYNC_MODEL_DIR"
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
THREADS = 1

_lock = threading.Lock()
_loaded: dict[Path, Embedder] = {}


def model_dir() -> Path:
    """Where the embedder's files are looked for."""
    configured = os.environ.get(MODEL_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path(__file__).resolve().parent.parent / "models" / "embedder"


def load_embedder(directory: Path, *, threads: int = THREADS) -> Embedder:
    """A new ``Embedder`` from ``directory``; ``ModelMissing`` if a file is not there."""
    model, tokenizer = directory / MODEL_FILE, directory / TOKENIZER_FILE
    for path in (model, tokenizer):
        if not path.is_file():
            raise ModelMissing(path)
    return Embedder.from_bytes(
        model.read_bytes(), tokenizer.read_text(encoding="utf-8"), threads=threads
    )


def default_embedder() -> Embedder:
    """The process-wide embedder for :func:`model_dir`, loaded on first use."""
    directory = model_dir().resolve()
    with _lock:
        embedder = _loaded.get(directory)
        if embedder is None:
            embedder = _loaded[directory] = load_embedder(directory)
        return embedder
