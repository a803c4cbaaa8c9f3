"""Reads and inserts on the device store; every write to sealed content is an INSERT.

Invariants:
- Nothing here UPDATEs or DELETEs sealed content or data keys (the triggers in
  ``schema`` would refuse it anyway); removing content is ``device/shred.py``'s job.
- Every write happens inside a caller's ``Database.atomic()`` block, so the caller
  decides what commits together (e.g. a receipt and the removal of its op).
- Content is opened only through its own DEK and its stored binding space.
- Every write to a record's row or versions first tells the change feed
  (``device.changes.touch``), so it can report the change once the transaction commits.
- A resync's bookkeeping (its marker, what the cloud sent, what it kept) is
  ``device.resync_marks`` (its callers use it directly).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from device import changes
from device.db import Database
from device.keys import open_item
from device.sync_state import SyncState
from protocol.errors import SealError
from protocol.model import EpisodeContent, RecordContent

SYNC_STATES = tuple(SyncState)


@dataclass(frozen=True, slots=True)
class Meta:
    device_name: str
    cloud_url: str | None
    device_id: str | None
    space_id: str | None
    credential: str | None
    local_space: str
    private_key: bytes
    pull_cursor: str | None
    account_key: bytes | None = None
    resync_started_at: str | None = None  # a resync is in progress (restarted if set)
    wiped_at: str | None = None  # revoked and wiped; confirmation owed while credential set

    @property
    def wipe_unconfirmed(self) -> bool:
        """Wiped after a revocation, and the cloud has not yet heard it."""
        return self.wiped_at is not None and self.credential is not None

    @property
    def binding_space(self) -> str:
        """The space new content is bound to: the enrolled space, else a local one."""
        return self.space_id or self.local_space


def _require_tx(db: Database) -> None:
    if not db.in_transaction:
        raise RuntimeError("store writes must run inside Database.atomic()")


def _changing(db: Database, record_id: str) -> None:
    """A write to the record's row or versions: inside a transaction, told to the feed."""
    _require_tx(db)
    changes.touch(db, record_id)


# --- meta ---------------------------------------------------------------------------


def insert_meta(
    db: Database,
    *,
    device_name: str,
    cloud_url: str | None,
    local_space: str,
    private_key: bytes,
    created_at: str,
) -> None:
    _require_tx(db)
    db.execute(
        "INSERT INTO meta (singleton, device_name, cloud_url, local_space, private_key, "
        "created_at) VALUES (1, ?, ?, ?, ?, ?)",
        (device_name, cloud_url, local_space, private_key, created_at),
    )


def get_meta(db: Database) -> Meta:
    row = db.one(
        "SELECT device_name, cloud_url, device_id, space_id, credential, local_space, "
        "private_key, pull_cursor, account_key, resync_started_at, wiped_at "
        "FROM meta WHERE singleton = 1"
    )
    if row is None:
        raise RuntimeError(f"{db.path} has no device identity (meta row missing)")
    return Meta(
        device_name=row["device_name"],
        cloud_url=row["cloud_url"],
        device_id=row["device_id"],
        space_id=row["space_id"],
        credential=row["credential"],
        local_space=row["local_space"],
        private_key=bytes(row["private_key"]),
        pull_cursor=row["pull_cursor"],
        account_key=None if row["account_key"] is None else bytes(row["account_key"]),
        resync_started_at=row["resync_started_at"],
        wiped_at=row["wiped_at"],
    )


def set_cloud_url(db: Database, cloud_url: str) -> None:
    _require_tx(db)
    db.execute("UPDATE meta SET cloud_url = ? WHERE singleton = 1", (cloud_url,))


def set_enrollment(
    db: Database, *, device_id: str, space_id: str, credential: str, cloud_url: str
) -> None:
    _require_tx(db)
    db.execute(
        "UPDATE meta SET device_id = ?, space_id = ?, credential = ?, cloud_url = ? "
        "WHERE singleton = 1",
        (device_id, space_id, credential, cloud_url),
    )


def set_account_key(db: Database, account_key: bytes) -> None:
    _require_tx(db)
    db.execute("UPDATE meta SET account_key = ? WHERE singleton = 1", (account_key,))


def set_cursor(db: Database, cursor: str) -> None:
    _require_tx(db)
    db.execute("UPDATE meta SET pull_cursor = ? WHERE singleton = 1", (cursor,))


def set_last_synced(db: Database, at: str) -> None:
    """A sync went through at ``at`` (``device.sync_status`` reads it)."""
    _require_tx(db)
    db.execute("UPDATE meta SET last_synced_at = ? WHERE singleton = 1", (at,))


def last_synced_at(db: Database) -> str | None:
    row = db.one("SELECT last_synced_at FROM meta WHERE singleton = 1")
    return None if row is None else row["last_synced_at"]


def oldest_queued_at(db: Database) -> str | None:
    row = db.one("SELECT min(queued_at) FROM op_queue")
    return None if row is None else row[0]


def held_count(db: Database) -> int:
    """How many records this device holds the content of (live, with a version)."""
    return int(
        db.one(
            "SELECT count(*) FROM records WHERE lifecycle != 'permanently_forgotten' "
            "AND current_version IS NOT NULL"
        )[0]
    )


# --- data keys ------------------------------------------------------------------------


def put_key(db: Database, key_id: str, dek: bytes, origin: str) -> None:
    _require_tx(db)
    db.execute(
        "INSERT INTO data_keys (key_id, dek, origin) VALUES (?, ?, ?)", (key_id, dek, origin)
    )


def put_key_once(db: Database, key_id: str, dek: bytes, origin: str) -> bytes | None:
    """INSERT a data key unless one is held under ``key_id`` (one statement, not a read
    then a write); returns the bytes already held, or None when it was inserted now."""
    _require_tx(db)
    cursor = db.execute(
        "INSERT INTO data_keys (key_id, dek, origin) VALUES (?, ?, ?) "
        "ON CONFLICT (key_id) DO NOTHING",
        (key_id, dek, origin),
    )
    if cursor.rowcount == 1:
        return None
    held = get_key(db, key_id)
    if held is None:
        raise RuntimeError(f"data key {key_id} was neither inserted nor held")
    return held


def get_key(db: Database, key_id: str) -> bytes | None:
    row = db.one("SELECT dek FROM data_keys WHERE key_id = ?", (key_id,))
    return None if row is None else bytes(row["dek"])


def key_ids(db: Database) -> set[str]:
    return {row["key_id"] for row in db.all("SELECT key_id FROM data_keys")}


# --- episodes -------------------------------------------------------------------------


def insert_episode(
    db: Database,
    *,
    episode_id: str,
    conversation_id: str,
    typed_at: str,
    bound_space: str,
    key_id: str,
    sealed: bytes,
    sync_state: SyncState,
) -> None:
    _require_tx(db)
    db.execute(
        "INSERT INTO episodes (episode_id, conversation_id, typed_at, bound_space, key_id, "
        "sealed, sync_state) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (episode_id, conversation_id, typed_at, bound_space, key_id, sealed, sync_state),
    )


def episode_row(db: Database, episode_id: str) -> Any:
    return db.one("SELECT * FROM episodes WHERE episode_id = ?", (episode_id,))


def episode_known(db: Database, episode_id: str) -> tuple[bool, bool]:
    """(forgotten here: a tombstone, held here: a row) for an episode, in one read."""
    row = db.one(
        "SELECT EXISTS (SELECT 1 FROM forgotten_episodes WHERE episode_id = ?), "
        "EXISTS (SELECT 1 FROM episodes WHERE episode_id = ?)",
        (episode_id, episode_id),
    )
    return bool(row[0]), bool(row[1])


def episode_forgotten(db: Database, episode_id: str) -> bool:
    row = db.one("SELECT 1 FROM forgotten_episodes WHERE episode_id = ?", (episode_id,))
    return row is not None


def conversation_episodes(db: Database, conversation_id: str) -> list[Any]:
    """Episodes of a conversation the device still holds and the cloud did not refuse."""
    return db.all(
        "SELECT * FROM episodes WHERE conversation_id = ? AND sync_state != ? "
        "ORDER BY typed_at, rowid",
        (conversation_id, SyncState.REFUSED),
    )


def open_episode(db: Database, row: Any) -> EpisodeContent:
    return open_episode_with(row, get_key(db, row["key_id"]))


def open_episode_with(row: Any, dek: bytes | None) -> EpisodeContent:
    """An episode row opened with its data key (None: the key is gone, ``LookupError``)."""
    if dek is None:
        raise LookupError(f"episode {row['episode_id']} has no data key on this device")
    plain = open_item(
        dek, bytes(row["sealed"]), row["bound_space"], "episode", row["episode_id"], 1
    )
    return EpisodeContent.model_validate_json(plain)


def set_episode_sync(db: Database, episode_id: str, state: SyncState, reason: str | None) -> None:
    _require_tx(db)
    db.execute(
        "UPDATE episodes SET sync_state = ?, refusal_reason = ? WHERE episode_id = ?",
        (state, reason, episode_id),
    )


# --- records --------------------------------------------------------------------------


def record_row(db: Database, record_id: str) -> Any:
    return db.one("SELECT * FROM records WHERE record_id = ?", (record_id,))


def insert_record(
    db: Database, *, record_id: str, lifecycle: str, current_version: int, sync_state: SyncState
) -> None:
    _changing(db, record_id)
    db.execute(
        "INSERT INTO records (record_id, lifecycle, current_version, sync_state) "
        "VALUES (?, ?, ?, ?)",
        (record_id, lifecycle, current_version, sync_state),
    )


def set_record_state(
    db: Database,
    record_id: str,
    *,
    lifecycle: str | None = None,
    current_version: int | None = None,
    sync_state: SyncState | None = None,
    refusal_reason: str | None = None,
) -> None:
    """Change a record's metadata (never its content); None leaves a field as it is,
    except ``refusal_reason`` which is set whenever ``sync_state`` is given."""
    if lifecycle is not None or current_version is not None:
        _changing(db, record_id)
    _require_tx(db)
    if lifecycle is not None:
        db.execute("UPDATE records SET lifecycle = ? WHERE record_id = ?", (lifecycle, record_id))
    if current_version is not None:
        db.execute(
            "UPDATE records SET current_version = max(coalesce(current_version, 0), ?) "
            "WHERE record_id = ?",
            (current_version, record_id),
        )
    if sync_state is not None:
        db.execute(
            "UPDATE records SET sync_state = ?, refusal_reason = ? WHERE record_id = ?",
            (sync_state, refusal_reason, record_id),
        )


# The cloud's word on a record's whole state (a pulled ``record_state``) in one UPDATE:
# lifecycle, the exact current version, usage, flags; synced, no refusal. The same as
# ``set_record_state`` (lifecycle, synced) then ``set_current_version``, ``set_usage``,
# ``set_superseded_by`` and ``set_conflicts``. Its rows come from ``pulled_state_row``;
# ``device.sync_rows.PageRows`` writes a page's of them at once.
SET_PULLED_STATE = (
    "UPDATE records SET lifecycle = ?, sync_state = ?, refusal_reason = NULL, "
    "current_version = ?, usage_area = ?, usage_project = ?, superseded_by = ?, "
    "conflicts_with = ? WHERE record_id = ?"
)


def pulled_state_row(
    record_id: str,
    *,
    lifecycle: str,
    current_version: int | None,
    usage_area: str | None,
    usage_project: str | None,
    superseded_by: str | None,
    conflicts: Iterable[str],
) -> tuple[Any, ...]:
    """The parameters of ``SET_PULLED_STATE`` for one record."""
    return (
        lifecycle,
        SyncState.SYNCED,
        current_version,
        usage_area,
        usage_project,
        superseded_by,
        json.dumps(sorted(set(conflicts))),
        record_id,
    )


def note_refusal(db: Database, record_id: str, reason: str | None) -> None:
    """Remember why the cloud refused an op on this record (its sync state stays)."""
    _require_tx(db)
    db.execute("UPDATE records SET refusal_reason = ? WHERE record_id = ?", (reason, record_id))


def set_current_version(db: Database, record_id: str, version: int | None) -> None:
    """Set the current version exactly (the server's word, or a local new version)."""
    _changing(db, record_id)
    db.execute("UPDATE records SET current_version = ? WHERE record_id = ?", (version, record_id))


def set_usage(db: Database, record_id: str, area: str | None, project: str | None) -> None:
    _changing(db, record_id)
    db.execute(
        "UPDATE records SET usage_area = ?, usage_project = ? WHERE record_id = ?",
        (area, project, record_id),
    )


def set_superseded_by(db: Database, record_id: str, by_record: str | None) -> None:
    _changing(db, record_id)
    db.execute("UPDATE records SET superseded_by = ? WHERE record_id = ?", (by_record, record_id))


def set_conflicts(db: Database, record_id: str, others: Iterable[str]) -> None:
    _changing(db, record_id)
    db.execute(
        "UPDATE records SET conflicts_with = ? WHERE record_id = ?",
        (json.dumps(sorted(set(others))), record_id),
    )


def conflicts_of(row: Any) -> list[str]:
    return list(json.loads(row["conflicts_with"] or "[]"))


def all_records(db: Database) -> list[Any]:
    return db.all("SELECT * FROM records ORDER BY rowid")


def insert_version(
    db: Database,
    *,
    record_id: str,
    version: int,
    supersedes: int | None,
    epistemic_state: str,
    recorded_at: str,
    bound_space: str,
    key_id: str,
    sealed: bytes,
) -> None:
    _changing(db, record_id)
    db.execute(
        "INSERT INTO record_versions (record_id, version, supersedes, epistemic_state, "
        "recorded_at, bound_space, key_id, sealed) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (record_id, version, supersedes, epistemic_state, recorded_at, bound_space, key_id, sealed),
    )


def version_row(db: Database, record_id: str, version: int) -> Any:
    return db.one(
        "SELECT * FROM record_versions WHERE record_id = ? AND version = ?", (record_id, version)
    )


def highest_version(db: Database, record_id: str) -> int:
    """The highest version number held for ``record_id`` (0: none), provisional or not."""
    row = db.one("SELECT max(version) FROM record_versions WHERE record_id = ?", (record_id,))
    return 0 if row is None or row[0] is None else int(row[0])


def versions_of(db: Database, record_id: str) -> list[Any]:
    return db.all(
        "SELECT * FROM record_versions WHERE record_id = ? ORDER BY version", (record_id,)
    )


def open_version(db: Database, row: Any) -> RecordContent:
    return open_version_with(row, get_key(db, row["key_id"]))


def open_version_with(row: Any, dek: bytes | None) -> RecordContent:
    """A version row opened with its data key (None: the key is gone, ``LookupError``)."""
    if dek is None:
        raise LookupError(
            f"record {row['record_id']} v{row['version']} has no data key on this device"
        )
    plain = open_item(
        dek, bytes(row["sealed"]), row["bound_space"], "record", row["record_id"], row["version"]
    )
    return RecordContent.model_validate_json(plain)


def source_episode_ids(db: Database, record_id: str) -> list[str]:
    """The source episodes of every readable version of the record, first seen first
    (a version whose key is gone names none)."""
    out: list[str] = []
    for row in versions_of(db, record_id):
        try:
            sources = open_version(db, row).source_episode_ids
        except (LookupError, SealError):
            continue
        out.extend(e for e in sources if e not in out)
    return out


# --- queue, receipts, acks ------------------------------------------------------------


def enqueue(
    db: Database,
    *,
    op_id: str,
    kind: str,
    record_id: str | None,
    episode_id: str | None,
    op_json: str,
    queued_at: str,
    artifact_id: str | None = None,
    version: int | None = None,
) -> None:
    _require_tx(db)
    db.execute(
        "INSERT INTO op_queue (op_id, kind, record_id, episode_id, artifact_id, version, "
        "op_json, queued_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (op_id, kind, record_id, episode_id, artifact_id, version, op_json, queued_at),
    )


def queue_batch(db: Database, limit: int) -> list[Any]:
    return db.all("SELECT * FROM op_queue ORDER BY seq LIMIT ?", (limit,))


def queue_count(db: Database) -> int:
    return int(db.one("SELECT count(*) FROM op_queue")[0])


def dequeue(db: Database, op_id: str) -> None:
    _require_tx(db)
    db.execute("DELETE FROM op_queue WHERE op_id = ?", (op_id,))


def store_receipt(
    db: Database,
    *,
    op_id: str,
    kind: str,
    record_id: str | None,
    episode_id: str | None,
    receipt_json: str,
    stored_at: str,
) -> None:
    _require_tx(db)
    db.execute(
        "INSERT OR REPLACE INTO receipts (op_id, kind, record_id, episode_id, receipt_json, "
        "stored_at) VALUES (?, ?, ?, ?, ?, ?)",
        (op_id, kind, record_id, episode_id, receipt_json, stored_at),
    )


def receipt_json(db: Database, op_id: str) -> str | None:
    row = db.one("SELECT receipt_json FROM receipts WHERE op_id = ?", (op_id,))
    return None if row is None else str(row["receipt_json"])


def add_pending_ack(db: Database, event_id: int, record_id: str, received_at: str) -> None:
    _require_tx(db)
    db.execute(
        "INSERT OR IGNORE INTO pending_acks (event_id, record_id, received_at) VALUES (?, ?, ?)",
        (event_id, record_id, received_at),
    )


def forget_credential(db: Database) -> None:
    """Drop the cloud credential (a revoked device can never use it again)."""
    db.execute("UPDATE meta SET credential = NULL")


def mark_wiped(db: Database, at: str) -> None:
    """This revoked device wiped its memory; the credential stays until the cloud has
    heard the confirmation (``Meta.wipe_unconfirmed``)."""
    _require_tx(db)
    db.execute("UPDATE meta SET wiped_at = coalesce(wiped_at, ?) WHERE singleton = 1", (at,))


def pending_acks(db: Database) -> list[int]:
    return [int(row["event_id"]) for row in db.all("SELECT event_id FROM pending_acks ORDER BY 1")]


def drop_acks(db: Database, event_ids: Iterable[int]) -> None:
    _require_tx(db)
    for event_id in event_ids:
        db.execute("DELETE FROM pending_acks WHERE event_id = ?", (event_id,))
