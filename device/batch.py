"""Retrieval's batch read: the authoritative ``Candidate`` of many records at once.

Invariants:
- The result is exactly what reading each record alone gives
  (``device.retrieval.candidate``): the same row, the same current version opened with
  its own key (unreadable: no content), the same active successor, predecessors,
  live conflicts and said-on date. A test holds the two paths equal on varied stores.
- A handful of IN-list statements per batch, whatever its size: records with their
  current version and its data key, the lifecycles of the records they name, their
  predecessors, and the source episodes that date them.
- Opened versions come from ``device.version_cache`` only when the version row and its
  data key are still in the database under the same key id; a missing or different
  key drops the entry. Reading never writes to the database.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import suppress
from datetime import datetime
from typing import Any

from device import version_cache
from device.db import Database
from device.keys import open_item
from protocol.errors import SealError
from protocol.model import LifeArea, LifecycleState, RecordContent
from protocol.retrieval.task import Candidate

FORGOTTEN = LifecycleState.FORGOTTEN.value
ACTIVE = LifecycleState.ACTIVE.value
CHUNK = 500  # ids per IN list (far below SQLite's variable limit)


def _chunks(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(ids), CHUNK):
        yield ids[start : start + CHUNK]


def _in(db: Database, sql: str, ids: Iterable[str]) -> list[Any]:
    """``sql`` with ``{marks}`` run once per chunk of ``ids``."""
    wanted = sorted(set(ids))
    rows: list[Any] = []
    for part in _chunks(wanted):
        rows.extend(db.all(sql.format(marks=",".join("?" * len(part))), part))
    return rows


_HELD = (
    "SELECT r.record_id, r.lifecycle, r.current_version, r.sync_state, r.usage_area, "
    "r.usage_project, r.superseded_by, r.conflicts_with, v.version AS v_version, "
    "v.recorded_at AS v_recorded_at, v.key_id AS v_key_id, v.bound_space AS v_space, "
    "v.sealed AS v_sealed, k.dek AS v_dek FROM records r "
    "LEFT JOIN record_versions v ON r.lifecycle != '" + FORGOTTEN + "' "
    "AND v.record_id = r.record_id AND v.version = r.current_version "
    "LEFT JOIN data_keys k ON k.key_id = v.key_id "
    "WHERE r.record_id IN ({marks})"
)


_LIFECYCLES = "SELECT record_id, lifecycle FROM records WHERE record_id IN ({marks})"
_OLDER = "SELECT superseded_by, record_id FROM records WHERE superseded_by IN ({marks})"
_TYPED = "SELECT episode_id, typed_at FROM episodes WHERE episode_id IN ({marks})"


def _open(db_key: str, row: Any) -> RecordContent | None:
    """The current version opened (cached when its key still holds), None if unreadable."""
    record_id, version, key_id = row["record_id"], int(row["v_version"]), row["v_key_id"]
    key = (db_key, record_id, version, key_id)
    if row["v_dek"] is None:
        version_cache.discard(key)
        return None
    cached = version_cache.get(key)
    if cached is not None:
        return cached
    with suppress(SealError):
        plain = open_item(
            bytes(row["v_dek"]),
            bytes(row["v_sealed"]),
            row["v_space"],
            "record",
            record_id,
            version,
        )
        content = RecordContent.model_validate_json(plain)
        version_cache.put(key, content)
        return content
    return None


def candidates(
    db: Database, record_ids: Iterable[str], projects: dict[str, bool]
) -> dict[str, Candidate]:
    """The candidates of the records this device holds among ``record_ids``."""
    rows = {r["record_id"]: r for r in _in(db, _HELD, record_ids)}
    if not rows:
        return {}
    db_key = version_cache.database_key(db.path)
    named = {r["superseded_by"] for r in rows.values() if r["superseded_by"]}
    conflicts = {i: list(json.loads(r["conflicts_with"] or "[]")) for i, r in rows.items()}
    named.update(other for others in conflicts.values() for other in others)
    lifecycle = {r[0]: r[1] for r in _in(db, _LIFECYCLES, named)}
    older: dict[str, list[str]] = {}
    for r in _in(db, _OLDER, rows):
        older.setdefault(r[0], []).append(r[1])
    contents: dict[str, RecordContent | None] = {}
    learned: dict[str, datetime] = {}
    for record_id, row in rows.items():
        if row["v_version"] is None:  # forgotten, or no current version: nothing to open
            version_cache.forget_records(db.path, [record_id])
            continue
        learned[record_id] = datetime.fromisoformat(row["v_recorded_at"])
        contents[record_id] = _open(db_key, row)
    undated = {
        e
        for c in contents.values()
        if c is not None and c.said_at is None
        for e in c.source_episode_ids
    }
    typed = {r[0]: r[1] for r in _in(db, _TYPED, undated)}
    out: dict[str, Candidate] = {}
    for record_id, row in rows.items():
        content = contents.get(record_id)
        at = learned.get(record_id)
        successor = row["superseded_by"]
        out[record_id] = Candidate(
            record_id=record_id,
            lifecycle=LifecycleState(row["lifecycle"]),
            content=content,
            learned_at=at,
            version=None if row["v_version"] is None else int(row["v_version"]),
            usage_area=LifeArea(row["usage_area"]) if row["usage_area"] else None,
            usage_project=row["usage_project"],
            project_open=content is None
            or content.project is None
            or projects.get(content.project, True),
            refused=row["sync_state"] == "refused",
            superseded_by=successor if successor and lifecycle.get(successor) == ACTIVE else None,
            supersedes=tuple(sorted(older.get(record_id, ()))),
            conflicts_with=tuple(
                o for o in conflicts[record_id] if lifecycle.get(o, FORGOTTEN) != FORGOTTEN
            ),
            said_on=None if content is None else _said_on(content, at, typed),
        )
    return out


def _said_on(content: RecordContent, fallback: datetime | None, typed: dict[str, str]) -> datetime:
    """``device.reading.said_on`` over episodes read in the batch."""
    if content.said_at is not None:
        return content.said_at
    for episode_id in content.source_episode_ids:
        if episode_id in typed:
            return datetime.fromisoformat(typed[episode_id])
    if fallback is None:
        raise ValueError("no date to show the record with")
    return fallback
