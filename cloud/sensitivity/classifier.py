"""The cloud's second sensitivity classifier: a softmax over the 384-d sentence embedding.

Invariants:
- Pure: the model arrives as bytes (``models/sensitivity/model.json``, written by
  ``models/build_sensitivity.py``); nothing here opens a file, reads a clock or draws
  randomness. Run time needs numpy only.
- A model is tied to the embedder it was trained over: ``from_bytes`` refuses one whose
  ``embedder_model_id`` differs from the embedder it will be fed
  (``SensitivityModelMismatch`` names both), since vectors of another model mean nothing
  to its weights.
- A sentence is sensitive when the probability of ``normal`` is below the model's
  ``normal_floor`` (tuned on the tuning half, leaning to "sensitive": a false sensitive
  only makes a record wait for confirmation), and then its class is the likeliest
  sensitive one. A row's verdict does not depend on the rest of its batch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from protocol.model import Sensitivity

FORMAT = "memsync-sensitivity-v1"
DIM = 384
CLASSES: tuple[Sensitivity, ...] = tuple(Sensitivity)  # normal first, then the special ones
DEFAULT_MODEL_NAME = "cloud-sensitivity-v1"


class SensitivityModelMismatch(ValueError):
    """The model file is not one this code can use with this embedder."""


@dataclass(frozen=True, slots=True)
class ClassifierVerdict:
    sensitivity: Sensitivity
    normal: float  # the probability of ``normal``
    score: float  # the probability of ``sensitivity`` (of normal when normal)


class SensitivityClassifier:
    """A linear softmax over sentence embeddings, ``CLASSES`` wide."""

    def __init__(
        self,
        weights: npt.NDArray[np.float32],
        bias: npt.NDArray[np.float32],
        normal_floor: float,
        model_id: str,
        embedder_model_id: str,
    ) -> None:
        """Use :meth:`from_bytes`; this only checks the shapes and stores them."""
        if weights.shape != (DIM, len(CLASSES)) or bias.shape != (len(CLASSES),):
            raise SensitivityModelMismatch(
                f"weights {weights.shape} and bias {bias.shape}; expected "
                f"({DIM}, {len(CLASSES)}) and ({len(CLASSES)},)"
            )
        if not 0.0 < normal_floor <= 1.0:
            raise SensitivityModelMismatch(f"normal_floor {normal_floor} is not in (0, 1]")
        self.weights = weights
        self.bias = bias
        self.normal_floor = normal_floor
        self.model_id = model_id
        self.embedder_model_id = embedder_model_id

    @classmethod
    def from_bytes(
        cls, data: bytes, *, embedder_model_id: str | None = None
    ) -> SensitivityClassifier:
        """Load ``model.json``; ``SensitivityModelMismatch`` if it is another format, other
        classes, or trained over another embedder than ``embedder_model_id`` (when given)."""
        try:
            doc: dict[str, Any] = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SensitivityModelMismatch(f"not a sensitivity model: {exc}") from exc
        if doc.get("format") != FORMAT:
            raise SensitivityModelMismatch(
                f"format {doc.get('format')!r}; this code reads {FORMAT!r}"
            )
        classes = tuple(doc.get("classes", ()))
        if classes != tuple(c.value for c in CLASSES):
            raise SensitivityModelMismatch(
                f"classes {list(classes)}; expected {[c.value for c in CLASSES]}"
            )
        trained_over = str(doc.get("embedder_model_id"))
        if embedder_model_id is not None and trained_over != embedder_model_id:
            raise SensitivityModelMismatch(
                f"the sensitivity model was trained over embedder {trained_over}, not "
                f"{embedder_model_id}; run `make model` to rebuild it"
            )
        digest = hashlib.sha256(data).hexdigest()[:12]
        return cls(
            np.asarray(doc["weights"], dtype=np.float32),
            np.asarray(doc["bias"], dtype=np.float32),
            float(doc["normal_floor"]),
            f"{doc.get('name', DEFAULT_MODEL_NAME)}@{digest}",
            trained_over,
        )

    def probabilities(self, vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
        """``(n, len(CLASSES))`` class probabilities, one row per embedding row."""
        x = np.asarray(vectors, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != DIM:
            raise ValueError(f"embeddings of shape {x.shape}; expected (n, {DIM})")
        # row by row: a row's arithmetic must not depend on its batch
        if not len(x):
            return np.zeros((0, len(CLASSES)), dtype=np.float64)
        logits = np.stack([row @ self.weights for row in x]).astype(np.float64)
        return softmax(logits + self.bias.astype(np.float64))

    def classify(self, vectors: npt.NDArray[np.float32]) -> list[ClassifierVerdict]:
        """One verdict per embedding row."""
        return decide(self.probabilities(vectors), self.normal_floor)

    def __repr__(self) -> str:
        return f"SensitivityClassifier({self.model_id!r})"


def softmax(logits: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    out: npt.NDArray[np.float64] = e / e.sum(axis=1, keepdims=True)
    return out


def decide(probabilities: npt.NDArray[np.float64], normal_floor: float) -> list[ClassifierVerdict]:
    """Probabilities to verdicts: sensitive below the floor, as the likeliest sensitive class."""
    out: list[ClassifierVerdict] = []
    for row in probabilities:
        normal = float(row[0])
        if normal >= normal_floor:
            out.append(ClassifierVerdict(Sensitivity.NORMAL, normal, normal))
            continue
        best = 1 + int(np.argmax(row[1:]))
        out.append(ClassifierVerdict(CLASSES[best], normal, float(row[best])))
    return out


def model_document(
    weights: npt.NDArray[np.float32],
    bias: npt.NDArray[np.float32],
    normal_floor: float,
    embedder_model_id: str,
    training: dict[str, Any],
    name: str = DEFAULT_MODEL_NAME,
) -> bytes:
    """The bytes of ``model.json`` (sorted keys, float32 values: the same inputs always
    give the same bytes)."""
    doc = {
        "format": FORMAT,
        "name": name,
        "classes": [c.value for c in CLASSES],
        "embedder_model_id": embedder_model_id,
        "normal_floor": round(float(normal_floor), 4),
        "weights": _floats(weights),
        "bias": _floats(bias),
        "training": training,
    }
    return (json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n").encode()


def _floats(array: npt.NDArray[np.float32]) -> Any:
    values: Sequence[Any] = np.asarray(array, dtype=np.float32).tolist()
    return values


__all__ = [
    "CLASSES",
    "ClassifierVerdict",
    "SensitivityClassifier",
    "SensitivityModelMismatch",
    "decide",
    "model_document",
]
