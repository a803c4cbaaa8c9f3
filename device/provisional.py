"""A device's own record versions that the cloud has not numbered yet ("provisional").

Invariants:
- A version is provisional while a queued op that adds a version to an existing record
  (``correct``, ``revise_rule``) names it (``op_queue.version``): the device numbered
  it next after what it held, but the cloud numbers versions in its own order, so
  another device's version may take that number first (two offline corrections of one
  record). A new record's version 1 is never provisional: its id is the device's own,
  so no one else can number a version of it first.
- The cloud's numbering wins, and neither copy of the words is lost: a pulled version
  at a provisional number moves the provisional one aside first (``move_aside``); a
  receipt that numbers the op's version otherwise files it under the cloud's number
  (``file_as``), or retires it when the cloud's copy of it is already held here.
- Moving is append, then retire: the words are sealed anew under the new number (a
  fresh data key) before the old row is retired through ``device.shred``, so no step
  can lose them, and no row is ever updated in place.
- A moved-aside version may sit above the record's current one (the pulled version is
  current), so a new local version is numbered above every version held
  (``RecordFacts.highest_version``), never at current + 1.
- Everything runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Callable

from device import keys, search, shred, store
from device.db import Database

RandomBytes = Callable[[int], bytes]


def queued_version(db: Database, op_id: str) -> int | None:
    """The version a queued op names now (an earlier move may have changed it)."""
    row = db.one("SELECT version FROM op_queue WHERE op_id = ?", (op_id,))
    return None if row is None or row[0] is None else int(row[0])


# the queued ops whose version the cloud may number otherwise
_ADDS_A_VERSION = "kind IN ('correct', 'revise_rule')"


def is_provisional(db: Database, record_id: str, version: int) -> bool:
    row = db.one(
        f"SELECT 1 FROM op_queue WHERE record_id = ? AND version = ? AND {_ADDS_A_VERSION} LIMIT 1",
        (record_id, version),
    )
    return row is not None


def confirmed_version(db: Database, record_id: str) -> int | None:
    """The newest version of ``record_id`` this device holds that the cloud numbered (it
    came from a pull, or a receipt confirmed it); None if every held one is provisional."""
    row = db.one(
        "SELECT max(version) FROM record_versions v WHERE record_id = ? AND NOT EXISTS "
        "(SELECT 1 FROM op_queue q WHERE q.record_id = v.record_id AND q.version = v.version "
        f"AND q.{_ADDS_A_VERSION})",
        (record_id,),
    )
    return None if row is None or row[0] is None else int(row[0])


def move_aside(db: Database, record_id: str, version: int, random_bytes: RandomBytes) -> int:
    """Free ``version`` for the cloud's copy: file the provisional one after every
    version held; return its new number."""
    new = store.highest_version(db, record_id) + 1
    row = store.version_row(db, record_id, version)
    _refile(db, record_id, version, new, row["supersedes"], random_bytes)
    return new


def file_as(
    db: Database,
    record_id: str,
    local: int,
    cloud: int,
    supersedes: int | None,
    random_bytes: RandomBytes,
) -> None:
    """The cloud numbered this device's provisional version ``local`` as ``cloud``."""
    if local == cloud or store.version_row(db, record_id, local) is None:
        return
    if store.version_row(db, record_id, cloud) is not None:
        if not is_provisional(db, record_id, cloud):
            # the cloud's copy of these words is already here (pulled before the receipt)
            _retire(db, record_id, local, replaced_by=cloud)
            return
        move_aside(db, record_id, cloud, random_bytes)  # another queued op's version
    _refile(db, record_id, local, cloud, supersedes, random_bytes)


def _refile(
    db: Database,
    record_id: str,
    old: int,
    new: int,
    supersedes: int | None,
    random_bytes: RandomBytes,
) -> None:
    row = store.version_row(db, record_id, old)
    dek = store.get_key(db, row["key_id"])
    if dek is None:
        raise LookupError(f"record {record_id} v{old} has no data key on this device")
    space = row["bound_space"]
    plain = keys.open_item(dek, bytes(row["sealed"]), space, "record", record_id, old)
    sealed = keys.seal_new(random_bytes, space, "record", record_id, new, plain)
    store.put_key(db, sealed.key_id, sealed.dek, "local")
    store.insert_version(
        db,
        record_id=record_id,
        version=new,
        supersedes=supersedes,
        epistemic_state=row["epistemic_state"],
        recorded_at=row["recorded_at"],
        bound_space=space,
        key_id=sealed.key_id,
        sealed=sealed.sealed,
    )
    db.execute(
        "UPDATE op_queue SET version = ? WHERE record_id = ? AND version = ? "
        f"AND {_ADDS_A_VERSION}",
        (new, record_id, old),
    )
    _retire(db, record_id, old, replaced_by=new)


def _retire(db: Database, record_id: str, version: int, *, replaced_by: int) -> None:
    record = store.record_row(db, record_id)
    if record is not None and record["current_version"] == version:
        store.set_current_version(db, record_id, replaced_by)
    shred.retire_version(db, record_id, version)
    search.catch_up(db, [record_id])  # the index follows the current version's number
