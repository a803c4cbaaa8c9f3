"""What a page shows of a record: one record as a line with its badges, and records
grouped by life area and project.

Invariants: a record is quoted and dated ("On <date> you said: “…”") if and only if
its words are the user's own (``RecordView.users_words``: a sentence the user typed),
whatever its epistemic state; every other record says who produced its words and who
verified it, never in quotes: "You confirmed this from <source> on <date>", "Seen in
independent sources, not confirmed by you", "You accepted this rule on <date>", a
source's or an inference's confidence label with where it comes from. Each kind
(``Kind``) has its own CSS class and labelled badge, so the user's words look
different from everything else. A skeleton carries no content: its text is empty and
it has no badges.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from device.views import RecordView
from protocol.model import LifeArea, LifecycleState

STATES = (
    (LifecycleState.CANDIDATE.value, "Candidate"),
    (LifecycleState.ACTIVE.value, "Active"),
    (LifecycleState.NOT_IN_USE.value, "Not in use"),
)
_SAID_ON = re.compile(r"^On (\d{4}-\d{2}-\d{2})(?: at \d{2}:\d{2})? you wrote:")
_CONFIRMED_ON = re.compile(r"You confirmed this from .*? on (\d{4}-\d{2}-\d{2}) at \d\d:\d\d:")
_ACCEPTED_ON = re.compile(r"You accepted this rule on (\d{4}-\d{2}-\d{2})")
_SEEN_IN = re.compile(r"Seen in (\d+) independent sources \(([^)]*)\), not confirmed by you")


class Kind(StrEnum):
    """Who produced a record's words and who verified it, as the page tells them apart
    (each is a CSS class ``kind-<value>`` and a labelled badge)."""

    WORDS = "words"  # the user typed it: the only kind quoted
    CONFIRMED = "confirmed"  # not the user's words; the user confirmed it
    CORROBORATED = "corroborated"  # not the user's words; independent sources agree
    RULE = "rule"  # a behaviour rule the user accepted
    PROPOSED_RULE = "proposed-rule"  # a behaviour rule proposed, not (or no longer) accepted
    SOURCE = "source"  # a source's words (web page, email, ...), not verified
    IMPORT = "import"  # imported, not verified
    INFERRED = "inferred"  # the assistant's observation or inference


KIND_BADGES = {
    Kind.WORDS: "Your words",
    Kind.CONFIRMED: "Confirmed by you \u00b7 not your words",
    Kind.CORROBORATED: "Corroborated by sources \u00b7 not your words",
    Kind.RULE: "Rule you accepted",
    Kind.PROPOSED_RULE: "Proposed rule",
    Kind.SOURCE: "From a source \u00b7 not your words",
    Kind.IMPORT: "Imported \u00b7 not your words",
    Kind.INFERRED: "Inferred \u00b7 not your words",
}


# --- what a page shows of a record ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Shown:
    """One record as a page shows it (never a skeleton's content, never a quoted
    inference or a quoted source)."""

    record_id: str
    skeleton: bool
    said: bool  # the user's own words: quoted and dated
    label: str  # "On <date> you said", "You confirmed this from … on …", a confidence label
    text: str  # "" for a skeleton
    badges: tuple[str, ...]
    area: str
    project: str | None
    lifecycle: str
    forgotten_on: str | None = None
    kind: str = ""  # a ``Kind`` value ("" for a skeleton)
    kind_badge: str = ""  # the labelled badge of its kind ("Your words", ...)
    origin: str | None = None  # where the words come from, when the label does not say it
    source: str | None = None  # the source in words ("a web page (pay.example)")
    source_reference: str | None = None  # its full reference (URL, message id, file)
    waits_because: tuple[str, ...] = ()  # why a candidate waits, in words
    confirm_warning: str | None = None  # not None: confirming takes a second step


def day_of(iso: str | None) -> str | None:
    return None if not iso else iso[:10]


def kind_of(view: RecordView) -> Kind:
    """The kind of a record's words: the user's, a source's, an import's, the
    assistant's; and for a verified one, who verified it."""
    if view.users_words:
        return Kind.WORDS
    if view.layer == "behaviour_rule":
        return Kind.RULE if view.verified_by == "user" else Kind.PROPOSED_RULE
    if view.verified_by == "user":
        return Kind.CONFIRMED
    if view.verified_by == "sources":
        return Kind.CORROBORATED
    if view.producer == "source":
        return Kind.SOURCE
    if view.producer == "import":
        return Kind.IMPORT
    return Kind.INFERRED


def _from_line(pattern: re.Pattern[str], view: RecordView) -> str | None:
    found = pattern.search(view.line or "")
    return found.group(1) if found else day_of(view.recorded_at)


def _label(view: RecordView, kind: Kind) -> tuple[str, str | None]:
    """The label before the text, and (when the label does not say it) where the words
    come from."""
    source = view.source or "a source"
    confidence = view.confidence or ""
    state = view.epistemic_state or ""
    unverified = confidence if confidence and confidence != "You told me" else state.capitalize()
    match kind:
        case Kind.WORDS:
            return f"On {_from_line(_SAID_ON, view)} you said", None
        case Kind.CONFIRMED:
            return f"You confirmed this from {source} on {_from_line(_CONFIRMED_ON, view)}", None
        case Kind.CORROBORATED:
            seen = _SEEN_IN.search(view.line or "")
            if seen is None:
                return "Seen in independent sources, not confirmed by you", None
            return (
                f"Seen in {seen.group(1)} independent sources ({seen.group(2)}), "
                "not confirmed by you"
            ), None
        case Kind.RULE:
            return f"You accepted this rule on {_from_line(_ACCEPTED_ON, view)}", None
        case Kind.PROPOSED_RULE:
            return f"I propose this rule from {source}", (
                "It takes effect only if you accept it; these are not your words."
            )
        case Kind.SOURCE | Kind.IMPORT:
            return unverified, f"Not your words: from {source}."
        case Kind.INFERRED:
            where = f" from {source}" if view.source == "your behaviour" else ""
            return unverified, f"I inferred this{where}; these are not your words."


def shown(view: RecordView) -> Shown:
    area = view.life_areas[0] if view.life_areas else LifeArea.GENERAL.value
    if view.is_skeleton:
        return Shown(
            view.record_id, True, False, "", "", (), area, None, view.lifecycle,
            forgotten_on=day_of(view.forgotten_at),
        )  # fmt: skip
    state = view.epistemic_state or ""
    kind = kind_of(view)
    label, origin = _label(view, kind)
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
        view.record_id, False, kind is Kind.WORDS, label, view.text or "", tuple(badges), area,
        view.project, view.lifecycle,
        kind=kind.value,
        kind_badge=KIND_BADGES[kind],
        origin=origin,
        source=view.source,
        source_reference=view.source_reference,
        waits_because=view.waits_because,
        confirm_warning=view.confirm_warning,
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
