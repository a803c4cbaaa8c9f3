"""The tables migration 2 added: subject index, derivation edges, artifacts, projects,
the record state history and local receipts.

Invariants:
- Nothing here UPDATEs or DELETEs sealed content: artifacts are INSERTed once (the
  triggers refuse changes) and removed only by ``device/shred.py``.
- The subject index and the derivation edges are derived from sealed content; they are
  what ``protocol.rules`` reads as ``related`` and ``children`` facts, and they are
  shredded with the record they came from.
- ``record_events`` only grows while a record lives: one row per lifecycle or version
  change, local or pulled; "as of" reads replay it.
- Every write runs inside a caller's ``Database.atomic()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from device import store
from device.db import Database
from device.keys import open_item
from device.sync_state import SyncState
from protocol import subjects
from protocol.errors import SealError
from protocol.model import ArtifactContent, RecordContent

if TYPE_CHECKING:
    from protocol.rules import DerivedItem


def _require_tx(db: Database) -> None:
    if not db.in_transaction:
        raise RuntimeError("store writes must run inside Database.atomic()")


# --- subject index ---------------------------------------------------------------------


def index_subject(db: Database, record_id: str, content: RecordContent) -> None:
    """(Re)index a record by ``subjects.stored_keys`` of its current content."""
    _require_tx(db)
    db.execute("DELETE FROM subject_index WHERE record_id = ?", (record_id,))
    db.executemany(
        "INSERT OR IGNORE INTO subject_index (record_id, subject_key) VALUES (?, ?)",
        (
            (record_id, key)
            for key in subjects.stored_keys(content.text, content.subject, content.context_text)
        ),
    )


def index_subjects(db: Database, items: Sequence[tuple[str, RecordContent]]) -> None:
    """``index_subject`` for many records at once (a pulled page): the rows of those
    that had some are deleted, and every key is inserted, a statement for the batch."""
    _require_tx(db)
    latest = {record_id: content for record_id, content in items}
    if not latest:
        return
    ids = list(latest)
    had: list[str] = []
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        had.extend(
            row[0]
            for row in db.all(
                f"SELECT DISTINCT record_id FROM subject_index WHERE record_id IN ({marks(part)})",
                part,
            )
        )
    db.executemany("DELETE FROM subject_index WHERE record_id = ?", [(r,) for r in had])
    db.executemany(
        "INSERT OR IGNORE INTO subject_index (record_id, subject_key) VALUES (?, ?)",
        [
            (record_id, key)
            for record_id, content in latest.items()
            for key in subjects.stored_keys(content.text, content.subject, content.context_text)
        ],
    )


def same_key_records(db: Database, keys: Sequence[str]) -> list[str]:
    """Records the subject index holds under any of ``keys`` (``rules.related_keys``)."""
    if not keys:
        return []
    rows = db.all(
        f"SELECT DISTINCT record_id FROM subject_index WHERE subject_key IN ({marks(keys)}) "
        "ORDER BY record_id",
        keys,
    )
    return [row["record_id"] for row in rows]


# --- derivation edges -------------------------------------------------------------------


def add_derivations(db: Database, child_kind: str, child_id: str, parents: Iterable[str]) -> None:
    _require_tx(db)
    rows = [(parent, child_kind, child_id) for parent in sorted(set(parents))]
    if rows:
        db.executemany(
            "INSERT OR IGNORE INTO derivations (parent_id, child_kind, child_id) VALUES (?, ?, ?)",
            rows,
        )


def children(db: Database) -> dict[str, list[DerivedItem]]:
    """Every derivation edge, parent record id -> derived items (as ``Facts.children``),
    in the reference ledger's order: derived records as they were created, then
    artifacts as they were created."""
    from protocol.rules import DerivedItem  # lazily: the rules are not needed to read

    edges: dict[str, list[DerivedItem]] = {}
    rows = db.all(
        "SELECT d.parent_id, d.child_kind, d.child_id FROM derivations d "
        "LEFT JOIN records r ON d.child_kind = 'record' AND r.record_id = d.child_id "
        "LEFT JOIN artifacts a ON d.child_kind = 'artifact' AND a.artifact_id = d.child_id "
        "ORDER BY d.parent_id, d.child_kind = 'artifact', coalesce(r.rowid, a.rowid), d.child_id"
    )
    for row in rows:
        edges.setdefault(row["parent_id"], []).append(
            DerivedItem(row["child_kind"], row["child_id"])
        )
    return edges


# --- artifacts --------------------------------------------------------------------------


def insert_artifact(
    db: Database,
    *,
    artifact_id: str,
    kind: str,
    created_at: str,
    bound_space: str,
    key_id: str,
    sealed: bytes,
    sync_state: SyncState,
) -> None:
    _require_tx(db)
    db.execute(
        "INSERT INTO artifacts (artifact_id, kind, created_at, bound_space, key_id, sealed, "
        "sync_state) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (artifact_id, kind, created_at, bound_space, key_id, sealed, sync_state),
    )


def artifact_row(db: Database, artifact_id: str) -> Any:
    return db.one("SELECT * FROM artifacts WHERE artifact_id = ?", (artifact_id,))


def artifact_forgotten(db: Database, artifact_id: str) -> bool:
    row = db.one("SELECT 1 FROM forgotten_artifacts WHERE artifact_id = ?", (artifact_id,))
    return row is not None


def open_artifact(db: Database, row: Any) -> ArtifactContent:
    key = db.one("SELECT dek FROM data_keys WHERE key_id = ?", (row["key_id"],))
    if key is None:
        raise LookupError(f"artifact {row['artifact_id']} has no data key on this device")
    plain = open_item(
        bytes(key["dek"]), bytes(row["sealed"]), row["bound_space"], "artifact",
        row["artifact_id"], 1,
    )  # fmt: skip
    return ArtifactContent.model_validate_json(plain)


def set_artifact_sync(db: Database, artifact_id: str, state: SyncState, reason: str | None) -> None:
    _require_tx(db)
    db.execute(
        "UPDATE artifacts SET sync_state = ?, refusal_reason = ? WHERE artifact_id = ?",
        (state, reason, artifact_id),
    )


def artifact_ids(db: Database) -> list[str]:
    return [r["artifact_id"] for r in db.all("SELECT artifact_id FROM artifacts ORDER BY 1")]


# --- projects ---------------------------------------------------------------------------


def set_project(db: Database, name: str, is_open: bool, at: str) -> None:
    _require_tx(db)
    db.execute(
        "INSERT INTO projects (name, open, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET open = excluded.open, updated_at = excluded.updated_at",
        (name, int(is_open), at),
    )


def projects(db: Database) -> dict[str, bool]:
    return {r["name"]: bool(r["open"]) for r in db.all("SELECT * FROM projects ORDER BY name")}


# --- record state history ---------------------------------------------------------------


def log_event(db: Database, record_id: str, at: str, lifecycle: str, version: int | None) -> None:
    _require_tx(db)
    db.execute(
        "INSERT INTO record_events (record_id, at, lifecycle, version) VALUES (?, ?, ?, ?)",
        (record_id, at, lifecycle, version),
    )


def events_of(db: Database, record_id: str) -> list[Any]:
    return db.all("SELECT * FROM record_events WHERE record_id = ? ORDER BY seq", (record_id,))


# --- local receipts ---------------------------------------------------------------------


def store_local_receipt(
    db: Database,
    *,
    op_id: str,
    kind: str,
    record_id: str | None,
    episode_id: str | None,
    artifact_id: str | None,
    receipt_json: str,
    stored_at: str,
) -> None:
    _require_tx(db)
    db.execute(
        "INSERT INTO local_receipts (op_id, kind, record_id, episode_id, artifact_id, "
        "receipt_json, stored_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (op_id, kind, record_id, episode_id, artifact_id, receipt_json, stored_at),
    )


def local_receipt_json(db: Database, op_id: str) -> str | None:
    row = db.one("SELECT receipt_json FROM local_receipts WHERE op_id = ?", (op_id,))
    return None if row is None else str(row["receipt_json"])


def marks(items: Sequence[str]) -> str:
    return ",".join("?" for _ in items) or "NULL"


def backfill_v2(db: Database, at: str) -> int:
    """Fill the subject index, derivation edges and state history for records held
    before migration 2 (it runs SQL only and cannot open sealed content)."""
    filled = 0
    with db.atomic():
        for row in store.all_records(db):
            if row["current_version"] is None:
                continue
            version = store.version_row(db, row["record_id"], int(row["current_version"]))
            if version is None:
                continue
            try:
                content = store.open_version(db, version)
            except (LookupError, SealError):
                continue
            index_subject(db, row["record_id"], content)
            add_derivations(db, "record", row["record_id"], content.derived_from)
            log_event(
                db, row["record_id"], version["recorded_at"], row["lifecycle"],
                int(row["current_version"]),
            )  # fmt: skip
            filled += 1
    return filled
