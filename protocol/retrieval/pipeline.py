"""The fixed retrieval order, composed once; device and cloud both call ``retrieve``.

Invariant: this is the only composition of the steps; ``retrieve`` runs all eight, in
order (``ranked`` is its first six, for evaluation; ``searched_and_ranked`` the same six
keeping step 5's stage, for gathering).
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.retrieval.block import MemoryBlock, present
from protocol.retrieval.steps import (
    Ranked,
    Searched,
    opinion_filter,
    policy_gate,
    rank,
    search,
    smallest_subset,
    state_filter,
    task_area,
)
from protocol.retrieval.task import Candidate, SearchHits, Task

STEPS = (
    "task_area",
    "state_filter",
    "policy_gate",
    "opinion_filter",
    "search",
    "rank",
    "smallest_subset",
    "present",
)


def searched_and_ranked(
    task: Task, candidates: Iterable[Candidate], hits: SearchHits
) -> tuple[Searched, Ranked]:
    """Steps 1 to 6, with the stage step 5 returned beside step 6's."""
    filtered = opinion_filter(policy_gate(state_filter(task_area(task, candidates))))
    searched = search(filtered, hits)
    return searched, rank(searched)


def ranked(task: Task, candidates: Iterable[Candidate], hits: SearchHits) -> Ranked:
    """Steps 1 to 6: every record search found, in ranking order (evaluation reads it)."""
    return searched_and_ranked(task, candidates, hits)[1]


def retrieve(task: Task, candidates: Iterable[Candidate], hits: SearchHits) -> MemoryBlock:
    return present(smallest_subset(ranked(task, candidates, hits)))
