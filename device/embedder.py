"""The device's sentence embedder: the files ``make model`` builds, loaded once per process.

Invariants: nothing is downloaded, ever. The folder is ``$MEMSYNC_MODEL_DIR`` when set,
else ``models/embedder`` at the root of the checkout this package lives in; a missing
file raises ``ModelMissing`` naming it. One ``Embedder`` per folder per process (it is
safe to share between threads); it runs on one core, the device's budget. The model id
is known without building an onnxruntime session: ``MANIFEST.json`` beside the model
names it, trusted only when its sha256 is the model file's own (else the session says);
either way it is the id the session would give. The session is built on first ``embed``.
The finding and loading is ``protocol.model_files``, shared with the cloud; this module
hands it the device's environment, paths, locks and error.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from device.errors import ModelMissing
from protocol import model_files
from protocol.model_files import MANIFEST_FILE, MODEL_FILE, THREADS, TOKENIZER_FILE

if TYPE_CHECKING:
    from protocol.embedding import Embedder

MODEL_DIR_ENV = model_files.EMBEDDER.env
__all__ = [
    "MANIFEST_FILE",
    "MODEL_DIR_ENV",
    "MODEL_FILE",
    "THREADS",
    "TOKENIZER_FILE",
    "LazyEmbedder",
    "default_embedder",
    "load_embedder",
    "manifest_model_id",
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


def manifest_model_id(directory: Path) -> str | None:
    """The model id ``MANIFEST.json`` names, if its sha256 is that of the model file
    beside it; else None (``ModelMissing`` if a file is not there)."""
    return model_files.folder_model_id(_SHELF, directory)


class LazyEmbedder(model_files.LazyEmbedder[Path]):
    """An embedder whose id is known at once and whose session is built on first use."""

    def __init__(self, directory: Path, *, threads: int = THREADS) -> None:
        super().__init__(_SHELF, directory, threading.Lock(), threads=threads)


def default_embedder() -> LazyEmbedder:
    """The process-wide embedder for :func:`model_dir`, its session built on first use."""
    directory = model_dir()
    _SHELF.check(directory)  # a missing model is named now, not at the first embed
    embedder: LazyEmbedder = _SHELF.once(directory, LazyEmbedder)
    return embedder
