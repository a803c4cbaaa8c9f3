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
it has no badges. Every enum value is shown in words (``device.ui.labels``), its raw
value kept in the badge's ``data-value``; times are in UTC.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from device.sync_state import SyncState
from device.ui.labels import (
    KIND,
    LIFECYCLE,
    Badge,
    Kind,
    badge,
    label,
    when,
)
from device.views import RecordView, VersionView
from protocol.confidence import ConfidenceClass
from protocol.model import (
    ContentType,
    EpistemicState,
    Layer,
    LifeArea,
    LifecycleState,
    Sensitivity,
    SourceKind,
    TimeKind,
)
from protocol.subset import Reason

STATES = tuple(
    (state.value, LIFECYCLE[state])
    for state in (LifecycleState.CANDIDATE, LifecycleState.ACTIVE, LifecycleState.NOT_IN_USE)
)
_SAID_ON = re.compile(r"^On (\d{4}-\d{2}-\d{2})(?: at \d{2}:\d{2})? you wrote:")
_CONFIRMED_ON = re.compile(r"You confirmed this from .*? on (\d{4}-\d{2}-\d{2}) at \d\d:\d\d:")
_ACCEPTED_ON = re.compile(r"You accepted this rule on (\d{4}-\d{2}-\d{2})")
_SEEN_IN = re.compile(r"Seen in (\d+) independent sources \(([^)]*)\), not confirmed by you")
KIND_BADGES = KIND  # the kinds' badges (``device.ui.labels.KIND``)


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
    badges: tuple[Badge, ...]
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
    area_label: str = ""  # the life area in words
    lifecycle_label: str = ""  # the lifecycle state in words
    learned: str = ""  # when it was learned, in words (UTC); "" when not known
    learned_at: str | None = None  # ... and as stored (ISO 8601)
    changed: str = ""  # when this version was written, for a corrected record (UTC)
    changed_at: str | None = None
    details: tuple[tuple[str, Badge], ...] = ()  # every enum field in words (record page)


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
    unverified = (
        confidence if confidence and confidence != "You told me" else label(EpistemicState, state)
    )
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


def _details(view: RecordView) -> tuple[tuple[str, Badge], ...]:
    """Every enum value of the record, in words, for its own page."""
    fields: list[tuple[str, Badge | None]] = [
        ("Type", badge(ContentType, view.content_type)),
        ("How I know it", badge(EpistemicState, view.epistemic_state)),
        ("Confidence", badge(ConfidenceClass, view.confidence)),
        ("Time", badge(TimeKind, view.time_kind)),
        ("Kind of memory", badge(Layer, view.layer)),
        ("Sensitive class", badge(Sensitivity, view.sensitivity)),
        ("Learned from", badge(SourceKind, view.source_kind)),
        ("State", badge(LifecycleState, view.lifecycle)),
        ("Sync", badge(SyncState, view.sync_state)),
    ]
    fields += [("Life area", badge(LifeArea, a)) for a in view.life_areas]
    return tuple((name, b) for name, b in fields if b is not None)


def _restriction(usage: str) -> str:
    """ "only for work" -> "only for Work" (an area in words; a project as named)."""
    prefix, _, name = usage.partition("only for ")
    if prefix or name not in {a.value for a in LifeArea}:
        return usage
    return f"only for {label(LifeArea, name)}"


def shown(view: RecordView, *, first_recorded_at: str | None = None) -> Shown:
    """One record as a page shows it. ``first_recorded_at``: when its first version was
    written (a corrected record's ``recorded_at`` is its newest version's)."""
    area = view.life_areas[0] if view.life_areas else LifeArea.GENERAL.value
    if view.is_skeleton:
        return Shown(
            view.record_id, True, False, "", "", (), area, None, view.lifecycle,
            forgotten_on=day_of(view.forgotten_at),
            area_label=label(LifeArea, area),
            lifecycle_label=label(LifecycleState, view.lifecycle),
        )  # fmt: skip
    state = view.epistemic_state or ""
    kind = kind_of(view)
    text_label, origin = _label(view, kind)
    found = [
        badge(ContentType, view.content_type),
        badge(EpistemicState, state),
        badge(ConfidenceClass, view.confidence),
        badge(TimeKind, view.time_kind),
    ]
    if view.sensitivity and view.sensitivity != Sensitivity.NORMAL.value:
        found.append(badge(Sensitivity, view.sensitivity))
    badges = [b for b in found if b is not None]
    if view.valid_from:
        badges.append(Badge(f"valid from {day_of(view.valid_from)}"))
    if view.valid_until:
        badges.append(Badge(f"valid until {day_of(view.valid_until)}"))
    if view.expected_end:
        badges.append(Badge(f"expected to end {day_of(view.expected_end)}"))
    if view.conflict:
        badges.append(Badge("Conflict"))
    if view.superseded_by:
        badges.append(Badge("Outdated"))
    if view.lifecycle == LifecycleState.CANDIDATE.value:
        badges.append(Badge(LIFECYCLE[LifecycleState.CANDIDATE], view.lifecycle, "state"))
    if view.usage_restriction:
        badges.append(Badge(_restriction(view.usage_restriction)))
    if view.device_only:
        badges.append(Badge("this device only"))
    if view.sync_state == SyncState.REFUSED.value:
        sync = badge(SyncState, view.sync_state)
        if sync is not None:
            badges.append(sync)
    badges.append(Badge("In use" if view.in_use else "Not in use"))
    first = first_recorded_at or view.recorded_at
    corrected = first_recorded_at is not None and first_recorded_at != view.recorded_at
    return Shown(
        view.record_id, False, kind is Kind.WORDS, text_label, view.text or "", tuple(badges),
        area, view.project, view.lifecycle,
        kind=kind.value,
        kind_badge=KIND[kind],
        origin=origin,
        source=view.source,
        source_reference=view.source_reference,
        waits_because=view.waits_because,
        confirm_warning=view.confirm_warning,
        area_label=label(LifeArea, area),
        lifecycle_label=label(LifecycleState, view.lifecycle),
        learned=when(first),
        learned_at=first,
        changed=when(view.recorded_at) if corrected else "",
        changed_at=view.recorded_at if corrected else None,
        details=_details(view),
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
            heading = f"Area: {record.area_label or record.area}"
            area = areas[record.area] = Group(f"area-{record.area}", heading)
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


def held_because(reason: str | None) -> str:
    """Why this device holds a record, in words (``protocol.subset.Reason``)."""
    if reason is None:
        return "This device holds it: it was written here, or held before its subset was chosen."
    return f"This device keeps it because {label(Reason, reason)}."


def _corrected_on(note: str) -> str | None:
    found = re.search(r"corrected on (\d{4}-\d{2}-\d{2})", note)
    return found.group(1) if found else None


def version_lines(history: Sequence[VersionView]) -> list[str]:
    """A record's version chain in words: dates and what happened, never an old body."""
    lines = []
    for i, v in enumerate(history):
        later = history[i + 1] if i + 1 < len(history) else None
        if v.current:
            lines.append(f"Version {v.version} (current), recorded on {when(v.recorded_at)}")
        elif later is not None and v.text is not None and v.text == later.text:
            # the same words: a confirmation, an accepted rule, a change of state
            lines.append(
                f"Version {v.version}: on {day_of(later.recorded_at)} it became version "
                f"{later.version} with the same words (confirmed, accepted or changed "
                "state); it is no longer active."
            )
        else:
            day = day_of(_corrected_on(v.note)) or day_of(v.recorded_at)
            lines.append(
                f"Version {v.version}: Corrected on {day}. "
                "Your correction was committed; the previous version is no longer active."
            )
    return lines
