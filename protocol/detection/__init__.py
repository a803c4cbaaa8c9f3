"""The on-device memory-candidate detector: hashed text features and a small ONNX model.

``features`` turns text into numbers, ``labels`` names the heads' columns and decodes
them, ``model`` runs the ONNX graph over bytes handed in. Pure: no file, clock or
randomness (see docs/detector.md for the data and the model).
"""

from protocol.detection.features import FEATURES_VERSION, N_FEATURES, featurise
from protocol.detection.labels import (
    CANDIDATE_THRESHOLD,
    CONTENT_TYPES,
    SENSITIVITIES,
    TIME_KINDS,
    Detection,
    decode,
)
from protocol.detection.model import Detector, DetectorMismatch

__all__ = [
    "CANDIDATE_THRESHOLD",
    "CONTENT_TYPES",
    "FEATURES_VERSION",
    "N_FEATURES",
    "SENSITIVITIES",
    "TIME_KINDS",
    "Detection",
    "Detector",
    "DetectorMismatch",
    "decode",
    "featurise",
]
