"""Finding and loading the ONNX models ``make model`` builds: the ONE loading code the
device and the cloud both use (``device/detector.py``, ``device/embedder.py``,
``cloud/detector.py``, ``cloud/embedder.py`` only wire it to their own errors).

Invariants:
- Nothing is downloaded, ever. A model's folder is ``$<its env variable>`` when set,
  else ``models/<its folder>`` under the checkout root the side names; a missing file
  raises the side's own error (``missing(path)``), naming the file.
- This module does no I/O of its own (the dependency rule): each side hands in its
  environment, its path type (``pathlib.Path``), a lock and its missing-file error;
  onnxruntime is imported only when a session is built.
- One model per folder per shelf per process (safe to share between threads), the
  folder resolved first, so two spellings of one folder share it.
- The embedder's model id is known without a session: ``MANIFEST.json`` beside the model
  names it, trusted only when its sha256 is the model file's own and the id ends in
  that digest; otherwise the session says. Either way it is the id the session gives.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeVar

if TYPE_CHECKING:
    from protocol.detection import Detector
    from protocol.embedding import Embedder

MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_FILE = "MANIFEST.json"
THREADS = 1  # each call runs on one core: the device's budget, the cloud's per request


class ModelPath(Protocol):
    """What this module needs of a path (``pathlib.Path`` has it)."""

    def __truediv__(self, name: str, /) -> Self: ...
    def is_file(self) -> bool: ...
    def read_bytes(self) -> bytes: ...
    def read_text(self, encoding: str) -> str: ...
    def resolve(self) -> Self: ...
    def expanduser(self) -> Self: ...


P = TypeVar("P", bound=ModelPath)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelKind:
    env: str  # the variable naming the folder
    folder: str  # the folder under ``models/`` of the checkout
    files: tuple[str, ...]  # what must be there


DETECTOR = ModelKind(env="MEMSYNC_DETECTOR_DIR", folder="detector", files=(MODEL_FILE,))
EMBEDDER = ModelKind(env="MEMSYNC_MODEL_DIR", folder="embedder", files=(MODEL_FILE, TOKENIZER_FILE))


def manifest_model_id(manifest: bytes | None, model: bytes) -> str | None:
    """The model id ``MANIFEST.json`` names, if its sha256 is that of ``model`` and the id
    ends in that digest (hashing 23 MB is far cheaper than building a session); else None."""
    if manifest is None:
        return None
    try:
        parsed = json.loads(manifest)
        claimed = parsed["outputs"][MODEL_FILE]["sha256"]
        model_id = parsed["model_id"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(model_id, str) or not isinstance(claimed, str):
        return None
    digest = hashlib.sha256(model).hexdigest()
    if digest != claimed or not model_id.endswith("@" + digest[:12]):
        return None
    return model_id


class Shelf(Generic[P]):
    """Where one kind of model is found on one side, and its loaded copies."""

    def __init__(
        self,
        kind: ModelKind,
        *,
        environ: Mapping[str, str],
        path: Callable[[str], P],
        checkout: P,
        lock: AbstractContextManager[Any],
        missing: Callable[[P], Exception],
    ) -> None:
        self.kind = kind
        self._environ = environ
        self._path = path
        self._checkout = checkout
        self._lock = lock
        self._missing = missing
        self._loaded: dict[str, Any] = {}

    def folder(self) -> P:
        """Where the model's files are looked for."""
        configured = self._environ.get(self.kind.env)
        if configured:
            return self._path(configured).expanduser()
        return self._checkout / "models" / self.kind.folder

    def check(self, directory: P) -> list[P]:
        """The model's files in ``directory``; the side's error for the first missing."""
        found = [directory / name for name in self.kind.files]
        for file in found:
            if not file.is_file():
                raise self._missing(file)
        return found

    def once(self, directory: P, make: Callable[[P], Any]) -> Any:
        """``make(directory)`` the first time this shelf is asked for ``directory``."""
        resolved = directory.resolve()
        with self._lock:
            key = str(resolved)
            if key not in self._loaded:
                self._loaded[key] = make(resolved)
            return self._loaded[key]


def load_detector(shelf: Shelf[P], directory: P, *, threads: int = THREADS) -> Detector:
    """A new ``Detector`` from ``directory``."""
    from protocol.detection import Detector

    [model] = shelf.check(directory)
    return Detector.from_bytes(model.read_bytes(), threads=threads)


def default_detector(shelf: Shelf[P]) -> Detector:
    """The process-wide detector of the shelf's folder, loaded on first use."""
    detector: Detector = shelf.once(shelf.folder(), lambda d: load_detector(shelf, d))
    return detector


def load_embedder(shelf: Shelf[P], directory: P, *, threads: int = THREADS) -> Embedder:
    """A new ``Embedder`` (its onnxruntime session built now) from ``directory``."""
    from protocol.embedding import Embedder  # onnxruntime only when a session is built

    model, tokenizer = shelf.check(directory)
    return Embedder.from_bytes(
        model.read_bytes(), tokenizer.read_text(encoding="utf-8"), threads=threads
    )


def folder_model_id(shelf: Shelf[P], directory: P) -> str | None:
    """``manifest_model_id`` of the files in ``directory``."""
    model, _tokenizer = shelf.check(directory)
    manifest_file = directory / MANIFEST_FILE
    manifest = manifest_file.read_bytes() if manifest_file.is_file() else None
    return manifest_model_id(manifest, model.read_bytes())


class LazyEmbedder(Generic[P]):
    """An embedder whose id is known at once and whose session is built on first use."""

    def __init__(
        self,
        shelf: Shelf[P],
        directory: P,
        lock: AbstractContextManager[Any],
        *,
        threads: int = THREADS,
    ) -> None:
        self._shelf = shelf
        self._directory = directory
        self._threads = threads
        self._lock = lock
        self._model_id: str | None = None
        self._embedder: Embedder | None = None

    @property
    def model_id(self) -> str:
        if self._model_id is None:
            found = folder_model_id(self._shelf, self._directory)
            self._model_id = found if found is not None else self.loaded().model_id
        return self._model_id

    def loaded(self) -> Embedder:
        """The real embedder (its onnxruntime session built now if it was not yet)."""
        with self._lock:
            if self._embedder is None:
                self._embedder = load_embedder(self._shelf, self._directory, threads=self._threads)
                self._model_id = self._embedder.model_id
            return self._embedder

    def embed(self, texts: Sequence[str]) -> Any:
        return self.loaded().embed(texts)

    def __repr__(self) -> str:
        return f"LazyEmbedder({self._directory})"
