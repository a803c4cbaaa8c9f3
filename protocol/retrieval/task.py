"""What retrieval is asked (a task) and what it reads (each record's authoritative state).

Invariants: a ``Candidate`` is built by the store from its own rows at query time, never
from an index; an index only ever contributes a score (``SearchHits``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from protocol.model import LifeArea, LifecycleState, RecordContent, Sensitivity
from protocol.retrieval.fitted import RANKING
from protocol.retrieval.fusion import Ranking


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One retrieval request: the question, where it is asked, and what the user allows."""

    query: str
    now: datetime
    area: LifeArea | None = None
    project: str | None = None
    personalized: bool = True
    factual: bool | None = None  # None: decided from the query (protocol.retrieval.question)
    consents: frozenset[Sensitivity] = frozenset()
    limit: int = 5
    ranking: Ranking = RANKING  # the fitted numbers; evaluation may pass others


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """A record's authoritative state as the store holds it now."""

    record_id: str
    lifecycle: LifecycleState
    content: RecordContent | None  # None: unreadable (forgotten, key destroyed, not held)
    learned_at: datetime | None
    version: int | None = None
    usage_area: LifeArea | None = None
    usage_project: str | None = None
    project_open: bool = True
    refused: bool = False  # the cloud refused the operation that made it (device only)
    superseded_by: str | None = None  # an ACTIVE newer record that replaced this one
    supersedes: tuple[str, ...] = ()  # older records this one replaced
    conflicts_with: tuple[str, ...] = ()  # records that still disagree with this one
    said_on: datetime | None = None  # when the user said it (for quotes)


class Relation(StrEnum):
    """Why a record was pulled in next to a hit."""

    SUPERSEDES = "supersedes"
    CONFLICT = "conflict"
    PERSON = "person"
    PROJECT = "project"
    EPISODE = "episode"


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchHits:
    """Raw scores from the indexes; every id is re-checked against its Candidate."""

    lexical: Mapping[str, float] = field(default_factory=dict)  # bm25-like, higher = better
    vector: Mapping[str, float] = field(default_factory=dict)  # cosine similarity
    related: Mapping[str, tuple[tuple[str, Relation], ...]] = field(default_factory=dict)
    vector_searched: bool = True  # False: only the lexical index was asked
