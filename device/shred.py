"""Shredding: the ONE place that removes sealed content, data keys and derived rows.

Invariants:
- Content becomes unreadable only by destroying its data key; the sealed rows and
  every row derived from them (recall words, queued ops, receipts, refusal reasons)
  go in the same transaction, with ``secure_delete`` on.
- The append-only triggers let a DELETE through only for items named in
  ``shred_permits``; permits are written here and cleared before the transaction ends.
- The record stays as a skeleton (id, ``permanently_forgotten``, when) and every
  shredded episode leaves a tombstone, so a later pull can never bring either back.
- The caller checkpoints the WAL (``Database.checkpoint``) after the commit.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass, field

from device import store
from device.db import Database
from protocol.errors import SealError
from protocol.model import LifecycleState

FORGOTTEN = LifecycleState.FORGOTTEN.value


@dataclass(slots=True)
class Shredded:
    record_id: str
    key_ids: set[str] = field(default_factory=set)
    episode_ids: set[str] = field(default_factory=set)
    dropped_ops: int = 0


def _marks(items: Iterable[str]) -> tuple[str, list[str]]:
    values = sorted(items)
    return ",".join("?" for _ in values), values


def shred_record(
    db: Database,
    record_id: str,
    *,
    forgotten_at: str,
    sync_state: str,
    key_ids: Iterable[str] = (),
    episode_ids: Iterable[str] = (),
) -> Shredded:
    """Destroy every key and derived row of ``record_id`` and its source episodes.

    ``key_ids``/``episode_ids`` add what the cloud named in a key-destruction event
    (the cloud's key ids differ from the keys this device made for the same content).
    Must run inside ``db.atomic()``.
    """
    if not db.in_transaction:
        raise RuntimeError("shredding must run inside Database.atomic()")
    result = Shredded(record_id, set(key_ids), set(episode_ids))

    for row in store.versions_of(db, record_id):
        result.key_ids.add(row["key_id"])
        # If the key is already gone, the episodes the caller named still go.
        with suppress(LookupError, SealError):
            result.episode_ids.update(store.open_version(db, row).source_episode_ids)
    for episode_id in result.episode_ids:
        row = store.episode_row(db, episode_id)
        if row is not None:
            result.key_ids.add(row["key_id"])

    permits = (
        [("record", record_id)]
        + [("episode", e) for e in sorted(result.episode_ids)]
        + [("key", k) for k in sorted(result.key_ids)]
    )
    for kind, item in permits:
        db.execute(
            "INSERT OR IGNORE INTO shred_permits (kind, item_id) VALUES (?, ?)", (kind, item)
        )

    ep_marks, ep_values = _marks(result.episode_ids)
    key_marks, key_values = _marks(result.key_ids)
    db.execute("DELETE FROM recall_words WHERE record_id = ?", (record_id,))
    db.execute("DELETE FROM record_versions WHERE record_id = ?", (record_id,))
    if ep_values:
        db.execute(f"DELETE FROM episodes WHERE episode_id IN ({ep_marks})", ep_values)
    if key_values:
        db.execute(f"DELETE FROM data_keys WHERE key_id IN ({key_marks})", key_values)
    dropped = db.execute(
        f"DELETE FROM op_queue WHERE record_id = ? OR episode_id IN ({ep_marks or 'NULL'})",
        [record_id, *ep_values],
    )
    result.dropped_ops = dropped.rowcount
    db.execute(
        f"DELETE FROM receipts WHERE record_id = ? OR episode_id IN ({ep_marks or 'NULL'})",
        [record_id, *ep_values],
    )
    for episode_id in ep_values:
        db.execute(
            "INSERT OR IGNORE INTO forgotten_episodes (episode_id, forgotten_at) VALUES (?, ?)",
            (episode_id, forgotten_at),
        )
    db.execute(
        "INSERT INTO records (record_id, lifecycle, current_version, forgotten_at, sync_state) "
        "VALUES (?, ?, NULL, ?, ?) "
        "ON CONFLICT (record_id) DO UPDATE SET lifecycle = excluded.lifecycle, "
        "current_version = NULL, refusal_reason = NULL, sync_state = excluded.sync_state, "
        "forgotten_at = coalesce(records.forgotten_at, excluded.forgotten_at)",
        (record_id, FORGOTTEN, forgotten_at, sync_state),
    )
    for kind, item in permits:
        db.execute("DELETE FROM shred_permits WHERE kind = ? AND item_id = ?", (kind, item))
    return result
