"""Reading a device's own state for the simulator's checks and samples.

Invariants: every read goes to the device's SQLCipher store through its agent (the
simulator's tool access, ``DeviceAgent._debug_db``); nothing here writes. A device
"holds" a record's content while it keeps any version, any readable text or any data
key of it; a skeleton with no key is not holding it.
"""

from __future__ import annotations

from dataclasses import dataclass

from device import store
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


def stored_receipts(handle: DeviceHandle) -> list[Receipt]:
    """The cloud receipts this device stored (one per pushed op that was answered)."""
    rows = handle.agent._debug_db().all("SELECT receipt_json FROM receipts ORDER BY op_id")
    return [Receipt.model_validate_json(row["receipt_json"]) for row in rows]


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


def live_record_ids(handle: DeviceHandle) -> set[str]:
    """Records the device holds and may still edit (not forgotten here)."""
    return {v.record_id for v in handle.agent.list_records() if v.lifecycle != FORGOTTEN}
