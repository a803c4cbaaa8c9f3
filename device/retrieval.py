"""Local retrieval: the fixed eight-step pipeline (``protocol.retrieval``) over this
device's subset, offline.

Invariants:
- The indexes (``device.search``) only propose ids. Each proposed record, each record
  related to one, and each companion (conflict partner, superseded predecessor) is
  re-read from the store into a ``Candidate`` — lifecycle, current version opened
  with its key, usage restriction, flags, project state — and the pipeline filters on
  that, so an index holding something stale can never bring it back.
- ``personalized=False`` retrieves nothing (step 1 returns empty; no index is read).
- Retrieval never writes (temporary mode relies on it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from device import batch, catalog, search, store
from device.db import Database
from device.reading import held, is_active, live_conflicts, said_on
from device.views import RecallHit
from protocol.messages import RecallAnswer
from protocol.model import LifeArea, Sensitivity
from protocol.retrieval.block import MemoryBlock
from protocol.retrieval.gather import gather as gather_records
from protocol.retrieval.pipeline import retrieve
from protocol.retrieval.task import Candidate, SearchHits, Task

SCOPE_DEVICE = "device"
SCOPE_NOTE = "Searched only what this device holds."
SCOPE_CLOUD = "cloud"
CLOUD_NOTE = "Searched the whole space in the cloud."


@dataclass(frozen=True, slots=True)
class Recall:
    """A retrieval answer: the hits, the marked block for a model, and what was searched."""

    hits: tuple[RecallHit, ...]
    block: str
    scope: str
    note: str
    factual: bool


def candidate(db: Database, record_id: str, projects: dict[str, bool]) -> Candidate | None:
    """A record's authoritative state, read from the store now."""
    row = store.record_row(db, record_id)
    if row is None:
        return None
    h = held(db, row)
    content = h.content
    superseded_by = row["superseded_by"] if is_active(db, row["superseded_by"]) else None
    older = db.all(
        "SELECT record_id FROM records WHERE superseded_by = ? ORDER BY record_id", (record_id,)
    )
    return Candidate(
        record_id=record_id,
        lifecycle=h.lifecycle,
        content=content,
        learned_at=h.learned_at,
        version=None if h.version is None else int(h.version["version"]),
        usage_area=LifeArea(row["usage_area"]) if row["usage_area"] else None,
        usage_project=row["usage_project"],
        project_open=content is None
        or content.project is None
        or projects.get(content.project, True),
        refused=row["sync_state"] == "refused",
        superseded_by=superseded_by,
        supersedes=tuple(r[0] for r in older),
        conflicts_with=tuple(live_conflicts(db, row)),
        said_on=None if content is None else said_on(db, content, h.learned_at),
    )


def _load(
    db: Database, ids: Iterable[str], into: dict[str, Candidate], projects: dict[str, bool]
) -> None:
    """Add the candidates of the ids not yet in ``into``, read in one batch."""
    wanted = {i for i in ids if i not in into}
    if wanted:
        found = batch.candidates(db, wanted, projects)
        into.update((i, found[i]) for i in sorted(found))


def _load_one_by_one(
    db: Database, ids: Iterable[str], into: dict[str, Candidate], projects: dict[str, bool]
) -> None:
    """The reference path the batch read is tested against: one record at a time."""
    for record_id in sorted(set(ids) - set(into)):
        c = candidate(db, record_id, projects)
        if c is not None:
            into[record_id] = c


def task_for(
    query: str,
    now: datetime,
    *,
    limit: int = 5,
    area: LifeArea | None = None,
    project: str | None = None,
    personalized: bool = True,
    factual: bool | None = None,
    consents: frozenset[Sensitivity] = frozenset(),
) -> Task:
    return Task(
        query=query,
        now=now,
        area=area,
        project=project,
        personalized=personalized,
        factual=factual,
        consents=consents,
        limit=limit,
    )


def gather(
    db: Database,
    task: Task,
    *,
    lexical: bool = True,
    vector: bool = True,
    one_by_one: bool = False,
    follow_all: bool = False,
) -> tuple[list[Candidate], SearchHits]:
    """What the indexes propose, and the authoritative state of every record involved:
    hits, records related to them, and their companions (``lexical``/``vector`` switch
    an index off, for evaluation; ``one_by_one`` reads each record alone and
    ``follow_all`` follows every seed's relations: the references the batch read and
    the relation pruning are tested against)."""
    if not task.personalized or task.limit <= 0:
        return [], SearchHits()
    projects = catalog.projects(db)

    def load(ids: Iterable[str], into: dict[str, Candidate]) -> None:
        (_load_one_by_one if one_by_one else _load)(db, ids, into, projects)

    return gather_records(
        lexical=search.lexical_hits(db, task.query) if lexical else {},
        vector=search.vector_hits(db, task.query) if vector else {},
        vector_searched=vector,
        load=load,
        related=lambda contents: search.related(db, contents),
        task=None if follow_all else task,
    )


def block(db: Database, query: str, now: datetime, **kw: Any) -> MemoryBlock:
    """Run the pipeline over this device's subset."""
    task = task_for(query, now, **kw)
    candidates, hits = gather(db, task)
    return retrieve(task, candidates, hits)


def recall(db: Database, query: str, now: datetime, **kw: Any) -> Recall:
    result = block(db, query, now, **kw)
    hits = tuple(
        RecallHit(
            record_id=line.record_id,
            text=line.text,
            epistemic_state=line.epistemic_state,
            line=line.line,
            score=round(line.relevance, 4),
            content_type=line.content_type,
            confidence=line.confidence,
            conflict=line.conflict,
            rank=round(line.score, 4),
            pulled_in_by=line.pulled_in_by or (line.via[0] if line.via else None),
            relation=line.via[1].value if line.via else None,
            outdated=line.outdated,
            current=line.current,
            lexical=round(line.lexical, 4),
            vector=round(line.vector, 4),
        )
        for line in result.lines
    )
    return Recall(
        hits=hits, block=result.text, scope=SCOPE_DEVICE, note=SCOPE_NOTE, factual=result.factual
    )


def from_cloud(answer: RecallAnswer, held: Callable[[str], bool] | None = None) -> Recall:
    """A cloud answer (already opened with this device's key) as a ``Recall``; a line
    whose record this device does not hold (``held``) is marked ``from_cloud``."""
    hits = tuple(
        RecallHit(
            record_id=line.record_id,
            text=line.text,
            epistemic_state=line.epistemic_state.value,
            line=line.line,
            score=line.score,
            content_type=line.content_type,
            confidence=line.confidence.value,
            conflict=line.conflict,
            rank=line.score,
            pulled_in_by=line.pulled_in_by,
            relation=line.relation.value if line.relation else None,
            outdated=line.outdated,
            current=line.current,
            from_cloud=held is not None and not held(line.record_id),
        )
        for line in answer.lines
    )
    fetched = sum(h.from_cloud for h in hits)
    note = (
        CLOUD_NOTE
        if not fetched
        else (
            f"{CLOUD_NOTE} {fetched} of {len(hits)} record(s) came from the cloud "
            "(not on this device)."
        )
    )
    return Recall(
        hits=hits,
        block=answer.block,
        scope=SCOPE_CLOUD,
        note=note,
        factual=answer.factual,
    )
