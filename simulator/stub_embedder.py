"""A stub sentence embedder for simulated devices where retrieval is not under test.

Invariants: deterministic (a text's vector depends on the text alone: hashed words, no
randomness, no model files), cheap (no onnxruntime), the device's dimension
(``protocol.embedding.DIM``), every row L2-normalised; its ``model_id`` says it is a
stub, so its vectors are never compared with a real model's (each vector names the
model that made it). A fleet opts in per device (``device.search.assign_embedder``);
nothing in the device's own code knows it exists.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from protocol.embedding import DIM

STUB_MODEL_ID = "simulator-stub-embedder@hashed-words-v1"
_WORD = re.compile(r"\w+")


class StubEmbedder:
    """Hashed bag of words: each lower-cased word adds ±1 at a place its hash picks."""

    model_id = STUB_MODEL_ID

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if isinstance(texts, str):
            raise TypeError("embed takes a sequence of texts, not one str")
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{row}] is {type(text).__name__}, not str")
            for word in _WORD.findall(text.lower()) or [""]:
                digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
                place = int.from_bytes(digest[:3], "big") % DIM
                out[row, place] += 1.0 if digest[3] & 1 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm == 0.0:  # every word cancelled out: a fixed unit vector
                out[row, 0] = 1.0
            else:
                out[row] /= norm
        return out

    def __repr__(self) -> str:
        return f"StubEmbedder({self.model_id!r})"


STUB = StubEmbedder()
EMBEDDERS = ("stub", "model")  # what a fleet's devices embed with: the stub or the real model
