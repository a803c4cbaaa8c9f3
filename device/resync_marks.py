"""A resync's bookkeeping on the device: its marker, what the cloud sent during it, and
the records it kept unseen because a queued op of this device creates them.

Invariants:
- Every write runs inside a caller's ``Database.atomic()`` block (``_require_tx``): the
  marker is set with the forgetting of what an interrupted resync saw, and cleared with
  the cursor's move, in the transaction that shreds what the cloud no longer has.
- What a resync may shred (``unseen_synced``) is only ``synced`` items the cloud did not
  send; never what is pending or refused, kept on this device only, or named by a
  queued operation.
- Whether the cloud still has a kept record is asked (``kept_records``), never inferred.
- Nothing here touches sealed content or data keys (``device.store``'s rule holds).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from device.db import Database
from device.sync_state import SyncState


def _require_tx(db: Database) -> None:
    if not db.in_transaction:
        raise RuntimeError("store writes must run inside Database.atomic()")


RESYNC_KINDS = ("record", "episode", "artifact")


def begin_resync(db: Database, started_at: str) -> None:
    """Set the resync marker and forget what an interrupted resync had seen."""
    _require_tx(db)
    db.execute("UPDATE meta SET resync_started_at = ? WHERE singleton = 1", (started_at,))
    db.execute("DELETE FROM resync_seen")


def note_seen(db: Database, items: Iterable[tuple[str, str]]) -> None:
    """The cloud sent these (kind, id) during the resync in progress."""
    _require_tx(db)
    for kind, item_id in items:
        db.execute(
            "INSERT OR IGNORE INTO resync_seen (kind, item_id) VALUES (?, ?)", (kind, item_id)
        )


@dataclass(frozen=True, slots=True)
class Unseen:
    """Synced items this device holds that the cloud did not send during a resync."""

    record_ids: tuple[str, ...]
    episode_ids: tuple[str, ...]
    artifact_ids: tuple[str, ...]


def unseen_synced(db: Database) -> Unseen:
    """What a finished resync must shred: items the cloud once gave or acknowledged
    (``synced``) that it did not send now. Never what is pending or refused, kept on
    this device only, or named by a queued operation (those are pushed afterwards)."""

    def ids(table: str, column: str, kind: str, extra: str) -> tuple[str, ...]:
        rows = db.all(
            f"SELECT {column} FROM {table} WHERE sync_state = ? {extra} "
            f"AND {column} NOT IN (SELECT item_id FROM resync_seen WHERE kind = ?) "
            f"AND {column} NOT IN (SELECT {column} FROM op_queue WHERE {column} IS NOT NULL) "
            f"ORDER BY {column}",
            (SyncState.SYNCED, kind),
        )
        return tuple(row[0] for row in rows)

    live = "AND device_only = 0 AND lifecycle != 'permanently_forgotten'"
    return Unseen(
        record_ids=ids("records", "record_id", "record", live),
        episode_ids=ids("episodes", "episode_id", "episode", "AND device_only = 0"),
        artifact_ids=ids("artifacts", "artifact_id", "artifact", ""),
    )


def note_kept(db: Database) -> None:
    """At the end of a resync: the records it kept unseen because a queued op of this
    device creates them. If the cloud answers that op ``duplicate``, whether it still
    has the record is asked (``kept_records``), never inferred."""
    _require_tx(db)
    db.execute(
        "INSERT OR IGNORE INTO resync_kept (record_id) SELECT DISTINCT record_id FROM op_queue "
        "WHERE kind IN ('remember', 'infer', 'consolidate') AND record_id IS NOT NULL "
        "AND record_id NOT IN (SELECT item_id FROM resync_seen WHERE kind = 'record')"
    )


def kept_records(db: Database, record_ids: Iterable[str]) -> set[str]:
    """Which of these records a resync kept unseen (``note_kept``)."""
    wanted = sorted(set(record_ids))
    if not wanted:
        return set()
    marks = ", ".join("?" * len(wanted))
    rows = db.all(f"SELECT record_id FROM resync_kept WHERE record_id IN ({marks})", wanted)
    return {row[0] for row in rows}


def drop_kept(db: Database, record_id: str) -> None:
    _require_tx(db)
    db.execute("DELETE FROM resync_kept WHERE record_id = ?", (record_id,))


def finish_resync(db: Database, cursor: str) -> None:
    """The end of a resync: the cursor moves and the marker is cleared (in the caller's
    transaction, the one that also shreds what the cloud no longer has)."""
    _require_tx(db)
    db.execute(
        "UPDATE meta SET pull_cursor = ?, resync_started_at = NULL WHERE singleton = 1",
        (cursor,),
    )
    db.execute("DELETE FROM resync_seen")
