"""What a side hands the pipeline: the records the indexes proposed, the records
related to them, the successors of outdated ones up to their chain's current
statement, and their companions, each as its authoritative ``Candidate``.

Invariant: device and cloud gather the same way (this function); only how they read
an index or a record differs, and they pass that in. Ids are loaded once each, in
sorted order, so the result does not depend on index order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from protocol.model import RecordContent
from protocol.retrieval.task import Candidate, Relation, SearchHits

Load = Callable[[Iterable[str], dict[str, Candidate]], None]
Related = Callable[[dict[str, RecordContent]], Mapping[str, Sequence[tuple[str, Relation]]]]


RELATED_SEEDS = 10  # relations are followed from this many of the best hits of each index
MAX_CHAIN = 32  # supersedes links followed from an outdated hit to its current statement


def seeds_of(lexical: Mapping[str, float], vector: Mapping[str, float]) -> set[str]:
    """The hits whose relations are followed: the best few of each index. A related
    record scores a share of its hit's relevance, so a weak hit's neighbours could not
    make the smallest subset anyway; following every hit's relations only costs reads."""
    best: set[str] = set()
    for scores in (lexical, vector):
        ranked = sorted(scores, key=lambda i: (-scores[i], i))
        best.update(ranked[:RELATED_SEEDS])
    return best


def gather(
    *,
    lexical: Mapping[str, float],
    vector: Mapping[str, float],
    vector_searched: bool,
    load: Load,
    related: Related,
) -> tuple[list[Candidate], SearchHits]:
    """``load(ids, into)`` adds the candidates of the ids not yet in ``into``;
    ``related(contents)`` gives each record's relation-term neighbours."""
    found: dict[str, Candidate] = {}
    load([*lexical, *vector], found)
    edges: dict[str, list[tuple[str, Relation]]] = {}
    seeds = seeds_of(lexical, vector)
    readable = {
        i: c.content for i, c in sorted(found.items()) if c.content is not None and i in seeds
    }
    for record_id, links in related(readable).items():
        edges.setdefault(record_id, []).extend(links)
    for record_id, c in sorted(found.items()):
        links = edges.setdefault(record_id, [])
        links.extend((other, Relation.CONFLICT) for other in c.conflicts_with)
        if c.superseded_by is not None:
            links.append((c.superseded_by, Relation.SUPERSEDES))
    load((other for links in edges.values() for other, _ in links), found)
    for _ in range(MAX_CHAIN):  # each outdated record's chain, up to its current statement
        successors = {c.superseded_by for c in found.values() if c.superseded_by} - set(found)
        if not successors:
            break
        load(successors, found)
    for c in list(found.values()):  # companions the smallest subset may bring along
        load([*c.conflicts_with, *c.supersedes], found)
    hits = SearchHits(
        lexical=dict(lexical),
        vector=dict(vector),
        related={k: tuple(v) for k, v in edges.items() if v},
        vector_searched=vector_searched,
    )
    return list(found.values()), hits
