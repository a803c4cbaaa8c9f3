"""The fitted numbers of ranking (``protocol.retrieval.fusion.Ranking``).

Invariant: written by ``python -m bench.fit_ranking --write`` from the TUNING half of
bench/retrieval_data only (the test half is never read by the fit); edit by refitting.
On the tuning half: logistic MRR 0.889, recall@3 0.947, empty on no-answer 0.281; rrf
MRR 0.837, recall@3 0.906, empty on no-answer 0.281; logistic kept.
"""

from __future__ import annotations

from protocol.retrieval.fusion import Fusion, Ranking

RANKING = Ranking(
    fusion=Fusion.LOGISTIC,
    intercept=-7.5369,
    w_vector=14.4102,
    w_lexical=0.1458,
    floor=0.04,
    close=0.05,
)
