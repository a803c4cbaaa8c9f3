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
from device.sync_state import SyncState
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
    "k.key_id IS NOT NULL AS v_has_key FROM records r "
    "LEFT JOIN record_versions v ON r.lifecycle != '" + FORGOTTEN + "' "
    "AND v.record_id = r.record_id AND v.version = r.current_version "
    "LEFT JOIN data_keys k ON k.key_id = v.key_id "
    "WHERE r.record_id IN ({marks})"
)
# the sealed bytes and key of the versions the cache does not hold (row values)
_SEALED = (
    "SELECT v.record_id, v.sealed, k.dek FROM record_versions v "
    "JOIN data_keys k ON k.key_id = v.key_id WHERE (v.record_id, v.version) IN (VALUES {marks})"
)


_LIFECYCLES = "SELECT record_id, lifecycle FROM records WHERE record_id IN ({marks})"
_OLDER = "SELECT superseded_by, record_id FROM records WHERE superseded_by IN ({marks})"
_TYPED = "SELECT episode_id, typed_at FROM episodes WHERE episode_id IN ({marks})"


# the columns of ``_HELD``, by position (a name lookup on a row costs more than the read)
(ID, LIFECYCLE, _CURRENT, SYNC, AREA, PROJECT, SUCCESSOR, CONFLICTS) = range(8)
(VERSION, RECORDED, KEY_ID, SPACE, HAS_KEY) = range(8, 13)
_LIFECYCLE_OF = {s.value: s for s in LifecycleState}
_AREA_OF = {a.value: a for a in LifeArea}


def _key(db_key: str, row: Any) -> version_cache.Key:
    return (db_key, row[ID], int(row[VERSION]), row[KEY_ID])


def _open_missing(db: Database, db_key: str, rows: Sequence[Any]) -> dict[str, RecordContent]:
    """Open the versions the cache did not hold, their bytes read in one statement per
    chunk; a version that does not open (wrong key, tampered) is left out."""
    out: dict[str, RecordContent] = {}
    by_id = {row[ID]: row for row in rows}
    for part in _chunks(sorted(by_id)):
        params: list[Any] = []
        for record_id in part:
            params.extend((record_id, int(by_id[record_id][VERSION])))
        sql = _SEALED.format(marks=",".join("(?, ?)" for _ in part))
        for record_id, sealed, dek in db.all(sql, params):
            row = by_id[record_id]
            with suppress(SealError):
                version = int(row[VERSION])
                plain = open_item(
                    bytes(dek), bytes(sealed), row[SPACE], "record", record_id, version
                )
                content = RecordContent.model_validate_json(plain)
                version_cache.put(_key(db_key, row), content)
                out[record_id] = content
    return out


def candidates(
    db: Database, record_ids: Iterable[str], projects: dict[str, bool]
) -> dict[str, Candidate]:
    """The candidates of the records this device holds among ``record_ids``."""
    rows = {r[ID]: tuple(r) for r in _in(db, _HELD, record_ids)}
    if not rows:
        return {}
    db_key = version_cache.database_key(db.path)
    named = {r[SUCCESSOR] for r in rows.values() if r[SUCCESSOR]}
    conflicts = {i: _conflicts(r[CONFLICTS]) for i, r in rows.items()}
    named.update(other for others in conflicts.values() for other in others)
    lifecycle = {r[0]: r[1] for r in _in(db, _LIFECYCLES, named)}
    older: dict[str, list[str]] = {}
    for r in _in(db, _OLDER, rows):
        older.setdefault(r[0], []).append(r[1])
    contents: dict[str, RecordContent | None] = {}
    learned: dict[str, datetime] = {}
    missing = []
    for record_id, row in rows.items():
        if row[VERSION] is None:  # forgotten, or no current version: nothing to open
            version_cache.forget_records(db_key, [record_id])
            continue
        learned[record_id] = datetime.fromisoformat(row[RECORDED])
        key = _key(db_key, row)
        if not row[HAS_KEY]:  # the key is gone: unreadable, and never from the cache
            version_cache.discard(key)
            contents[record_id] = None
            continue
        contents[record_id] = version_cache.get(key)
        if contents[record_id] is None:
            missing.append(row)
    contents.update(_open_missing(db, db_key, missing))
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
        successor = row[SUCCESSOR]
        out[record_id] = Candidate(
            record_id=record_id,
            lifecycle=_LIFECYCLE_OF[row[LIFECYCLE]],
            content=content,
            learned_at=at,
            version=None if row[VERSION] is None else int(row[VERSION]),
            usage_area=_AREA_OF[row[AREA]] if row[AREA] else None,
            usage_project=row[PROJECT],
            project_open=content is None
            or content.project is None
            or projects.get(content.project, True),
            refused=row[SYNC] == SyncState.REFUSED,
            superseded_by=successor if successor and lifecycle.get(successor) == ACTIVE else None,
            supersedes=tuple(sorted(older[record_id])) if record_id in older else (),
            conflicts_with=tuple(
                o for o in conflicts[record_id] if lifecycle.get(o, FORGOTTEN) != FORGOTTEN
            ),
            said_on=None if content is None else _said_on(content, at, typed),
        )
    return out


def _conflicts(raw: str | None) -> list[str]:
    """``store.conflicts_of`` without parsing the common empty list."""
    return [] if not raw or raw == "[]" else list(json.loads(raw))


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
