"""Stored vectors: int8 round trip, exact and deterministic nearest neighbours."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from protocol.retrieval.vectors import CHUNK, nearest, pack, stack, unpack

DIM = 384


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


@given(st.integers(0, 10_000))
def test_pack_round_trips_within_one_step(seed: int) -> None:
    v = unit(seed)
    blob = pack(v)
    assert len(blob) == 4 + DIM
    back = unpack(blob, DIM)
    assert np.max(np.abs(back - v)) <= np.max(np.abs(v)) / 254 + 1e-7
    assert float(back @ v) > 0.998  # worst case over many seeds: ~0.9988


def test_nearest_is_exact_across_chunks_and_breaks_ties_by_position() -> None:
    n = CHUNK + 5
    rows = [unit(i) for i in range(n)]
    packed = stack([pack(r) for r in rows], DIM)
    query = rows[CHUNK + 3]
    found = nearest(packed, query, 3)
    assert found[0][0] == CHUNK + 3 and found[0][1] > 0.999
    exact = np.array([float(r @ query) for r in rows])
    assert [i for i, _ in found] == list(np.argsort(-exact, kind="stable")[:3])
    twins = stack([pack(rows[0]), pack(rows[0])], DIM)
    assert [i for i, _ in nearest(twins, rows[0], 2)] == [0, 1]
    assert nearest(stack([], DIM), query, 3) == []
