"""Local recall, in the fixed order: task area, state filter, search, ranking, smallest
subset, presentation (word match for now; a later issue brings the full pipeline).

Invariants:
- ``personalized=False`` retrieves nothing.
- Every index hit is re-checked against authoritative state: only an active record
  whose current version opens, that the cloud did not refuse, outside closed projects,
  passes; "only use for X" passes only when the task's area or project is X.
- Old versions never come back: only the current version is scored and shown. A
  record superseded by an ACTIVE newer statement is left out (the newer one wins).
- A record in conflict brings its (usable) conflicting record with it; both flagged.
- Ranking is word score times ``protocol.timeline.priority``: decay and staleness
  only lower it. Lines come from ``protocol.presentation.labelled_line``.
- Recall never writes.
"""

from __future__ import annotations

from datetime import datetime

from device import catalog, store
from device.db import Database
from device.reading import Held, held, is_active, line_for, live_conflicts, shown_class
from device.views import RecallHit
from protocol import timeline
from protocol.model import EpistemicState, LifeArea, LifecycleState, RecordContent
from protocol.recall import score, words


def in_task_area(content: RecordContent, area: LifeArea | None, project: str | None) -> bool:
    """Step 1: the task's life area and project, plus "general"; no task = everything."""
    if area is None and project is None:
        return True
    return (
        LifeArea.GENERAL in content.life_areas
        or (area is not None and area in content.life_areas)
        or (project is not None and content.project == project)
    )


def usable(
    db: Database,
    h: Held,
    area: LifeArea | None,
    project: str | None,
    projects: dict[str, bool],
) -> bool:
    """Step 2, the state filter, re-read from the store for this record."""
    row, content = h.row, h.content
    if (
        content is None
        or h.lifecycle is not LifecycleState.ACTIVE
        or row["sync_state"] == "refused"
        or content.epistemic_state is EpistemicState.INVALID
    ):
        return False
    if content.project is not None and projects.get(content.project) is False:
        return False
    if row["usage_area"] and (area is None or area.value != row["usage_area"]):
        return False
    if row["usage_project"] and project != row["usage_project"]:
        return False
    if is_active(db, row["superseded_by"]):
        return False
    return in_task_area(content, area, project)


def recall(
    db: Database,
    query: str,
    now: datetime,
    *,
    limit: int = 5,
    area: LifeArea | None = None,
    project: str | None = None,
    personalized: bool = True,
) -> list[RecallHit]:
    if not personalized or limit <= 0:
        return []
    projects = catalog.projects(db)

    def check(record_id: str) -> Held | None:
        row = store.record_row(db, record_id)
        if row is None:
            return None
        h = held(db, row)
        return h if usable(db, h, area, project, projects) else None

    primary: list[tuple[float, int, str, Held]] = []
    for record_id in store.recall_candidates(db, words(query)):
        h = check(record_id)
        if h is None or h.content is None or h.learned_at is None:
            continue
        points = score(query, h.content.text)
        if points == 0:
            continue
        rank = points * timeline.priority(h.content, h.learned_at, now)
        primary.append((rank, points, record_id, h))
    primary.sort(key=lambda item: (-item[0], item[2]))

    hits: list[RecallHit] = []
    seen: set[str] = set()
    for rank, points, record_id, h in primary:
        if len(hits) >= limit:
            break
        if record_id in seen:
            continue
        seen.add(record_id)
        hits.append(_hit(db, h, now, points, rank, None))
        for other_id in live_conflicts(db, h.row):  # retrieved together, both flagged
            other = check(other_id)
            if other is not None and other_id not in seen:
                seen.add(other_id)
                assert other.content is not None
                hits.append(_hit(db, other, now, score(query, other.content.text), rank, record_id))
    return hits


def _hit(
    db: Database, h: Held, now: datetime, points: int, rank: float, pulled_in_by: str | None
) -> RecallHit:
    assert h.content is not None
    content = h.content
    return RecallHit(
        record_id=h.record_id,
        text=content.text,
        epistemic_state=content.epistemic_state.value,
        line=line_for(db, h, now),
        score=points,
        content_type=content.custom_type.name
        if content.custom_type
        else content.content_type.value,
        confidence=shown_class(h, now).value,
        conflict=bool(live_conflicts(db, h.row)),
        rank=rank,
        pulled_in_by=pulled_in_by,
    )
