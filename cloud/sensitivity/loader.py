"""The cloud's sensitivity classifier, loaded once per process from the file ``make model``
builds.

Invariants: nothing is downloaded, ever. The folder is ``$MEMSYNC_SENSITIVITY_DIR`` when
set, else ``models/sensitivity`` at the root of the checkout this package lives in; a
missing ``model.json`` raises ``SensitivityModelMissing`` naming it, and a model trained
over another embedder raises ``SensitivityModelMismatch`` naming both. One classifier
per (folder, embedder) per process; it is read-only, so threads share it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from cloud.errors import SensitivityModelMissing
from cloud.sensitivity.classifier import SensitivityClassifier

SENSITIVITY_DIR_ENV = "MEMSYNC_SENSITIVITY_DIR"
MODEL_FILE = "model.json"

_lock = threading.Lock()
_loaded: dict[tuple[Path, str], SensitivityClassifier] = {}


def classifier_dir() -> Path:
    """Where the classifier's model file is looked for."""
    configured = os.environ.get(SENSITIVITY_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path(__file__).resolve().parent.parent.parent / "models" / "sensitivity"


def load_classifier(directory: Path, embedder_model_id: str) -> SensitivityClassifier:
    """A new classifier from ``directory`` for vectors of ``embedder_model_id``."""
    model = directory / MODEL_FILE
    if not model.is_file():
        raise SensitivityModelMissing(model)
    return SensitivityClassifier.from_bytes(model.read_bytes(), embedder_model_id=embedder_model_id)


def default_classifier(embedder_model_id: str) -> SensitivityClassifier:
    """The process-wide classifier of :func:`classifier_dir`, loaded on first use."""
    key = (classifier_dir().resolve(), embedder_model_id)
    with _lock:
        found = _loaded.get(key)
        if found is None:
            found = _loaded[key] = load_classifier(*key)
        return found
