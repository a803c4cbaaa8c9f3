"""The detector's last few answers, so a sentence just said is not read again when it is
remembered (``device.ops.detect``: ``say`` reads it, ``remember`` asks again).

Invariants:
- A hit returns exactly what the detector returned for the same list of sentences
  (the whole list is the key, so a batch's numbers are never mixed with another's) and
  the same model object: a swapped or reloaded detector never answers from the memo.
- The memo holds no words: a key is a BLAKE2b digest keyed by a random per-process key,
  so the entries cannot be read back or confirmed from a copy of them; values are
  labels and scores only. At most ``SIZE`` entries, the oldest dropped first.
- Thread-safe: one lock around each look-up and store; the detector runs outside it.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

from protocol.detection.labels import Detection

SIZE = 16
_KEY = secrets.token_bytes(32)  # never leaves this process; keys the digests only
_SEP = b"\x1f"


def _digest(sentences: Sequence[str]) -> bytes:
    h = hashlib.blake2b(key=_KEY, digest_size=32)
    for sentence in sentences:
        h.update(sentence.encode("utf-8", "surrogatepass"))
        h.update(_SEP)
    h.update(len(sentences).to_bytes(4, "big"))
    return h.digest()


class DetectionMemo:
    """The last ``size`` answers, by digest of the sentences asked about."""

    def __init__(self, size: int = SIZE) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[bytes, tuple[object, tuple[Detection, ...], str]] = OrderedDict()

    def detect(
        self,
        model: object,
        sentences: Sequence[str],
        run: Callable[[Sequence[str]], list[Detection]],
        model_id: str,
    ) -> tuple[list[Detection], str]:
        """``run(sentences)`` and ``model_id``, or the memo's copy of that answer from the
        same ``model``."""
        key = _digest(sentences)
        with self._lock:
            held = self._entries.get(key)
            if held is not None and held[0] is model and held[2] == model_id:
                self._entries.move_to_end(key)
                return list(held[1]), held[2]
        detections = run(sentences)
        with self._lock:
            self._entries[key] = (model, tuple(detections), model_id)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return list(detections), model_id

    def __len__(self) -> int:
        return len(self._entries)
