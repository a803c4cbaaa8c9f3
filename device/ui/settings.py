"""What the inspector's pages say of the cloud's side: the Settings page's devices,
pending forgets, subset and device-only classes; a forgotten record's pending devices;
a sync's sentence.

Invariants: the cloud being unreachable, or no cloud at all, is said in words and
never stops a page (everything on the device keeps working offline); the device-only
classes are listed from the device's own store, in words (``device.ui.labels``), in
the order of ``Sensitivity``; the subset's classes and areas are in words too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from device.agent import DeviceAgent
from device.errors import NoCloud, NotEnrolled, Offline, ServerError, UnknownRecord
from device.subset import describe as describe_subset
from device.sync_state import SyncState
from device.ui.labels import HELD_BECAUSE, LIFE_AREA, SENSITIVITY
from device.views import RecordView, SyncReport
from protocol.model import Sensitivity
from protocol.subset import SubsetPolicy, SubsetView

NOT_YET_SENT = "Not yet sent: this device is offline; the forget is queued"
CLOUD_UNREACHABLE = "The cloud could not be reached; everything on this device still works."


def settings_of(agent: DeviceAgent) -> dict[str, Any]:
    """The Settings page's context."""
    devices: list[Any] = []
    devices_note = None
    pending: list[str] = []
    try:
        devices = agent.devices()
        pending = [
            f"{f.record_id or 'episodes of all memory'} (forgotten on "
            f"{f.forgotten_at.date().isoformat()}): still on "
            + ", ".join(d.device_name for d in f.pending)
            for f in agent.pending_forgets()
            if f.pending
        ]
    except (Offline, ServerError):
        devices_note = "The cloud could not be reached, so the devices are not known now."
    except (NotEnrolled, NoCloud):
        devices_note = "This device is not enrolled with a cloud; it works on its own."
    subset_policy: SubsetPolicy | None = None
    if devices_note is None:
        try:
            view = agent.subset()
            subset_lines = subset_in_words(view)
            subset_policy = view.policy
        except (Offline, ServerError, NotEnrolled, NoCloud):
            subset_lines = [CLOUD_UNREACHABLE]
    else:
        subset_lines = [devices_note]
    kept = agent.device_only_classes()
    return {
        "temporary": agent.temporary_mode,
        "devices": devices,
        "this_device": agent.device_id,
        "devices_note": devices_note,
        "pending": pending,
        "subset_lines": subset_lines,
        "subset_policy": subset_policy,
        "device_only": [(c.value, SENSITIVITY[c]) for c in Sensitivity if c in kept],
    }


def subset_in_words(view: SubsetView) -> list[str]:
    """``device.subset.describe``'s lines, with each class and area in words."""
    classes = {
        f"  {entry.reason.value.replace('_', ' ')}: {entry.records}": (
            f"{entry.records} record(s) kept because {HELD_BECAUSE[entry.reason]}"
        )
        for entry in view.by_reason
    }
    areas = view.policy.rules.areas
    lines = []
    for line in describe_subset(view).split("\n"):
        if line in classes:
            line = classes[line]
        elif line.startswith("For areas: ") and areas:
            line = "For areas: " + ", ".join(LIFE_AREA[a] for a in areas)
        lines.append(line)
    return lines


def synced(report: SyncReport) -> str:
    """What a sync did, in a sentence."""
    text = (
        f"Synced: pushed {report.pushed} change(s) (applied {report.applied}, "
        f"refused {len(report.refused)}), pulled {report.pulled}, "
        f"forgot {len(report.shredded)} on this device."
    )
    if report.entered or report.left:
        text += (
            f" {len(report.entered)} record(s) came to this device and "
            f"{len(report.left)} left it (they are still in the cloud)."
        )
    return text


def pending_lines(agent: DeviceAgent, view: RecordView) -> Sequence[str]:
    """Which devices still hold keys of the forgotten record (the cloud's word)."""
    if view.sync_state == SyncState.PENDING:
        return [NOT_YET_SENT]
    try:
        forgets = agent.pending_forgets()
    except (Offline, ServerError, NotEnrolled, NoCloud):
        return [NOT_YET_SENT]
    except UnknownRecord:  # pragma: no cover - the cloud names records it held
        return []
    for status in forgets:
        if status.record_id == view.record_id and status.pending:
            return [f"{d.device_name} ({d.device_id}): not confirmed yet" for d in status.pending]
    return ["Every device has confirmed: no device still holds its keys."]
