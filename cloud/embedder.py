"""The cloud's sentence embedder: the files ``make model`` builds, loaded once per process.

Invariants: nothing is downloaded, ever. The folder is ``$MEMSYNC_MODEL_DIR`` when set,
else ``models/embedder`` at the root of the checkout this package lives in; a missing
file raises ``ModelMissing`` naming it. One ``Embedder`` per folder per process (it is
safe to share between threads); each call runs on one core, so concurrent requests
use the cores in parallel and one request cannot take them all. The finding and
loading is ``protocol.model_files``, shared with the device; this module hands it the
cloud's environment, paths, lock and error.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from cloud.errors import ModelMissing
from protocol import model_files
from protocol.embedding import Embedder
from protocol.model_files import MODEL_FILE, THREADS, TOKENIZER_FILE

MODEL_DIR_ENV = model_files.EMBEDDER.env
__all__ = [
    "MODEL_DIR_ENV",
    "MODEL_FILE",
    "THREADS",
    "TOKENIZER_FILE",
    "default_embedder",
    "load_embedder",
    "model_dir",
]

_SHELF = model_files.Shelf(
    model_files.EMBEDDER,
    environ=os.environ,
    path=Path,
    checkout=Path(__file__).resolve().parent.parent,
    lock=threading.Lock(),
    missing=ModelMissing,
)


def model_dir() -> Path:
    """Where the embedder's files are looked for."""
    return _SHELF.folder()


def load_embedder(directory: Path, *, threads: int = THREADS) -> Embedder:
    """A new ``Embedder`` from ``directory``; ``ModelMissing`` if a file is not there."""
    return model_files.load_embedder(_SHELF, directory, threads=threads)


def default_embedder() -> Embedder:
    """The process-wide embedder for :func:`model_dir`, loaded on first use."""
    embedder: Embedder = _SHELF.once(model_dir(), lambda d: load_embedder(d))
    return embedder
