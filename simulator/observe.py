"""Reading a device's own state for the simulator's checks and samples.

Invariants: every read goes to the device's SQLCipher store through its agent (the
simulator's tool access, ``DeviceAgent._debug_db``); nothing here writes. A device
"holds" a record's content while it keeps any version, any readable text or any data
key of it; a skeleton with no key is not holding it.

The reads between steps (``held_now``, ``queued_ops``, ``pull_cursor``,
``live_record_ids``) are remembered per open agent together with the database's change
mark: the rows its own connection changed (``total_changes``, triggers included) and
SQLite's ``data_version`` (bumped by any commit of another connection, such as a sync
process of the same device). A read is answered from memory only while both are
exactly as they were when it was made, so it is the answer a fresh read would give;
a reopened device is a new agent and starts afresh. The final checks read afresh.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

from device import store
from device.agent import DeviceAgent
from device.errors import UnknownRecord
from protocol.model import LifecycleState
from protocol.operations import Receipt
from simulator.fleet import DeviceHandle, Fleet

FORGOTTEN = LifecycleState.FORGOTTEN.value


def device_key(handle: DeviceHandle) -> str:
    """The name a report uses for a device: ``<user>/<device>``."""
    return f"{handle.user.name}/{handle.name}"


def handles_by_key(fleet: Fleet) -> dict[str, DeviceHandle]:
    return {device_key(h): h for h in fleet.devices()}


@dataclass(frozen=True)
class VersionText:
    version: int
    text: str | None


_PARSED_LIMIT = 100_000
_parsed: dict[str, Receipt] = {}  # a receipt's stored JSON -> the receipt it reads as


def _receipt(raw: str) -> Receipt:
    receipt = _parsed.get(raw)
    if receipt is None:
        if len(_parsed) >= _PARSED_LIMIT:
            _parsed.clear()
        receipt = _parsed[raw] = Receipt.model_validate_json(raw)
    return receipt


def stored_receipts(handle: DeviceHandle) -> list[Receipt]:
    """The cloud receipts this device stored (one per pushed op that was answered)."""
    rows = handle.agent._debug_db().all("SELECT receipt_json FROM receipts ORDER BY op_id")
    return [_receipt(row["receipt_json"]) for row in rows]


def record_key_ids(handle: DeviceHandle, record_id: str) -> list[str]:
    """Key ids of the record's versions and source episodes held on this device."""
    db = handle.agent._debug_db()
    key_ids = [row["key_id"] for row in store.versions_of(db, record_id)]
    for episode_id in store.source_episode_ids(db, record_id):
        row = store.episode_row(db, episode_id)
        if row is not None:
            key_ids.append(row["key_id"])
    return list(dict.fromkeys(key_ids))


def version_texts(handle: DeviceHandle, record_id: str) -> list[VersionText]:
    """The record's versions on this device, oldest first (empty: never held here)."""
    try:
        history = handle.agent.record_history(record_id)
    except UnknownRecord:
        return []
    return [VersionText(v.version, v.text) for v in history]


def holds_content(handle: DeviceHandle, record_id: str) -> bool:
    """Whether the device still keeps any text or data key of the record."""
    if handle.agent.data_keys_for(record_id):
        return True
    return any(v.text for v in version_texts(handle, record_id))


# --- reads between steps, remembered while the database is unchanged ----------------


@dataclass
class _Snapshot:
    mark: tuple[int, int]  # (total_changes of the agent's connection, data_version)
    holds: dict[str, bool] = field(default_factory=dict)
    queue: int | None = None
    cursor: tuple[str | None] | None = None  # (the cursor,) once read
    live: frozenset[str] | None = None


_snapshots: weakref.WeakKeyDictionary[DeviceAgent, _Snapshot] = weakref.WeakKeyDictionary()


def _snapshot(handle: DeviceHandle) -> _Snapshot:
    """What is known of the device's database as it is now (empty after any change)."""
    agent = handle.agent
    db = agent._debug_db()
    mark = (int(db.conn.total_changes), int(db.one("PRAGMA data_version")[0]))
    snapshot = _snapshots.get(agent)
    if snapshot is None or snapshot.mark != mark:
        snapshot = _snapshots[agent] = _Snapshot(mark)
    return snapshot


def held_now(handle: DeviceHandle, record_id: str) -> bool:
    """``holds_content``, remembered while the device's database is unchanged."""
    snapshot = _snapshot(handle)
    held = snapshot.holds.get(record_id)
    if held is None:
        held = snapshot.holds[record_id] = holds_content(handle, record_id)
    return held


def queued_ops(handle: DeviceHandle) -> int:
    """The device's queue length, remembered while its database is unchanged."""
    snapshot = _snapshot(handle)
    if snapshot.queue is None:
        snapshot.queue = handle.agent.pending_ops()
    return snapshot.queue


def pull_cursor(handle: DeviceHandle) -> str | None:
    """The device's pull cursor, remembered while its database is unchanged."""
    snapshot = _snapshot(handle)
    if snapshot.cursor is None:
        snapshot.cursor = (store.get_meta(handle.agent._debug_db()).pull_cursor,)
    return snapshot.cursor[0]


def live_record_ids(handle: DeviceHandle) -> set[str]:
    """Records the device holds and may still edit (not forgotten here): its records'
    lifecycles as ``list_records`` shows them, read from their rows."""
    snapshot = _snapshot(handle)
    if snapshot.live is None:
        rows = store.all_records(handle.agent._debug_db())
        snapshot.live = frozenset(r["record_id"] for r in rows if r["lifecycle"] != FORGOTTEN)
    return set(snapshot.live)
