"""Sentence embeddings: all-MiniLM-L6-v2 run by onnxruntime, one code path for device and cloud.

Invariants: pure. The model arrives as bytes and the tokenizer as text (the loaders in
``device.embedder`` and ``cloud.embedder`` read the files ``make model`` builds);
nothing here opens a file, reads a clock or draws randomness. A sentence's vector
depends only on the sentence and the model bytes, not on the rest of its batch or the
batch's order: batches are padded explicitly and masked, and the model's arithmetic
is float32 (int8 weights are expanded once when the session is created). Every row is
L2-normalised, so a dot product is a cosine. ``model_id`` names the exact model bytes;
store it beside every vector, since vectors from different models do not compare.

An ``Embedder`` may be shared by threads: onnxruntime's ``run`` is thread-safe and the
tokenizer is only read after construction.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from tokenizers import Tokenizer

DIM = 384
MAX_TOKENS = 256  # the sentence model's limit; longer texts are truncated
BATCH = 32
DEFAULT_MODEL_NAME = "onnx-embedder"

_INPUTS = ("input_ids", "attention_mask")
_OUTPUT = "embedding"


class Embedder:
    """Turns texts into unit vectors of ``DIM`` float32 components."""

    model_id: str

    def __init__(self, session: Any, tokenizer: Tokenizer, model_id: str) -> None:
        """Use :meth:`from_bytes`; this only stores what it built."""
        self._session = session
        self._tokenizer = tokenizer
        self.model_id = model_id

    @classmethod
    def from_bytes(cls, model: bytes, tokenizer_json: str, *, threads: int = 1) -> Embedder:
        """Load an ONNX model (``model.onnx``) and a tokenizer (``tokenizer.json``).

        ``threads`` is onnxruntime's intra-op thread count; nodes run one at a time.
        Raises ``ValueError`` if the model does not have the expected inputs and output.
        """
        if threads < 1:
            raise ValueError(f"threads must be at least 1, not {threads}")
        # onnxruntime and tokenizers load only when a session is built (a CLI command
        # that embeds nothing never pays for them)
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(tokenizer_json)
        # The source tokenizer.json pads every input to 128 tokens: a padded [PAD] tail
        # would be averaged into every vector. Padding is done here, with a mask.
        tokenizer.no_padding()
        tokenizer.enable_truncation(MAX_TOKENS)

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        # Fold DequantizeLinear of constant int8 weights into float32 weights at load,
        # so the arithmetic is float32 and a vector does not depend on its batch.
        options.add_session_config_entry("session.disable_quant_qdq", "1")
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])

        inputs = tuple(sorted(i.name for i in session.get_inputs()))
        outputs = [o for o in session.get_outputs() if o.name == _OUTPUT]
        if inputs != tuple(sorted(_INPUTS)) or not outputs or outputs[0].shape[-1] != DIM:
            found = [(o.name, o.shape) for o in session.get_outputs()]
            raise ValueError(
                f"not a sentence embedder: inputs {list(inputs)}, outputs {found}; expected "
                f"inputs {list(_INPUTS)} and output {_OUTPUT!r} of shape [batch, {DIM}]"
            )
        meta = session.get_modelmeta().custom_metadata_map
        name = str(meta.get("memsync.model_name", DEFAULT_MODEL_NAME))
        digest = hashlib.sha256(model).hexdigest()[:12]
        return cls(session, tokenizer, f"{name}@{digest}")

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One L2-normalised row per text, in the order given; ``(0, DIM)`` for none."""
        if isinstance(texts, str):
            raise TypeError("embed takes a sequence of texts, not one str")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}] is {type(text).__name__}, not str")
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        tokens = [self._tokenizer.encode(text).ids for text in texts]
        # Similar lengths together, so little padding is computed; ties keep input order.
        order = sorted(range(len(tokens)), key=lambda i: (len(tokens[i]), i))
        for start in range(0, len(order), BATCH):
            rows = order[start : start + BATCH]
            out[rows] = self._run([tokens[i] for i in rows])
        return out

    def _run(self, batch: list[list[int]]) -> npt.NDArray[np.float32]:
        ids, mask = padded(batch)
        result = self._session.run([_OUTPUT], {"input_ids": ids, "attention_mask": mask})
        vectors: npt.NDArray[np.float32] = np.asarray(result[0], dtype=np.float32)
        return vectors

    def __repr__(self) -> str:
        return f"Embedder({self.model_id!r})"


def padded(batch: Sequence[Sequence[int]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Token ids padded with 0 to the batch's longest row, and the attention mask."""
    width = max(len(ids) for ids in batch)
    ids = np.zeros((len(batch), width), dtype=np.int64)
    mask = np.zeros((len(batch), width), dtype=np.int64)
    for row, tokens in enumerate(batch):
        ids[row, : len(tokens)] = tokens
        mask[row, : len(tokens)] = 1
    return ids, mask
