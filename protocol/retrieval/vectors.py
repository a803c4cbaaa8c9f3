"""Stored sentence vectors: int8 with one scale per vector, and exact top-k by cosine.

Invariants: vectors are L2-normalised before they are stored; a stored vector is
``4-byte little-endian float32 scale`` + ``dim`` int8 values and reads back within
1/254 of each component; search is exhaustive (exact), deterministic, and ties break
by position so the same index answers the same query the same way on every side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


def pack(vector: npt.NDArray[np.float32]) -> bytes:
    v = np.asarray(vector, dtype=np.float32)
    peak = float(np.max(np.abs(v))) if v.size else 0.0
    scale = peak / 127.0 if peak > 0 else 1.0
    q = np.clip(np.rint(v / scale), -127, 127).astype(np.int8)
    head: bytes = np.float32(scale).tobytes()
    body: bytes = q.tobytes()
    return head + body


def unpack(blob: bytes, dim: int) -> npt.NDArray[np.float32]:
    if len(blob) != 4 + dim:
        raise ValueError(f"a stored vector of dimension {dim} has {4 + dim} bytes, not {len(blob)}")
    scale = np.frombuffer(blob[:4], dtype=np.float32)[0]
    out: npt.NDArray[np.float32] = np.frombuffer(blob[4:], dtype=np.int8).astype(np.float32) * scale
    return out


@dataclass(frozen=True, slots=True)
class Packed:
    """Many stored vectors kept as int8 rows and their scales: 4x smaller than float32."""

    values: npt.NDArray[np.int8]  # (n, dim)
    scales: npt.NDArray[np.float32]  # (n,)

    @property
    def rows(self) -> int:
        return int(self.values.shape[0])


def stack(blobs: Sequence[bytes], dim: int) -> Packed:
    """Many stored vectors as one int8 matrix and a scale per row."""
    if not blobs:
        return Packed(np.zeros((0, dim), dtype=np.int8), np.zeros(0, dtype=np.float32))
    raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), 4 + dim)
    scales = raw[:, :4].copy().view(np.float32).reshape(-1)
    values = raw[:, 4:].copy().view(np.int8)
    return Packed(values, scales)


CHUNK = 8192


def nearest(packed: Packed, query: npt.NDArray[np.float32], k: int) -> list[tuple[int, float]]:
    """Row positions and cosines of the ``k`` rows closest to a normalised query."""
    if packed.rows == 0 or k <= 0:
        return []
    q = np.asarray(query, dtype=np.float32)
    sims = np.empty(packed.rows, dtype=np.float32)
    for start in range(0, packed.rows, CHUNK):  # dequantise a slice at a time
        block = packed.values[start : start + CHUNK].astype(np.float32)
        sims[start : start + CHUNK] = (block @ q) * packed.scales[start : start + CHUNK]
    k = min(k, packed.rows)
    top = np.argpartition(-sims, k - 1)[:k]
    order = sorted(top.tolist(), key=lambda i: (-float(sims[i]), i))
    return [(i, float(sims[i])) for i in order]
