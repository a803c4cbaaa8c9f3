"""What a page shows of a record: one record as a line with its badges, and records
grouped by life area and project.

Invariants: only said/verified records are quoted and dated ("On <date> you said");
every other record is prefixed by its confidence label, never quoted. A skeleton
carries no content: its text is empty and it has no badges.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from device.views import RecordView
from protocol.model import LifeArea, LifecycleState

QUOTED = frozenset({"said", "verified"})
STATES = (
    (LifecycleState.CANDIDATE.value, "Candidate"),
    (LifecycleState.ACTIVE.value, "Active"),
    (LifecycleState.NOT_IN_USE.value, "Not in use"),
)
_SAID_ON = re.compile(r"^On (\d{4}-\d{2}-\d{2})(?: at \d{2}:\d{2})? you wrote:")


# --- what a page shows of a record ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Shown:
    """One record as a page shows it (never a skeleton's content, never a quoted
    inference)."""

    record_id: str
    skeleton: bool
    said: bool  # the user's own words: quoted and dated
    label: str  # "On <date> you said" or the confidence label
    text: str  # "" for a skeleton
    badges: tuple[str, ...]
    area: str
    project: str | None
    lifecycle: str
    forgotten_on: str | None = None


def day_of(iso: str | None) -> str | None:
    return None if not iso else iso[:10]


def shown(view: RecordView) -> Shown:
    area = view.life_areas[0] if view.life_areas else LifeArea.GENERAL.value
    if view.is_skeleton:
        return Shown(
            view.record_id, True, False, "", "", (), area, None, view.lifecycle,
            forgotten_on=day_of(view.forgotten_at),
        )  # fmt: skip
    state = view.epistemic_state or ""
    said = state in QUOTED
    if said:
        match = _SAID_ON.match(view.line or "")
        day = match.group(1) if match else day_of(view.recorded_at)
        label = f"On {day} you said"
    else:
        confidence = view.confidence or ""
        label = confidence if confidence and confidence != "You told me" else state.capitalize()
    badges = [b for b in (view.content_type, state, view.confidence, view.time_kind) if b]
    if view.valid_from:
        badges.append(f"valid from {day_of(view.valid_from)}")
    if view.valid_until:
        badges.append(f"valid until {day_of(view.valid_until)}")
    if view.expected_end:
        badges.append(f"expected to end {day_of(view.expected_end)}")
    if view.conflict:
        badges.append("Conflict")
    if view.superseded_by:
        badges.append("Outdated")
    if view.lifecycle == LifecycleState.CANDIDATE.value:
        badges.append("Candidate")
    if view.usage_restriction:
        badges.append(f"only for {view.usage_restriction}")
    if view.device_only:
        badges.append("this device only")
    badges.append("In use" if view.in_use else "Not in use")
    return Shown(
        view.record_id, False, said, label, view.text or "", tuple(badges), area,
        view.project, view.lifecycle,
    )  # fmt: skip


@dataclass(slots=True)
class Group:
    """A section of records: one life area, or one project inside it."""

    key: str
    heading: str
    records: list[Shown] = field(default_factory=list)
    projects: list[Group] = field(default_factory=list)


def grouped(records: Iterable[Shown]) -> list[Group]:
    """Records by life area (first seen first), and inside one by project."""
    areas: dict[str, Group] = {}
    for record in records:
        area = areas.get(record.area)
        if area is None:
            area = areas[record.area] = Group(f"area-{record.area}", f"Area: {record.area}")
        if record.project is None:
            area.records.append(record)
            continue
        project = next(
            (p for p in area.projects if p.heading == f"Project: {record.project}"), None
        )
        if project is None:
            project = Group(
                f"{area.key}-project-{len(area.projects) + 1}", f"Project: {record.project}"
            )
            area.projects.append(project)
        project.records.append(record)
    return list(areas.values())


_HELD_BECAUSE = {
    "pinned": "you pinned it here",
    "behaviour_rule": "it is a behaviour rule in force",
    "preference": "it is a preference in force",
    "upcoming_event": "it is an upcoming event",
    "for_now": "it is a \u201cfor now\u201d record in force",
    "people": "it is about people in your life",
    "frequent": "you use it often",
    "recent": "it was learned, changed or used recently",
}


def held_because(reason: str | None) -> str:
    """Why this device holds a record, in words (``protocol.subset.Reason``)."""
    if reason is None:
        return "This device holds it: it was written here, or held before its subset was chosen."
    return f"This device keeps it because {_HELD_BECAUSE.get(reason, reason)}."
