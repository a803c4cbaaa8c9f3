"""What this device holds, read from its database: records, their data keys,
artifacts, queued ops and receipts, and why the subset put a record here.

Invariants:
- Reads only; nothing here writes, so every answer is true in temporary mode too.
- A record is held when its row is here and not permanently forgotten (a skeleton is
  not held); data keys are the raw DEKs still in the key table, so after a forget or
  an eviction they are gone, not hidden.
- A receipt is the cloud's once the op was pushed, else the local one.
"""

from __future__ import annotations

from device import catalog, store
from device import subset as device_subset
from device.db import Database
from protocol.model import LifecycleState
from protocol.operations import Receipt

FORGOTTEN = LifecycleState.FORGOTTEN.value


def holds(db: Database, record_id: str) -> bool:
    row = store.record_row(db, record_id)
    return row is not None and row["lifecycle"] != FORGOTTEN


def held_records(db: Database) -> set[str]:
    return device_subset.held(db)


def held_because(db: Database, record_id: str) -> str | None:
    return device_subset.reason(db, record_id)


def receipt(db: Database, op_id: str) -> Receipt | None:
    raw = store.receipt_json(db, op_id) or catalog.local_receipt_json(db, op_id)
    return None if raw is None else Receipt.model_validate_json(raw)


def data_keys_for(db: Database, record_id: str) -> list[bytes]:
    """Raw DEKs held for the record's versions and its source episodes."""
    key_ids = [version["key_id"] for version in store.versions_of(db, record_id)]
    for episode_id in store.source_episode_ids(db, record_id):
        row = store.episode_row(db, episode_id)
        if row is not None:
            key_ids.append(row["key_id"])
    deks = [store.get_key(db, k) for k in dict.fromkeys(key_ids)]
    return [d for d in deks if d is not None]


def data_keys_for_artifact(db: Database, artifact_id: str) -> list[bytes]:
    row = catalog.artifact_row(db, artifact_id)
    dek = None if row is None else store.get_key(db, row["key_id"])
    return [] if dek is None else [dek]
