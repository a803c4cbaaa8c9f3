"""The invariant checks of edits that race: concurrent corrections, and offline edits
of a record forgotten elsewhere (re-exported by ``simulator.invariants``).

Invariants of this module:
- ``conflicts_kept``: two devices' concurrent corrections of one record both survive
  (in the cloud and on every device that holds the record) and are flagged (a
  ``conflict`` receipt or ``conflicts_with``), never silently dropped.
- ``stale_edits_refused``: an offline device's queued edit to a record forgotten
  elsewhere is refused (``forgotten``) or shredded unsent, never applied, and the
  record stays a skeleton everywhere.
Each reads real copies (the devices through their agents, the cloud through the
operator handle) and names the device, the record and the operation at fault.
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.model import LifecycleState
from protocol.operations import ReceiptStatus, RefusalCode
from simulator.check_basics import (
    applied,
    check,
    effective,
    forgotten_on,
    harvest,
    short,
    skeleton_everywhere,
)
from simulator.cloud_view import CloudView
from simulator.fleet import DeviceHandle, Fleet
from simulator.observe import device_key, version_texts
from simulator.report import Check
from simulator.trace import RunTrace

CONFLICTS_KEPT = "concurrent edits kept and flagged, never silently dropped"
STALE_REFUSED = "an offline edit to a record forgotten elsewhere is refused, no resurrection"


def conflicts_kept(fleet: Fleet, trace: RunTrace) -> Check:
    harvest(fleet, trace)
    view = CloudView(fleet.cloud.operator)
    held = trace.receipts
    problems: list[str] = []
    looked = 0
    skipped = 0
    for edit in trace.concurrent:
        rid = edit.record_id
        if rid in trace.forgotten:
            skipped += 1  # forgotten afterwards: nothing may be kept
            continue
        looked += 1
        receipts = [held.get(op_id) for _, op_id, _ in edit.edits]
        statuses = ["no receipt" if r is None else effective(r[1]).value for r in receipts]
        flagged_by_receipt = any(
            r is not None and effective(r[1]) is ReceiptStatus.CONFLICT for r in receipts
        )
        records = view.records(edit.space_id)
        record = records.get(rid)
        if record is None:
            problems.append(f"record {rid}: the cloud lacks it after a concurrent edit")
            continue
        family = [rid, *record.conflicts_with]
        cloud_texts = {
            text for r in family if r in records for _, text in view.version_texts(edit.space_id, r)
        }
        for who, op_id, text in edit.edits:
            if text not in cloud_texts:
                problems.append(
                    f"record {rid}: {who}'s concurrent correction {short(text)} (op {op_id}) "
                    "is in no version the cloud keeps"
                )
        for handle in edit_holders(fleet, edit.space_id, rid):
            mine = _texts_held(handle, family)
            lost = [text for _, _, text in edit.edits if text not in mine]
            if lost:
                problems.append(
                    f"{device_key(handle)} lost {', '.join(short(t) for t in lost)} of "
                    f"record {rid} (its history: {sorted(t for t in mine if t)})"
                )
        if not (flagged_by_receipt or record.conflicts_with):
            problems.append(
                f"record {rid}: concurrent corrections by "
                f"{' and '.join(who for who, _, _ in edit.edits)} were applied in turn "
                f"(receipts: {', '.join(statuses)}; now v{record.current_version}) and "
                "nothing flags the conflict (no conflict receipt, conflicts_with empty)"
            )
    return check(
        CONFLICTS_KEPT,
        problems,
        f"{len(trace.concurrent)} concurrent edit(s): {looked} kept and flagged, {skipped} "
        "forgotten afterwards",
    )


def edit_holders(fleet: Fleet, space_id: str, record_id: str) -> list[DeviceHandle]:
    out = []
    for handle in fleet.devices():
        if handle.user.space_id != space_id:
            continue
        if any(v.record_id == record_id for v in handle.agent.list_records()):
            out.append(handle)
    return out


def _texts_held(handle: DeviceHandle, record_ids: Iterable[str]) -> set[str | None]:
    texts: set[str | None] = set()
    for rid in record_ids:
        texts.update(v.text for v in version_texts(handle, rid))
    return texts


def stale_edits_refused(fleet: Fleet, trace: RunTrace) -> Check:
    """The cloud refuses the edit as ``forgotten`` — or the device, told of the forget
    before it pushed (the cloud answers ``pull_required`` while a device owes it an
    acknowledgement), shreds the record and the queued edit with it, unsent. Either way
    the cloud never applies it and the record stays a skeleton everywhere."""
    harvest(fleet, trace)
    view = CloudView(fleet.cloud.operator)
    handles = {device_key(h): h for h in fleet.devices()}
    problems: list[str] = []
    refused = dropped = 0
    for edit in trace.stale:
        cloud_receipt = view.receipts(edit.space_id).get(edit.op_id)
        if cloud_receipt is not None and applied(cloud_receipt):
            problems.append(
                f"{edit.device}'s edit {edit.op_id} of forgotten record {edit.record_id} was "
                "APPLIED by the cloud"
            )
        found = trace.receipts.get(edit.op_id)
        if found is not None:
            receipt = found[1]
            status = effective(receipt)
            if status is ReceiptStatus.REFUSED and receipt.code is RefusalCode.FORGOTTEN:
                refused += 1
            else:
                problems.append(
                    f"{edit.device}'s edit {edit.op_id} of forgotten record {edit.record_id} "
                    f"got {status.value} ({receipt.code.value if receipt.code else 'no code'}), "
                    "not refused as forgotten"
                )
        else:
            handle = handles.get(edit.device)
            if handle is not None and forgotten_on(handle, edit.record_id):
                dropped += 1
            else:
                problems.append(
                    f"{edit.device}'s edit {edit.op_id} of forgotten record {edit.record_id}: "
                    "no receipt, and the device does not show the record forgotten"
                )
        record = view.records(edit.space_id).get(edit.record_id)
        if record is None or record.lifecycle != LifecycleState.FORGOTTEN.value:
            state = "missing" if record is None else record.lifecycle
            problems.append(f"record {edit.record_id} came back in the cloud: {state}")
        forgotten = trace.forgotten.get(edit.record_id)
        if forgotten is not None:
            problems.extend(skeleton_everywhere(fleet, view, forgotten))
    return check(
        STALE_REFUSED,
        problems,
        f"{len(trace.stale)} offline edit(s) of records forgotten elsewhere: {refused} refused "
        f"by the cloud as forgotten, {dropped} shredded unsent on the device; none applied; "
        "the records stay skeletons everywhere",
    )
