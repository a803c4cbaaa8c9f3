"""The memory-candidate detector: ``features`` then a numeric ONNX model, one code path.

Invariants: pure apart from the onnxruntime session over bytes handed in (the loaders
in ``device.detector`` and ``cloud.detector`` read the file ``make model`` builds);
nothing here opens a file, reads a clock or draws randomness. A text's ``Detection``
depends only on the text and the model bytes, not on its batch: every row is computed
independently (features per text, then a row-wise linear map). The model must record
the ``FEATURES_VERSION`` and label vocabulary this code uses, else it is refused with
``DetectorMismatch``: a model trained on other features would give confident nonsense.
``model_id`` names the exact model bytes.

A ``Detector`` may be shared by threads: onnxruntime's ``run`` is thread-safe.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from protocol.detection.cues import is_short_chatter
from protocol.detection.features import FEATURES_VERSION, N_FEATURES, featurise, normalised
from protocol.detection.labels import CANDIDATE_THRESHOLD, HEADS, Detection, decode, vocabulary

BATCH = 256
DEFAULT_MODEL_NAME = "candidate-detector-v1"
INPUT = "features"

META_NAME = "memsync.model_name"
META_FEATURES = "memsync.features_version"
META_LABELS = "memsync.labels"
META_DATA = "memsync.training_data_sha256"


def short_chatter(texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Which texts are short chatter (``cues.is_short_chatter``): never candidates."""
    return np.array([is_short_chatter(normalised(t)) for t in texts], dtype=bool)


class DetectorMismatch(ValueError):
    """The model bytes are not a detector this code can run (other features or labels)."""


class Detector:
    """Decides, per text, whether it is a memory candidate and of what kind."""

    model_id: str
    threshold: float

    def __init__(self, session: Any, model_id: str, threshold: float) -> None:
        """Use :meth:`from_bytes`; this only stores what it built."""
        self._session = session
        self.model_id = model_id
        self.threshold = threshold

    @classmethod
    def from_bytes(
        cls, model_bytes: bytes, *, threads: int = 1, threshold: float = CANDIDATE_THRESHOLD
    ) -> Detector:
        """Load a detector model (``model.onnx``).

        ``threads`` is onnxruntime's intra-op thread count. Raises ``DetectorMismatch``
        if the model's features version, label vocabulary, input or outputs are not the
        ones this code produces and decodes.
        """
        if threads < 1:
            raise ValueError(f"threads must be at least 1, not {threads}")
        import onnxruntime as ort  # loaded only when a session is built

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])

        meta = session.get_modelmeta().custom_metadata_map
        found = meta.get(META_FEATURES)
        if found != FEATURES_VERSION:
            raise DetectorMismatch(
                f"the detector model was trained on features {found!r}, but this code "
                f"computes {FEATURES_VERSION!r}; rebuild it with `make model`"
            )
        labels = json.loads(meta.get(META_LABELS, "null"))
        if labels != vocabulary():
            raise DetectorMismatch(
                f"the detector model's labels {labels!r} are not {vocabulary()!r}; "
                "rebuild it with `make model`"
            )
        inputs = [(i.name, i.shape[-1]) for i in session.get_inputs()]
        outputs = sorted(o.name for o in session.get_outputs())
        if inputs != [(INPUT, N_FEATURES)] or outputs != sorted(HEADS):
            raise DetectorMismatch(
                f"not a detector: inputs {inputs}, outputs {outputs}; expected input "
                f"{INPUT!r} of width {N_FEATURES} and outputs {list(HEADS)}"
            )
        name = str(meta.get(META_NAME, DEFAULT_MODEL_NAME))
        digest = hashlib.sha256(model_bytes).hexdigest()[:12]
        return cls(session, f"{name}@{digest}", threshold)

    @property
    def metadata(self) -> dict[str, str]:
        """The model's metadata (features version, labels, training data digest)."""
        return dict(self._session.get_modelmeta().custom_metadata_map)

    def probabilities(self, texts: Sequence[str]) -> dict[str, np.ndarray[Any, Any]]:
        """Each head's raw output for ``texts``, batched by ``BATCH``; keys are ``HEADS``."""
        if isinstance(texts, str):
            raise TypeError("detect takes a sequence of texts, not one str")
        parts: dict[str, list[np.ndarray[Any, Any]]] = {head: [] for head in HEADS}
        for start in range(0, len(texts), BATCH):
            features = featurise(texts[start : start + BATCH])
            result = self._session.run(list(HEADS), {INPUT: features})
            for head, array in zip(HEADS, result, strict=True):
                parts[head].append(np.asarray(array, dtype=np.float32))
        if not texts:
            return {
                "candidate": np.zeros((0,), dtype=np.float32),
                **{
                    head: np.zeros((0, len(columns)), dtype=np.float32)
                    for head, columns in vocabulary().items()
                },
            }
        return {head: np.concatenate(arrays) for head, arrays in parts.items()}

    def detect(self, texts: Sequence[str]) -> list[Detection]:
        """One ``Detection`` per text, in the order given."""
        heads = self.probabilities(texts)
        return decode(
            heads["candidate"],
            heads["content_type"],
            heads["sensitivity"],
            heads["time_kind"],
            threshold=self.threshold,
            chatter=short_chatter(texts),
        )

    def __repr__(self) -> str:
        return f"Detector({self.model_id!r})"
