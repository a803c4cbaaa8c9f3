"""What the invariant checks share: a ``Check`` built from problems, a receipt read as
what it did, the receipts harvested into the trace, a forgotten record's skeleton.

Invariants of this module: a detail names at most ``MAX_LISTED`` problems and counts
the rest; a duplicate's receipt reads as its original status (``effective``); a check
passes exactly when it found no problem. Nothing here decides what a check looks at —
``simulator.invariants`` and ``simulator.race_checks`` do.
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.operations import Receipt, ReceiptStatus
from simulator.cloud_view import CloudView
from simulator.fleet import DeviceHandle, Fleet
from simulator.observe import FORGOTTEN, device_key, holds_content, stored_receipts
from simulator.report import Check
from simulator.trace import ForgottenRecord, RunTrace

MAX_LISTED = 5  # problems named in one detail; the rest are counted


def summary(problems: list[str], ok: str) -> str:
    if not problems:
        return ok
    shown = "; ".join(problems[:MAX_LISTED])
    more = len(problems) - MAX_LISTED
    return shown + (f"; and {more} more" if more > 0 else "")


def check(name: str, problems: list[str], ok: str) -> Check:
    return Check(name, not problems, summary(problems, ok))


def short(text: str | None, limit: int = 40) -> str:
    if text is None:
        return "None"
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def effective(receipt: Receipt) -> ReceiptStatus:
    """What the op got the first time (a duplicate's original status)."""
    if receipt.status is ReceiptStatus.DUPLICATE:
        return receipt.original_status or ReceiptStatus.APPLIED
    return receipt.status


def applied(receipt: Receipt) -> bool:
    """The op took effect: applied, or applied and flagged as a conflict (a correction
    that raced another device's)."""
    status = effective(receipt)
    return status is ReceiptStatus.APPLIED or (
        status is ReceiptStatus.CONFLICT and receipt.effect is not None
    )


def harvest(fleet: Fleet, trace: RunTrace, handles: Iterable[DeviceHandle] | None = None) -> None:
    """Note in the trace every cloud receipt the devices hold now. (A device drops the
    receipts of a record it shreds, so runs harvest after every sync and before every
    forget: an acknowledgement, once seen, stays in the trace.)"""
    for handle in fleet.devices() if handles is None else handles:
        for receipt in stored_receipts(handle):
            trace.acknowledge(device_key(handle), receipt)


def forgotten_on(handle: DeviceHandle, record_id: str) -> bool:
    views = [v for v in handle.agent.list_records() if v.record_id == record_id]
    return bool(views) and views[0].lifecycle == FORGOTTEN


def skeleton_everywhere(fleet: Fleet, view: CloudView, forgotten: ForgottenRecord) -> list[str]:
    rid = forgotten.record_id
    problems: list[str] = []
    cloud = view.records(forgotten.space_id).get(rid)
    if cloud is not None and not cloud.forgotten:
        problems.append(f"record {rid} (forgotten by {forgotten.device}) is {cloud.lifecycle}")
    if cloud is not None and any(text for _, text in view.version_texts(forgotten.space_id, rid)):
        problems.append(f"record {rid}: a version still opens in the cloud")
    for handle in fleet.devices():
        if handle.user.space_id != forgotten.space_id:
            continue
        views = {v.record_id: v for v in handle.agent.list_records()}
        local = views.get(rid)
        if local is not None and local.lifecycle != FORGOTTEN:
            problems.append(f"{device_key(handle)} shows record {rid} as {local.lifecycle}")
        elif holds_content(handle, rid):
            problems.append(f"{device_key(handle)} still holds text or keys of record {rid}")
    return problems
