"""The in-memory vector index: one contiguous int8 matrix (and a scale per row) per
database file and model, kept in step with ``record_vectors``.

Invariants:
- It mirrors ``record_vectors`` rows of one model at one ``search_state.generation``.
  Every index write in this process updates it in place (``upsert``/``remove``) and moves
  it to the generation that write set; a generation it did not see (another process or
  connection wrote, or a transaction rolled back) makes the next query rebuild it from
  the database. Generations are random tokens, so a rolled-back one is never reused.
- A removed record's row leaves the matrix at once and its bytes are overwritten.
- Scores are the stored cosines exactly as ``protocol.retrieval.vectors.nearest``
  computes them (int8 row dequantised to float32, dot the query, times the row's
  scale); the top k break ties by record id, so the answer does not depend on the
  order rows were added in (a rebuilt matrix is in record-id order, as before).
- BLAS runs on one thread (``device.threads``), like the ONNX session.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from device import threads
from protocol.embedding import DIM
from protocol.retrieval import vectors

SCAN_ROWS = 1024  # rows dequantised at a time: a float32 slice stays in the L2 cache


class VectorIndex:
    """The vectors of one model in one database, as one growable int8 matrix."""

    def __init__(self, model_id: str, generation: int, ids: Sequence[str], packed: vectors.Packed):
        threads.pin_blas()
        self.model_id = model_id
        self.generation = generation
        self._lock = threading.Lock()
        n = len(ids)
        capacity = max(1024, n + n // 4)
        self._values = np.zeros((capacity, DIM), dtype=np.int8)
        self._scales = np.zeros(capacity, dtype=np.float32)
        self._values[:n] = packed.values
        self._scales[:n] = packed.scales
        self._ids: list[str] = list(ids)
        self._pos: dict[str, int] = {record_id: i for i, record_id in enumerate(self._ids)}

    @property
    def rows(self) -> int:
        return len(self._ids)

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._ids)

    def upsert(self, record_id: str, blob: bytes) -> None:
        """Set the record's row to a stored vector (``vectors.pack``'s bytes)."""
        one = vectors.stack([blob], DIM)
        with self._lock:
            i = self._pos.get(record_id)
            if i is None:
                i = len(self._ids)
                if i == self._values.shape[0]:
                    self._grow()
                self._ids.append(record_id)
                self._pos[record_id] = i
            self._values[i] = one.values[0]
            self._scales[i] = one.scales[0]

    def _grow(self) -> None:
        capacity = 2 * self._values.shape[0]
        values = np.zeros((capacity, DIM), dtype=np.int8)
        scales = np.zeros(capacity, dtype=np.float32)
        n = len(self._ids)
        values[:n] = self._values[:n]
        scales[:n] = self._scales[:n]
        self._values[:n] = 0  # the old copy keeps no vector
        self._values, self._scales = values, scales

    def remove(self, record_id: str) -> None:
        """Take the record's row out (the last row moves into its place, then is zeroed)."""
        with self._lock:
            i = self._pos.pop(record_id, None)
            if i is None:
                return
            last = len(self._ids) - 1
            if i != last:
                moved = self._ids[last]
                self._values[i] = self._values[last]
                self._scales[i] = self._scales[last]
                self._ids[i] = moved
                self._pos[moved] = i
            self._ids.pop()
            self._values[last] = 0
            self._scales[last] = 0.0

    def contains(self, record_id: str) -> bool:
        with self._lock:
            return record_id in self._pos

    def nearest(self, query: npt.NDArray[np.float32], k: int) -> list[tuple[str, float]]:
        """The ``k`` records closest to a normalised query: (id, cosine), best first,
        ties by record id."""
        q = np.asarray(query, dtype=np.float32)
        with self._lock:
            n = len(self._ids)
            if n == 0 or k <= 0:
                return []
            sims = np.empty(n, dtype=np.float32)
            buf = np.empty((min(SCAN_ROWS, n), DIM), dtype=np.float32)
            for start in range(0, n, SCAN_ROWS):
                stop = min(n, start + SCAN_ROWS)
                block = buf[: stop - start]
                np.copyto(block, self._values[start:stop], casting="unsafe")
                np.dot(block, q, out=sims[start:stop])
            sims *= self._scales[:n]
            k = min(k, n)
            kth = np.partition(sims, n - k)[n - k]  # the k-th best score
            top = np.flatnonzero(sims >= kth)  # every row tied with it too
            ids = self._ids
            order = sorted(top.tolist(), key=lambda i: (-float(sims[i]), ids[i]))[:k]
            return [(ids[i], float(sims[i])) for i in order]
