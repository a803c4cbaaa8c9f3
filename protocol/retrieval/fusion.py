"""How lexical and vector evidence become one relevance, and what counts as a hit.

Invariants:
- Evidence is absolute: a record's probability of being relevant is a logistic model of
  its own cosine and its own bm25 score (``evidence``), fitted once on the score
  distributions of the tuning half of bench/retrieval_data (``protocol.retrieval.fitted``).
  Nothing is normalised by the best score of the query, so an incidental shared word
  never earns the full lexical share.
- The floor is a property of the question: when no record's evidence reaches the fitted
  floor, nothing is relevant and the answer is empty. When one does, every proposed
  record is a hit, ranked; the smallest subset keeps those close to the best one (a
  paraphrase's answer scores low in absolute terms, and so does everything around it).
- ``Fusion.RRF`` orders the hits by reciprocal-rank fusion of the two indexes instead;
  the floor still reads the absolute evidence (ranks alone cannot say "nothing").
- Pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import assert_never


class Fusion(StrEnum):
    LOGISTIC = "logistic"  # relevance is the evidence itself
    RRF = "rrf"  # relevance is the reciprocal-rank fusion of the two indexes


@dataclass(frozen=True, slots=True, kw_only=True)
class Ranking:
    """The fitted numbers of ranking (see ``protocol.retrieval.fitted`` for how)."""

    fusion: Fusion
    intercept: float
    w_vector: float  # per unit of cosine
    w_lexical: float  # per unit of log(1 + bm25)
    floor: float  # when no record's evidence reaches it, the answer is empty
    close: float  # smallest subset: keep hits within this share of the best score
    rrf_k: float = 60.0


def evidence(r: Ranking, lexical: float, vector: float) -> float:
    """The fitted probability that a record with these raw index scores is relevant."""
    z = r.intercept + r.w_vector * vector + r.w_lexical * math.log1p(max(lexical, 0.0))
    return 1.0 / (1.0 + math.exp(-z))


def _ranks(scores: Mapping[str, float]) -> dict[str, int]:
    order = sorted(scores, key=lambda i: (-scores[i], i))
    return {record_id: n for n, record_id in enumerate(order, start=1)}


def relevances(
    r: Ranking, lexical: Mapping[str, float], vector: Mapping[str, float]
) -> dict[str, tuple[float, float]]:
    """Each record either index proposed: (relevance used to rank it, its evidence);
    nothing when no record's evidence reaches the floor."""
    ids = sorted(set(lexical) | set(vector))
    proof = {i: evidence(r, lexical.get(i, 0.0), vector.get(i, 0.0)) for i in ids}
    if not proof or max(proof.values()) < r.floor:
        return {}
    kept = ids
    match r.fusion:
        case Fusion.LOGISTIC:
            return {i: (proof[i], proof[i]) for i in kept}
        case Fusion.RRF:
            lex_rank, vec_rank = _ranks(lexical), _ranks(vector)

            def fused(i: str) -> float:
                total = 0.0
                for ranks in (lex_rank, vec_rank):
                    if i in ranks:
                        total += 1.0 / (r.rrf_k + ranks[i])
                return total * (r.rrf_k + 1) / 2  # 1.0 for the first of both indexes

            return {i: (fused(i), proof[i]) for i in kept}
        case _:
            assert_never(r.fusion)
