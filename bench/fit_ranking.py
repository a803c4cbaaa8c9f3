"""Refit ``protocol/retrieval/fitted.py`` from the TUNING half of bench/retrieval_data.

``python -m bench.fit_ranking`` (``--write`` rewrites fitted.py; ``--curves`` prints the
floor and subset trade-offs). Invariants: the test half is never loaded; the fit is
deterministic (Newton's method on a fixed data order, fixed grids); every query goes
through the same protocol pipeline the device runs (``retrieve``), after the device's
own ``gather``, so the fitted numbers are judged on what a user would be shown.

The fit, in order:
1. the evidence model: logistic regression of "this record is relevant" on its cosine
   and log(1 + bm25), over every (tuning query, proposed record) pair;
2. the floor: the evidence threshold that maximises MRR on answerable queries (an empty
   answer scores zero) among thresholds whose empty rate on no-answer queries is at
   least ``BASELINE_EMPTY`` (what the constant 0.30 floor reached on this half before
   tuning: a fitted floor may never be more confidently wrong); of equal MRRs the highest;
3. ``close``: the share of the best score the smallest subset keeps: the largest (the
   fewest lines) of those maximising MRR plus "all relevant in the first five" on
   multi-record queries, so multi-record answers stay whole;
4. the fusion: logistic relevance against reciprocal-rank fusion with the same evidence
   (each with its own floor and ``close``); the better on tuning MRR is kept (both are
   reported). The lexical weight is also tried at fixed values for ranking; of equal
   tuning MRRs the calibrated fit of step 1 is kept.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import tempfile
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench import quality_data
from bench.retrieval_quality import Line, Outcome, load_person, outcome, summarise
from device import retrieval, search
from device.db import Database
from protocol.retrieval import fitted
from protocol.retrieval.fusion import Fusion, Ranking
from protocol.retrieval.pipeline import retrieve
from protocol.retrieval.restate import restate
from protocol.retrieval.task import Candidate, SearchHits, Task

BASELINE_EMPTY = 0.28125  # empty answers on tuning no-answer queries with the 0.30 floor
LINE_PRICE = 0.0  # per shown line beyond the relevant ones (none: answers stay whole)
FLOORS = [round(0.01 * i, 2) for i in range(1, 31)]
LEXICAL_WEIGHTS = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0]
CLOSES = [0.02, 0.05, 0.1, 0.15, *(round(0.05 * i, 2) for i in range(4, 20))]
FITTED = Path(fitted.__file__)


@dataclass(frozen=True, slots=True)
class Asked:
    query: quality_data.Query
    task: Task
    candidates: list[Candidate]
    hits: SearchHits
    relevant: set[Line]


def collect() -> list[Asked]:
    """Every tuning query's gathered candidates and raw index scores, from real devices."""
    people = quality_data.split(quality_data.load())["tuning"]
    out: list[Asked] = []
    with tempfile.TemporaryDirectory() as tmp:
        for person in people:
            loaded = load_person(Path(tmp) / person.name, person)
            try:
                db = loaded.agent._db  # the bench reads the device's own store
                for q in person.queries:
                    task = retrieval.task_for(q.text, person.asked_at)
                    candidates, hits = retrieval.gather(db, task, follow_all=True)  # refitted later
                    out.append(Asked(q, task, candidates, hits, loaded.relevant(q)))
            finally:
                loaded.agent.close()
    return out


def shown(a: Asked, ranking: Ranking) -> list[Line]:
    block = retrieve(dataclasses.replace(a.task, ranking=ranking), a.candidates, a.hits)
    return [(line.record_id, line.text) for line in block.lines if not line.outdated]


def outcomes(asked: Sequence[Asked], ranking: Ranking) -> list[Outcome]:
    return [outcome(a.query, shown(a, ranking), a.relevant) for a in asked]


def fit_logistic(asked: Sequence[Asked], l2: float = 1e-3) -> tuple[float, float, float]:
    text = {c.record_id: c.content.text for a in asked for c in a.candidates if c.content}
    rows, labels = [], []
    for a in asked:
        for rid in sorted(set(a.hits.lexical) | set(a.hits.vector)):
            lex, vec = a.hits.lexical.get(rid, 0.0), a.hits.vector.get(rid, 0.0)
            rows.append([1.0, vec, math.log1p(max(lex, 0.0))])
            labels.append(float((rid, text.get(rid, "")) in a.relevant))
    x, y = np.array(rows), np.array(labels)
    w = np.zeros(3)
    for _ in range(50):  # Newton's method, lightly regularised
        p = 1 / (1 + np.exp(-x @ w))
        grad = x.T @ (p - y) + l2 * w
        hess = (x * (p * (1 - p))[:, None]).T @ x + l2 * np.eye(3)
        w -= np.linalg.solve(hess, grad)
    return float(w[0]), float(w[1]), float(w[2])


def floor_objective(os: Sequence[Outcome]) -> tuple[bool, float]:
    """(admissible: at least as often empty on no-answer queries as before tuning,
    MRR on answerable queries)."""
    s = summarise(os)
    return s["empty_on_no_answer"] >= BASELINE_EMPTY, s["overall"]["mrr"]


def close_objective(asked: Sequence[Asked], ranking: Ranking) -> float:
    """MRR on answerable queries plus "all relevant in the first five" on multi-record
    ones, minus ``LINE_PRICE`` per line shown beyond the relevant ones."""
    os = outcomes(asked, ranking)
    s = summarise(os)
    extra = [
        max(0, len(shown(a, ranking)) - len(a.relevant)) for a in asked if a.query.kind != "none"
    ]
    return s["overall"]["mrr"] + s["all_in_five"] - LINE_PRICE * sum(extra) / len(extra)


def fit_floor(asked: Sequence[Asked], r: Ranking, curves: bool) -> tuple[Ranking, float]:
    scored = []
    for floor in FLOORS:
        ok, value = floor_objective(outcomes(asked, dataclasses.replace(r, floor=floor)))
        scored.append((ok, value, floor))
        if curves:
            print(f"  {r.fusion} w_lexical {r.w_lexical} floor {floor:.2f}: {ok} MRR {value:.3f}")
    ok, value, floor = max(scored)
    return dataclasses.replace(r, floor=floor), value if ok else -1.0


def fit(asked: Sequence[Asked], curves: bool) -> dict[Fusion, Ranking]:
    """Steps 1-4 of the module docstring; the lexical weight of step 1 is then refitted
    for ranking (``LEXICAL_WEIGHTS``, each with its own floor), keeping the best MRR."""
    b, wv, wl = fit_logistic(asked)
    base = Ranking(
        fusion=Fusion.LOGISTIC, intercept=b, w_vector=wv, w_lexical=wl, floor=0.0, close=0.6
    )
    best: dict[Fusion, Ranking] = {}
    for fusion in Fusion:
        tried = []
        for w in [wl, *LEXICAL_WEIGHTS] if fusion is Fusion.LOGISTIC else [wl]:
            r, value = fit_floor(
                asked, dataclasses.replace(base, fusion=fusion, w_lexical=w), curves
            )
            tried.append((value, w == wl, r))  # of equal MRRs, the calibrated fit
            print(f"{fusion} w_lexical {w:.3f}: floor {r.floor:.2f}, tuning MRR {value:.3f}")
        r = max(tried, key=lambda t: (round(t[0], 6), t[1]))[2]
        values = []
        for close in CLOSES:
            value = close_objective(asked, dataclasses.replace(r, close=close))
            values.append((value, close))
            if curves:
                print(f"{fusion} close {close:.2f}: objective={value:.3f}")
        best[fusion] = dataclasses.replace(
            r, close=max(values, key=lambda v: (round(v[0], 6), v[1]))[1]
        )
    return best


def write(r: Ranking, report: dict[Fusion, dict[str, float]]) -> None:
    summary = "; ".join(
        f"{f.value} MRR {v['mrr']:.3f}, recall@3 {v['recall@3']:.3f}, "
        f"empty on no-answer {v['empty']:.3f}"
        for f, v in report.items()
    )
    lines = [
        '"""The fitted numbers of ranking (``protocol.retrieval.fusion.Ranking``).',
        "",
        *textwrap.wrap(
            "Invariant: written by ``python -m bench.fit_ranking --write`` from the TUNING "
            "half of bench/retrieval_data only (the test half is never read by the fit); "
            f"edit by refitting. On the tuning half: {summary}; {r.fusion.value} kept.",
            88,
        ),
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from protocol.retrieval.fusion import Fusion, Ranking",
        "",
        "RANKING = Ranking(",
        f"    fusion=Fusion.{r.fusion.name},",
        f"    intercept={r.intercept:.4f},",
        f"    w_vector={r.w_vector:.4f},",
        f"    w_lexical={r.w_lexical:.4f},",
        f"    floor={r.floor:.2f},",
        f"    close={r.close:.2f},",
        ")",
        "",
    ]
    FITTED.write_text("\n".join(lines))


def restated_vector_hits(
    db: Database, query: str, limit: int = search.VECTOR_LIMIT
) -> dict[str, float]:
    """``--restate``: the nearest records to the normalised mean of the query's embedding
    and that of the statement that would answer it (``restate``). Measured, not adopted
    (docs/decisions.md, Issue 20 round two), so it lives here, not on the device."""
    stated = restate(query)
    if stated == query:
        return PLAIN_VECTOR_HITS(db, query, limit)
    m = search.vector_index(db)
    if not m.rows:
        return {}
    both = np.asarray(search.embedder_for(db).embed([query, stated]), dtype=np.float32)
    mean = both[0] + both[1]
    mean /= max(float(np.linalg.norm(mean)), 1e-12)
    return dict(m.nearest(mean, limit))


PLAIN_VECTOR_HITS = search.vector_hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--curves", action="store_true")
    parser.add_argument(
        "--restate",
        action="store_true",
        help="embed each question averaged with its restatement (measured; off by default)",
    )
    args = parser.parse_args()
    if args.write and args.restate:
        parser.error("--restate is a measurement: the device does not restate, so do not write")
    if args.restate:  # this process only: the device's vector leg, swapped for the measurement
        search.vector_hits = restated_vector_hits
    asked = collect()
    best = fit(asked, args.curves)
    report: dict[Fusion, dict[str, float]] = {}
    for fusion, r in best.items():
        s = summarise(outcomes(asked, r))
        report[fusion] = {**s["overall"], "empty": s["empty_on_no_answer"]}
        print(fusion, r)
        print("  tuning:", s["overall"], "kinds:", s["kinds"])
        print(f"  all in five {s['all_in_five']:.3f}, empty on no-answer ", end="")
        print(f"{s['empty_on_no_answer']:.3f}, empty on answerable {s['empty_on_answerable']:.3f}")
    kept = max(best.values(), key=lambda r: (report[r.fusion]["mrr"], r.fusion == Fusion.LOGISTIC))
    print("kept:", kept.fusion)
    if args.write:
        write(kept, report)
        print(f"wrote {FITTED}")


if __name__ == "__main__":
    main()
