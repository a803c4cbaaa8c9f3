"""The plain receipts of one push, stored set-at-a-time (``device.sync_push``).

Invariants:
- The rows left are exactly those ``Pushing._apply_receipt`` leaves receipt by receipt
  (a Hypothesis test holds the two paths equal). A receipt is *plain* when applying it
  alone writes only values that do not depend on what it reads: the op was applied (or
  was a duplicate or conflict of an applied one), it names no cloud-numbered version
  and no record the cloud's status says is forgotten. Its writes are then the receipt
  row, the dequeue, the dropped resync mark of a record it creates, and ``synced`` on
  its episode, artifact or record (a record already forgotten here keeps its state, as
  the one-by-one path's read decides); an UPDATE of a row that is gone writes nothing,
  as the one-by-one path's existence check does.
- Plain receipts are gathered in order and written by one ``executemany`` per table;
  any other receipt is applied alone, and only after the plain ones before it were
  written, so every row sees its writes in the order the receipts came.
- Runs inside the caller's transaction (the one the receipts are stored in); the clock
  is read once per receipt, in order, as the one-by-one path reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from device.db import Database
from device.sync_state import SyncState
from device.views import SyncReport
from protocol.model import LifecycleState
from protocol.operations import Receipt, ReceiptStatus

CREATING = frozenset({"remember", "infer"})
# the ops that create a record (a consolidation creates the cloud's own, on a device too)
RECORD_CREATING = CREATING | {"consolidate"}
_FORGOTTEN = LifecycleState.FORGOTTEN.value

_RECEIPT = (
    "INSERT OR REPLACE INTO receipts (op_id, kind, record_id, episode_id, receipt_json, "
    "stored_at) VALUES (?, ?, ?, ?, ?, ?)"
)
_DEQUEUE = "DELETE FROM op_queue WHERE op_id = ?"
_DROP_KEPT = "DELETE FROM resync_kept WHERE record_id = ?"
# the store's own statement (``store.set_episode_sync``): the append-only scan allows it alone
_EPISODE_SYNCED = "UPDATE episodes SET sync_state = ?, refusal_reason = ? WHERE episode_id = ?"
_ARTIFACT_SYNCED = "UPDATE artifacts SET sync_state = ?, refusal_reason = ? WHERE artifact_id = ?"
_CREATED_SYNCED = (
    "UPDATE records SET sync_state = ?, refusal_reason = ? "
    "WHERE record_id = ? AND lifecycle != '" + _FORGOTTEN + "'"
)
_FORGET_SYNCED = "UPDATE records SET sync_state = ?, refusal_reason = ? WHERE record_id = ?"


def plain_outcome(row: Any, receipt: Receipt, forgotten: set[str]) -> bool:
    """Whether ``receipt`` is plain (see the module comment)."""
    outcome = receipt.status
    if outcome is ReceiptStatus.DUPLICATE:
        outcome = receipt.original_status or ReceiptStatus.APPLIED
    if outcome is ReceiptStatus.CONFLICT and receipt.effect is not None:
        outcome = ReceiptStatus.APPLIED
    if outcome is not ReceiptStatus.APPLIED:
        return False
    record_id = row["record_id"]
    if record_id and len(receipt.versions) > 1:
        return False  # the cloud may have numbered this device's version otherwise
    return not (row["kind"] in RECORD_CREATING and record_id in forgotten)


@dataclass
class PlainReceipts:
    """Plain receipts gathered in order, written by ``flush``."""

    db: Database
    report: SyncReport
    receipts: list[tuple[Any, ...]] = field(default_factory=list)
    dequeued: list[tuple[str]] = field(default_factory=list)
    kept: list[tuple[str]] = field(default_factory=list)
    # the (state, no reason, id) rows each "synced" statement is run with
    episodes: list[tuple[str, None, str]] = field(default_factory=list)
    artifacts: list[tuple[str, None, str]] = field(default_factory=list)
    created: list[tuple[str, None, str]] = field(default_factory=list)
    forgets: list[tuple[str, None, str]] = field(default_factory=list)

    def add(self, row: Any, receipt: Receipt, stored_at: str) -> None:
        """One plain receipt (``plain_outcome``): its rows, and the report's counts."""
        op_id, kind, record_id = row["op_id"], row["kind"], row["record_id"]
        self.receipts.append(
            (op_id, kind, record_id, row["episode_id"], receipt.model_dump_json(), stored_at)
        )
        self.dequeued.append((op_id,))
        outcome = receipt.status
        if outcome is ReceiptStatus.DUPLICATE:
            self.report.duplicates += 1
            outcome = receipt.original_status or ReceiptStatus.APPLIED
        if outcome is ReceiptStatus.CONFLICT:  # applied and flagged (``plain_outcome``)
            self.report.conflicts.append((op_id, receipt.reason or ""))
        if kind in RECORD_CREATING:
            self.kept.append((record_id,))
        self.report.applied += 1
        synced = SyncState.SYNCED.value
        if kind == "add_episode":
            self.episodes.append((synced, None, row["episode_id"]))
        elif kind == "add_artifact":
            self.artifacts.append((synced, None, row["artifact_id"]))
        elif not record_id:
            return
        elif kind in CREATING:
            self.created.append((synced, None, record_id))
        elif kind == "forget_permanently":
            self.forgets.append((synced, None, record_id))

    def flush(self) -> None:
        """Write what was gathered (one statement per table) and start again."""
        for sql, rows in (
            (_RECEIPT, self.receipts),
            (_DEQUEUE, self.dequeued),
            (_DROP_KEPT, self.kept),
            (_EPISODE_SYNCED, self.episodes),
            (_ARTIFACT_SYNCED, self.artifacts),
            (_CREATED_SYNCED, self.created),
            (_FORGET_SYNCED, self.forgets),
        ):
            if rows:
                self.db.executemany(sql, rows)
                rows.clear()


def apply_all(
    db: Database,
    report: SyncReport,
    pairs: list[tuple[Any, Receipt]],
    forgotten: set[str],
    now: Callable[[], str],
    one: Callable[[Any, Receipt, set[str]], None],
) -> None:
    """Apply the receipts of one push in order: plain ones gathered, any other by
    ``one`` (the one-by-one path) once the plain ones before it are written."""
    plain = PlainReceipts(db, report)
    for row, receipt in pairs:
        if plain_outcome(row, receipt, forgotten):
            plain.add(row, receipt, now())
        else:
            plain.flush()
            one(row, receipt, forgotten)
    plain.flush()
