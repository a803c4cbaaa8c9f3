"""The fixed retrieval order, composed once; device and cloud both call ``retrieve``.

Invariant: this is the only composition of the steps; it runs all eight, in order.
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.retrieval.block import MemoryBlock, present
from protocol.retrieval.steps import (
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


def retrieve(task: Task, candidates: Iterable[Candidate], hits: SearchHits) -> MemoryBlock:
    filtered = opinion_filter(policy_gate(state_filter(task_area(task, candidates))))
    return present(smallest_subset(rank(search(filtered, hits))))
