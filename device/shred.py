"""Shredding: the ONE place that removes sealed content, data keys and derived rows.

Invariants:
- One procedure, ``destroy(db, Forget | Evict | Wipe)``: a local forget, a pulled key
  destruction or forgotten state, a ``forgotten`` refusal, a resync removal, an
  eviction and a wipe all come through it (``evict_record`` and ``wipe`` are its
  spellings); nothing outside this module deletes content or keys.
- One order: what was derived goes before what it came from (artifacts, then the
  records from the last derived back to the root), then extra episodes, then keys the
  cloud named. For each item its rows go first — the process caches, the plaintext
  derived rows (search rows and vectors, subject index), then the sealed rows — and its
  data keys last. All of it is one transaction, so a kill at any step rolls all of it
  back and the forget is done again from its durable cause (the queued op, the pull
  cursor that did not move, the revocation). Were a step ever committed alone, keys
  last leaves at worst a key with nothing left to open; keys first would leave the
  plaintext derived rows readable without any key.
- Content becomes unreadable only by destroying its data key; the sealed rows and
  every row derived from them (search indexes and vectors, subject index, derivation edges, state
  history, queued ops, receipts, refusal reasons, usage and flags) go in the same
  transaction, with ``secure_delete`` on. Derived artifacts are shredded the same way.
- The append-only triggers let a DELETE through only for items named in
  ``shred_permits``; permits are written here and cleared before the transaction ends.
- The record stays as a skeleton (id, ``permanently_forgotten``, when) and every
  shredded episode and artifact leaves a tombstone, so a later pull can never bring
  any of them back.
- The caller checkpoints the WAL (``Database.checkpoint``) after the commit.
- Every function here drops what it destroys from the process's caches in the same
  call: opened versions (``device.version_cache``, by record and by key) and the
  record's row of the in-memory vector matrix (``search.drop``); a wipe drops both
  caches of the database whole.
- Eviction (``evict_record``: the record left this device's subset) removes keys and
  derived rows exactly like a forget, but leaves no skeleton and no tombstone: the
  record is still in the cloud and may come back. It never touches a device-only
  record, nor one with queued operations (the caller defers it until they are sent).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import assert_never

from device import candidates, changes, faults, search, store, version_cache
from device.db import Database
from device.sync_state import SyncState
from protocol.model import LifecycleState

FORGOTTEN = LifecycleState.FORGOTTEN.value


@dataclass(slots=True)
class Shredded:
    record_id: str
    key_ids: set[str] = field(default_factory=set)
    episode_ids: set[str] = field(default_factory=set)
    dropped_ops: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Forget:
    """Forget permanently: skeletons and tombstones stay, so nothing comes back.

    ``record_ids`` is a derivation closure as ``protocol.rules.derivation_closure``
    gives it (roots first); ``key_ids`` are keys the cloud named in a key-destruction
    event; ``episode_ids`` are episodes beyond the records' own sources (or, with
    ``all_episodes``, every episode)."""

    record_ids: tuple[str, ...] = ()
    artifact_ids: tuple[str, ...] = ()
    episode_ids: tuple[str, ...] = ()
    all_episodes: bool = False
    key_ids: tuple[str, ...] = ()
    at: str
    sync_state: SyncState


@dataclass(frozen=True, slots=True, kw_only=True)
class Evict:
    """The record left this device's subset: like a forget, but no skeleton and no
    tombstone; refused (nothing removed) while it may not leave (``evictable``)."""

    record_id: str
    episode_ids: tuple[str, ...] = ()
    artifact_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Wipe:
    """A revoked device or an ended account: every key and every row of memory."""

    at: str


Target = Forget | Evict | Wipe


def destroy(db: Database, target: Target) -> int:
    """THE shred procedure: every forget (local or pulled), key destruction, resync
    removal, eviction and wipe on this device comes through here. Must run inside
    ``db.atomic()``; the caller checkpoints the WAL after the commit. Returns how many
    records it removed (for a wipe: how many were held)."""
    if not db.in_transaction:
        raise RuntimeError("shredding must run inside Database.atomic()")
    match target:
        case Forget():
            return _forget(db, target)
        case Evict():
            return int(
                _evict(
                    db,
                    target.record_id,
                    episode_ids=target.episode_ids,
                    artifact_ids=target.artifact_ids,
                )
            )
        case Wipe():
            return _wipe(db, at=target.at)
        case _:
            assert_never(target)


def evict_record(
    db: Database,
    record_id: str,
    *,
    episode_ids: Iterable[str] = (),
    artifact_ids: Iterable[str] = (),
) -> bool:
    """``destroy(db, Evict(...))``: whether the record was evicted."""
    target = Evict(
        record_id=record_id, episode_ids=tuple(episode_ids), artifact_ids=tuple(artifact_ids)
    )
    return destroy(db, target) == 1


def wipe(db: Database, *, at: str) -> int:
    """``destroy(db, Wipe(at=at))``: how many records were held."""
    return destroy(db, Wipe(at=at))


def _marks(items: Iterable[str]) -> tuple[str, list[str]]:
    values = sorted(items)
    return ",".join("?" for _ in values), values


def _drop_record_rows(db: Database, record_id: str) -> None:
    """The record's sealed versions and every row derived from or about it: search
    rows and vectors, subject index, derivation edges, state history, its use count,
    why it is in the subset, a parked leave. The caller holds the permits."""
    search.drop(db, record_id)
    for sql in (
        "DELETE FROM subject_index WHERE record_id = ?",
        "DELETE FROM record_events WHERE record_id = ?",
        "DELETE FROM record_versions WHERE record_id = ?",
        "DELETE FROM subset_entries WHERE record_id = ?",
        "DELETE FROM record_uses WHERE record_id = ?",
        "DELETE FROM deferred_evictions WHERE record_id = ?",
        "DELETE FROM resync_kept WHERE record_id = ?",
    ):
        db.execute(sql, (record_id,))
    db.execute(
        "DELETE FROM derivations WHERE parent_id = ? OR child_id = ?", (record_id, record_id)
    )


def _shred_record(
    db: Database,
    record_id: str,
    *,
    forgotten_at: str,
    sync_state: SyncState,
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
    changes.touch(db, record_id)
    result = Shredded(record_id, set(key_ids), set(episode_ids))

    for row in store.versions_of(db, record_id):
        result.key_ids.add(row["key_id"])
    # If a version's key is already gone, the episodes the caller named still go.
    result.episode_ids.update(store.source_episode_ids(db, record_id))
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
    _forget_cached(db, [record_id], result.key_ids)
    _drop_record_rows(db, record_id)
    if ep_values:
        db.execute(f"DELETE FROM episodes WHERE episode_id IN ({ep_marks})", ep_values)
    faults.reached("shred_keys_next")  # the rows are gone, the keys not yet (a kill test)
    if key_values:
        db.execute(f"DELETE FROM data_keys WHERE key_id IN ({key_marks})", key_values)
    dropped = db.execute(
        f"DELETE FROM op_queue WHERE record_id = ? OR episode_id IN ({ep_marks or 'NULL'})",
        [record_id, *ep_values],
    )
    result.dropped_ops = dropped.rowcount
    for table in ("receipts", "local_receipts"):
        db.execute(
            f"DELETE FROM {table} WHERE record_id = ? OR episode_id IN ({ep_marks or 'NULL'})",
            [record_id, *ep_values],
        )
    candidates.drop_for_episodes(db, ep_values)
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
        "usage_area = NULL, usage_project = NULL, superseded_by = NULL, conflicts_with = '[]', "
        "forgotten_at = coalesce(records.forgotten_at, excluded.forgotten_at)",
        (record_id, FORGOTTEN, forgotten_at, sync_state),
    )
    for kind, item in permits:
        db.execute("DELETE FROM shred_permits WHERE kind = ? AND item_id = ?", (kind, item))
    return result


def _forget_cached(db: Database, record_ids: Iterable[str], key_ids: Iterable[str]) -> None:
    """Drop the opened versions of these records and of these keys from the cache."""
    version_cache.forget_records(db.path, record_ids)
    version_cache.forget_keys(db.path, key_ids)


def _unshared_keys(db: Database, keys: Iterable[str]) -> list[str]:
    """The keys no row still uses but the items being removed (those with a permit)."""
    out = []
    for key_id in sorted(set(keys)):
        used = db.one(
            "SELECT 1 FROM record_versions WHERE key_id = ? AND record_id NOT IN "
            "(SELECT item_id FROM shred_permits WHERE kind = 'record') "
            "UNION ALL SELECT 1 FROM episodes WHERE key_id = ? AND episode_id NOT IN "
            "(SELECT item_id FROM shred_permits WHERE kind = 'episode') "
            "UNION ALL SELECT 1 FROM artifacts WHERE key_id = ? AND artifact_id NOT IN "
            "(SELECT item_id FROM shred_permits WHERE kind = 'artifact') LIMIT 1",
            (key_id, key_id, key_id),
        )
        if used is None:
            out.append(key_id)
    return out


def evictable(db: Database, record_id: str) -> bool:
    """Whether the record may leave now: held, not device-only, nothing of it queued."""
    row = store.record_row(db, record_id)
    if row is None or row["lifecycle"] == FORGOTTEN or row["device_only"]:
        return False
    return db.one("SELECT 1 FROM op_queue WHERE record_id = ? LIMIT 1", (record_id,)) is None


def _evict(
    db: Database,
    record_id: str,
    *,
    episode_ids: Iterable[str] = (),
    artifact_ids: Iterable[str] = (),
) -> bool:
    """Remove a record that left this device's subset, with the source episodes and
    artifacts the cloud named as held for no other record of the subset: their keys
    and every derived row, like a forget, but no skeleton and no tombstone. Returns
    False (and removes nothing) when it may not leave now (``evictable``). Must run
    inside ``db.atomic()``."""
    if not db.in_transaction:
        raise RuntimeError("evicting must run inside Database.atomic()")
    if not evictable(db, record_id):
        return False
    changes.touch(db, record_id)
    episodes = [
        e
        for e in sorted(set(episode_ids))
        if (row := store.episode_row(db, e)) is not None
        and not row["device_only"]
        and db.one("SELECT 1 FROM op_queue WHERE episode_id = ? LIMIT 1", (e,)) is None
    ]
    artifacts = [
        a
        for a in sorted(set(artifact_ids))
        if db.one("SELECT 1 FROM artifacts WHERE artifact_id = ?", (a,)) is not None
    ]
    keys = {row["key_id"] for row in store.versions_of(db, record_id)}
    ep_marks, ep_values = _marks(episodes)
    art_marks, art_values = _marks(artifacts)
    if ep_values:
        keys.update(
            r["key_id"]
            for r in db.all(
                f"SELECT key_id FROM episodes WHERE episode_id IN ({ep_marks})", ep_values
            )
        )
    if art_values:
        keys.update(
            r["key_id"]
            for r in db.all(
                f"SELECT key_id FROM artifacts WHERE artifact_id IN ({art_marks})", art_values
            )
        )
    permits = (
        [("record", record_id)]
        + [("episode", e) for e in episodes]
        + [("artifact", a) for a in artifacts]
    )
    for kind, item in permits:
        db.execute(
            "INSERT OR IGNORE INTO shred_permits (kind, item_id) VALUES (?, ?)", (kind, item)
        )
    dead_keys = _unshared_keys(db, keys)
    _forget_cached(db, [record_id], keys)
    for key_id in dead_keys:
        db.execute(
            "INSERT OR IGNORE INTO shred_permits (kind, item_id) VALUES ('key', ?)", (key_id,)
        )

    _drop_record_rows(db, record_id)
    for table in ("receipts", "local_receipts"):
        db.execute(
            f"DELETE FROM {table} WHERE record_id = ? OR episode_id IN ({ep_marks or 'NULL'})",
            [record_id, *ep_values],
        )
    if ep_values:
        db.execute(f"DELETE FROM episodes WHERE episode_id IN ({ep_marks})", ep_values)
        candidates.drop_for_episodes(db, ep_values)
    if art_values:
        db.execute(f"DELETE FROM artifacts WHERE artifact_id IN ({art_marks})", art_values)
        db.execute(f"DELETE FROM derivations WHERE child_id IN ({art_marks})", art_values)
        db.execute(f"DELETE FROM local_receipts WHERE artifact_id IN ({art_marks})", art_values)
    db.execute("DELETE FROM records WHERE record_id = ?", (record_id,))
    key_marks, key_values = _marks(dead_keys)
    if key_values:
        db.execute(f"DELETE FROM data_keys WHERE key_id IN ({key_marks})", key_values)
    for kind, item in [*permits, *(("key", k) for k in dead_keys)]:
        db.execute("DELETE FROM shred_permits WHERE kind = ? AND item_id = ?", (kind, item))
    return True


def retire_version(db: Database, record_id: str, version: int) -> None:
    """Remove one provisional version row of this device's own (``device.provisional``
    has sealed its words anew under the cloud's number first) and its data key, unless
    another row still uses that key. Must run inside ``db.atomic()``."""
    if not db.in_transaction:
        raise RuntimeError("retiring a version must run inside Database.atomic()")
    row = store.version_row(db, record_id, version)
    if row is None:
        return
    changes.touch(db, record_id)
    key_id = row["key_id"]
    _forget_cached(db, [record_id], [key_id])
    shared = db.one(
        "SELECT 1 FROM record_versions WHERE key_id = ? AND NOT (record_id = ? AND version = ?) "
        "UNION ALL SELECT 1 FROM episodes WHERE key_id = ? "
        "UNION ALL SELECT 1 FROM artifacts WHERE key_id = ? LIMIT 1",
        (key_id, record_id, version, key_id, key_id),
    )
    permits = [("record", record_id)] + ([] if shared else [("key", key_id)])
    for kind, item in permits:
        db.execute(
            "INSERT OR IGNORE INTO shred_permits (kind, item_id) VALUES (?, ?)", (kind, item)
        )
    db.execute(
        "DELETE FROM record_versions WHERE record_id = ? AND version = ?", (record_id, version)
    )
    if not shared:
        db.execute("DELETE FROM data_keys WHERE key_id = ?", (key_id,))
    for kind, item in permits:
        db.execute("DELETE FROM shred_permits WHERE kind = ? AND item_id = ?", (kind, item))


def _shred_artifact(
    db: Database, artifact_id: str, *, forgotten_at: str, key_ids: Iterable[str] = ()
) -> set[str]:
    """Destroy a derived artifact's key and sealed row; leave a tombstone. Returns key ids."""
    if not db.in_transaction:
        raise RuntimeError("shredding must run inside Database.atomic()")
    keys = set(key_ids)
    row = db.one("SELECT key_id FROM artifacts WHERE artifact_id = ?", (artifact_id,))
    if row is not None:
        keys.add(row["key_id"])
    _forget_cached(db, (), keys)
    permits = [("artifact", artifact_id)] + [("key", k) for k in sorted(keys)]
    for kind, item in permits:
        db.execute(
            "INSERT OR IGNORE INTO shred_permits (kind, item_id) VALUES (?, ?)", (kind, item)
        )
    db.execute("DELETE FROM artifacts WHERE artifact_id = ?", (artifact_id,))
    key_marks, key_values = _marks(keys)
    if key_values:
        db.execute(f"DELETE FROM data_keys WHERE key_id IN ({key_marks})", key_values)
    db.execute("DELETE FROM derivations WHERE child_id = ?", (artifact_id,))
    db.execute("DELETE FROM op_queue WHERE artifact_id = ?", (artifact_id,))
    db.execute("DELETE FROM local_receipts WHERE artifact_id = ?", (artifact_id,))
    db.execute(
        "INSERT OR IGNORE INTO forgotten_artifacts (artifact_id, forgotten_at) VALUES (?, ?)",
        (artifact_id, forgotten_at),
    )
    for kind, item in permits:
        db.execute("DELETE FROM shred_permits WHERE kind = ? AND item_id = ?", (kind, item))
    return keys


def _shred_episodes(db: Database, episode_ids: Iterable[str], *, forgotten_at: str) -> int:
    """Destroy episodes that belong to no record being shredded (forgetting all memory)."""
    if not db.in_transaction:
        raise RuntimeError("shredding must run inside Database.atomic()")
    ep_marks, ep_values = _marks(episode_ids)
    if not ep_values:
        return 0
    rows = db.all(f"SELECT key_id FROM episodes WHERE episode_id IN ({ep_marks})", ep_values)
    keys = sorted({row["key_id"] for row in rows})
    _forget_cached(db, (), keys)
    permits = [("episode", e) for e in ep_values] + [("key", k) for k in keys]
    for kind, item in permits:
        db.execute(
            "INSERT OR IGNORE INTO shred_permits (kind, item_id) VALUES (?, ?)", (kind, item)
        )
    db.execute(f"DELETE FROM episodes WHERE episode_id IN ({ep_marks})", ep_values)
    if keys:
        db.execute(f"DELETE FROM data_keys WHERE key_id IN ({_marks(keys)[0]})", keys)
    for table in ("op_queue", "receipts", "local_receipts"):
        db.execute(f"DELETE FROM {table} WHERE episode_id IN ({ep_marks})", ep_values)
    candidates.drop_for_episodes(db, ep_values)
    for episode_id in ep_values:
        db.execute(
            "INSERT OR IGNORE INTO forgotten_episodes (episode_id, forgotten_at) VALUES (?, ?)",
            (episode_id, forgotten_at),
        )
    for kind, item in permits:
        db.execute("DELETE FROM shred_permits WHERE kind = ? AND item_id = ?", (kind, item))
    return len(ep_values)


def _forget(db: Database, target: Forget) -> int:
    """A forget's whole closure, in the one order: what was derived goes before what it
    came from (artifacts, then the records from the last derived back to the first
    root), then the extra episodes, then the keys the cloud named. Each item's rows go
    before its keys."""
    at, state = target.at, target.sync_state
    for artifact_id in sorted(set(target.artifact_ids)):
        _shred_artifact(db, artifact_id, forgotten_at=at)
    records = list(dict.fromkeys(target.record_ids))
    for record_id in reversed(records):
        _shred_record(db, record_id, forgotten_at=at, sync_state=state)
    extra = list(target.episode_ids)
    if target.all_episodes:
        extra += [row["episode_id"] for row in db.all("SELECT episode_id FROM episodes ORDER BY 1")]
    if extra:
        _shred_episodes(db, list(dict.fromkeys(extra)), forgotten_at=at)
    _destroy_keys(db, target.key_ids)
    return len(records)


def _destroy_keys(db: Database, key_ids: Iterable[str]) -> None:
    """Keys the cloud named that no shredded row of this device used (its key ids for
    the same content differ from the ones this device made)."""
    keys = sorted(set(key_ids))
    if not keys:
        return
    _forget_cached(db, (), keys)
    for key_id in keys:
        db.execute(
            "INSERT OR IGNORE INTO shred_permits (kind, item_id) VALUES ('key', ?)", (key_id,)
        )
    db.execute(f"DELETE FROM data_keys WHERE key_id IN ({_marks(keys)[0]})", keys)
    for key_id in keys:
        db.execute("DELETE FROM shred_permits WHERE kind = 'key' AND item_id = ?", (key_id,))


# Everything a wipe empties besides what ``shred_many`` already shreds: bookkeeping,
# tombstones, indexes and the record rows themselves (a revoked device keeps nothing).
_WIPED_TABLES = (
    "op_queue", "receipts", "local_receipts", "pending_acks", "candidates",
    "ended_conversations", "device_only_classes", "subject_index", "derivations",
    "record_events", "record_search", "record_vectors", "projects", "forgotten_episodes",
    "forgotten_artifacts", "records", "resync_seen", "record_uses", "subset_entries",
    "deferred_evictions", "resync_kept",
)  # fmt: skip


def _wipe(db: Database, *, at: str) -> int:
    """A revoked device: destroy every data key and every row of memory on this device,
    kept-on-device classes included, in one transaction; the caller checkpoints the
    WAL. The device's own identity (meta) stays, marked wiped; its credential stays
    only so the device can confirm the wipe to the cloud, which then drops it
    (``device.agent``). Returns how many records were held."""
    if not db.in_transaction:
        raise RuntimeError("wiping must run inside Database.atomic()")
    live = [
        row["record_id"]
        for row in db.all("SELECT record_id FROM records WHERE lifecycle != ?", (FORGOTTEN,))
    ]
    artifacts = [row["artifact_id"] for row in db.all("SELECT artifact_id FROM artifacts")]
    _forget(
        db,
        Forget(
            record_ids=tuple(live),
            artifact_ids=tuple(artifacts),
            all_episodes=True,
            at=at,
            sync_state=SyncState.SYNCED,
        ),
    )
    keys = [row["key_id"] for row in db.all("SELECT key_id FROM data_keys")]
    for key_id in keys:
        db.execute(
            "INSERT OR IGNORE INTO shred_permits (kind, item_id) VALUES ('key', ?)", (key_id,)
        )
    db.execute("DELETE FROM data_keys")
    db.execute("DELETE FROM shred_permits")
    for table in _WIPED_TABLES:
        db.execute(f"DELETE FROM {table}")
    db.execute("INSERT INTO record_fts (record_fts) VALUES ('delete-all')")
    db.execute("INSERT INTO record_fts (record_fts) VALUES ('optimize')")
    db.execute("UPDATE search_state SET needs_merge = 0, generation = random()")
    version_cache.forget_database(db.path)
    search.forget_cache(db)
    db.execute(
        "UPDATE meta SET pull_cursor = NULL, resync_started_at = NULL, last_synced_at = NULL"
    )
    # the credential stays only until the cloud has heard the wipe (device.agent)
    store.mark_wiped(db, at)
    return len(live)
