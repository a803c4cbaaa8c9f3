"""The device's memory-candidate detector: the file ``make model`` builds, loaded once.

Invariants: nothing is downloaded, ever. The folder is ``$MEMSYNC_DETECTOR_DIR`` when
set, else ``models/detector`` at the root of the checkout this package lives in; a
missing ``model.onnx`` raises ``DetectorMissing`` naming it, and a model built for other
features raises ``protocol.detection.DetectorMismatch``. One ``Detector`` per folder
per process (safe to share between threads); it runs on one core, the device's budget.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from device.errors import DetectorMissing
from protocol.detection import Detector

DETECTOR_DIR_ENV = "MEMSYNC_DETECTOR_DIR"
MODEL_FILE = "model.onnx"
THREADS = 1

_lock = threading.Lock()
_loaded: dict[Path, Detector] = {}


def detector_dir() -> Path:
    """Where the detector's model file is looked for."""
    configured = os.environ.get(DETECTOR_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path(__file__).resolve().parent.parent / "models" / "detector"


def load_detector(directory: Path, *, threads: int = THREADS) -> Detector:
    """A new ``Detector`` from ``directory``; ``DetectorMissing`` if the file is not there."""
    model = directory / MODEL_FILE
    if not model.is_file():
        raise DetectorMissing(model)
    return Detector.from_bytes(model.read_bytes(), threads=threads)


def default_detector() -> Detector:
    """The process-wide detector for :func:`detector_dir`, loaded on first use."""
    directory = detector_dir().resolve()
    with _lock:
        detector = _loaded.get(directory)
        if detector is None:
            detector = _loaded[directory] = load_detector(directory)
        return detector
