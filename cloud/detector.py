"""The cloud's memory-candidate detector (the consolidator's ONNX extractor), loaded once.

Invariants: nothing is downloaded, ever. The folder is ``$MEMSYNC_DETECTOR_DIR`` when
set, else ``models/detector`` at the root of the checkout this package lives in; a
missing ``model.onnx`` raises ``DetectorMissing`` naming it, and a model built for other
features raises ``protocol.detection.DetectorMismatch``. One ``Detector`` per folder
per process (safe to share between threads); each call runs on one core.
The finding and loading is ``protocol.model_files``, shared with the device; this module
hands it the cloud's environment, paths, lock and error.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from cloud.errors import DetectorMissing
from protocol import model_files
from protocol.detection import Detector
from protocol.model_files import MODEL_FILE, THREADS

DETECTOR_DIR_ENV = model_files.DETECTOR.env
__all__ = [
    "DETECTOR_DIR_ENV",
    "MODEL_FILE",
    "THREADS",
    "default_detector",
    "detector_dir",
    "load_detector",
]

_SHELF = model_files.Shelf(
    model_files.DETECTOR,
    environ=os.environ,
    path=Path,
    checkout=Path(__file__).resolve().parent.parent,
    lock=threading.Lock(),
    missing=DetectorMissing,
)


def detector_dir() -> Path:
    """Where the detector's model file is looked for."""
    return _SHELF.folder()


def load_detector(directory: Path, *, threads: int = THREADS) -> Detector:
    """A new ``Detector`` from ``directory``; ``DetectorMissing`` if the file is not there."""
    return model_files.load_detector(_SHELF, directory, threads=threads)


def default_detector() -> Detector:
    """The process-wide detector for :func:`detector_dir`, loaded on first use."""
    return model_files.default_detector(_SHELF)
