"""What a side hands the pipeline: the records the indexes proposed, the records
related to them, the successors of outdated ones up to their chain's current
statement, and their companions, each as its authoritative ``Candidate``.

Invariants:
- Device and cloud gather the same way (this function); only how they read an index or
  a record differs, and they pass that in. Ids are loaded once each, in sorted order,
  so the result does not depend on index order.
- Given the task, relations are followed only from hits whose neighbours could still
  make the answer (``worth_following``): a neighbour scores at most its hit's relevance
  times the largest index-relation weight, and whatever the relations add, the
  ``limit``-th best score of the direct hits alone can only rise. So what ``retrieve``
  returns is exactly what following every seed would return, with fewer records read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from protocol.model import RecordContent
from protocol.retrieval.pipeline import searched_and_ranked
from protocol.retrieval.steps import RELATION_WEIGHT
from protocol.retrieval.task import Candidate, Relation, SearchHits, Task

Load = Callable[[Iterable[str], dict[str, Candidate]], None]
Related = Callable[[dict[str, RecordContent]], Mapping[str, Sequence[tuple[str, Relation]]]]


RELATED_SEEDS = 10  # relations are followed from this many of the best hits of each index
MAX_CHAIN = 32  # supersedes links followed from an outdated hit to its current statement
# what an index relation (not a record's own supersedes or conflict links) can carry over
INDEX_RELATION_SHARE = max(
    RELATION_WEIGHT[r] for r in (Relation.PERSON, Relation.PROJECT, Relation.EPISODE)
)


def seeds_of(lexical: Mapping[str, float], vector: Mapping[str, float]) -> set[str]:
    """The hits whose relations are followed: the best few of each index. A related
    record scores a share of its hit's relevance, so a weak hit's neighbours could not
    make the smallest subset anyway; following every hit's relations only costs reads."""
    best: set[str] = set()
    for scores in (lexical, vector):
        ranked = sorted(scores, key=lambda i: (-scores[i], i))
        best.update(ranked[:RELATED_SEEDS])
    return best


def worth_following(
    task: Task, found: Mapping[str, Candidate], seeds: set[str], hits: SearchHits
) -> set[str]:
    """The seeds whose index relations could bring a record into the answer. Only a
    record search scored on its own evidence is ever followed (``steps.search`` pulls
    neighbours from those alone), and searched on the direct hits alone (no relations,
    successors not yet read) every record scores at most what it scores in the full
    ranking, so the ``limit``-th best score here is a lower bound of the full one; a
    neighbour scores at most its seed's relevance times ``INDEX_RELATION_SHARE``."""
    searched, first = searched_and_ranked(task, found.values(), hits)
    scores = sorted((h.score for h in first.scored), reverse=True)
    bound = scores[task.limit - 1] if len(scores) >= task.limit else 0.0
    return {
        h.record_id
        for h in searched.scored
        if h.record_id in seeds and h.relevance * INDEX_RELATION_SHARE >= bound
    }


def gather(
    *,
    lexical: Mapping[str, float],
    vector: Mapping[str, float],
    vector_searched: bool,
    load: Load,
    related: Related,
    task: Task | None = None,
) -> tuple[list[Candidate], SearchHits]:
    """``load(ids, into)`` adds the candidates of the ids not yet in ``into``;
    ``related(contents)`` gives each record's relation-term neighbours; with the
    ``task``, only seeds ``worth_following`` are followed (None: every seed)."""
    found: dict[str, Candidate] = {}
    load([*lexical, *vector], found)
    edges: dict[str, list[tuple[str, Relation]]] = {}
    seeds = seeds_of(lexical, vector)
    if task is not None and seeds:
        direct = SearchHits(lexical=lexical, vector=vector, vector_searched=vector_searched)
        seeds = worth_following(task, found, seeds, direct)
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
