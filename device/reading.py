"""Reading memory for the user: what do you know, history, as of, how do you know, and
the questions that are due.

Invariants:
- Reads never write (temporary mode relies on it).
- A skeleton never carries text, type or source; forgotten content is never shown,
  not even "as of" a time before it was forgotten.
- Every line comes from ``protocol.presentation.labelled_line`` with the class from
  ``protocol.confidence.compute``; a stale "for now" record shows "I'm not sure".
- The version chain stays (append-only) and the user may read it as history, old
  bodies marked no longer active; retrieval (``device.retrieval``) never returns them.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, assert_never

from device import catalog, store
from device.db import Database
from device.errors import UnknownRecord
from device.sync_state import SyncState
from device.views import RecordView, SourceView, VersionView
from protocol import timeline
from protocol.confidence import ConfidenceClass, compute
from protocol.errors import SealError
from protocol.explain import Known
from protocol.explain import explain as explain_sentence
from protocol.model import (
    EpistemicState,
    LifecycleState,
    Producer,
    Provenance,
    RecordContent,
    SourceKind,
)
from protocol.presentation import CONFLICT, OUTDATED, labelled_line
from protocol.provenance import (
    is_users_words,
    provenance_of,
    source_words,
    split_source,
    verification_of,
)
from protocol.waiting import confirm_warning, waiting_reasons

FORGOTTEN = LifecycleState.FORGOTTEN.value
FORGOTTEN_MESSAGE = "Permanently forgotten; it cannot be brought back."


@dataclass(frozen=True, slots=True)
class Held:
    """A record as this device holds it: its row and its current version, opened."""

    row: Any
    content: RecordContent | None
    version: Any | None
    learned_at: datetime | None

    @property
    def record_id(self) -> str:
        return str(self.row["record_id"])

    @property
    def lifecycle(self) -> LifecycleState:
        return LifecycleState(self.row["lifecycle"])


def _open(db: Database, version: Any) -> RecordContent | None:
    with suppress(LookupError, SealError):
        return store.open_version(db, version)
    return None


def held(db: Database, row: Any, version_no: int | None = None) -> Held:
    number = version_no if version_no is not None else row["current_version"]
    if row["lifecycle"] == FORGOTTEN or number is None:
        return Held(row, None, None, None)
    version = store.version_row(db, row["record_id"], int(number))
    if version is None:
        return Held(row, None, None, None)
    return Held(row, _open(db, version), version, datetime.fromisoformat(version["recorded_at"]))


def held_record(db: Database, record_id: str) -> Held:
    row = store.record_row(db, record_id)
    if row is None:
        raise UnknownRecord(record_id)
    return held(db, row)


def said_on(db: Database, content: RecordContent, fallback: datetime | None) -> datetime:
    """When the user said it: the content's said_at, else its first source episode."""
    if content.said_at is not None:
        return content.said_at
    for episode_id in content.source_episode_ids:
        row = store.episode_row(db, episode_id)
        if row is not None:
            return datetime.fromisoformat(row["typed_at"])
    if fallback is None:
        raise ValueError("no date to show the record with")
    return fallback


def shown_class(h: Held, now: datetime, lifecycle: LifecycleState | None = None) -> ConfidenceClass:
    assert h.content is not None and h.learned_at is not None
    shown = compute(h.content, lifecycle or h.lifecycle, now).shown
    if timeline.is_stale(h.content, h.learned_at, now):
        return ConfidenceClass.NOT_SURE
    return shown


def is_active(db: Database, record_id: str | None) -> bool:
    if not record_id:
        return False
    row = store.record_row(db, record_id)
    return row is not None and row["lifecycle"] == LifecycleState.ACTIVE.value


def live_conflicts(db: Database, row: Any) -> list[str]:
    """Conflicting records that still exist (a forgotten one no longer disagrees)."""
    out = []
    for other in store.conflicts_of(row):
        other_row = store.record_row(db, other)
        if other_row is not None and other_row["lifecycle"] != FORGOTTEN:
            out.append(other)
    return out


def line_for(
    db: Database, h: Held, now: datetime, *, lifecycle: LifecycleState | None = None
) -> str:
    assert h.content is not None
    flags = [CONFLICT] if live_conflicts(db, h.row) else []
    if is_active(db, h.row["superseded_by"]):
        flags.append(OUTDATED)
    return labelled_line(
        h.content, shown_class(h, now, lifecycle), said_on(db, h.content, h.learned_at), flags=flags
    )


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def view(
    db: Database, h: Held, now: datetime, *, lifecycle: LifecycleState | None = None
) -> RecordView:
    row = h.row
    if h.lifecycle is LifecycleState.FORGOTTEN:
        return RecordView(
            record_id=h.record_id,
            lifecycle=FORGOTTEN,
            sync_state=SyncState(row["sync_state"]),
            forgotten_at=row["forgotten_at"],
        )
    state = lifecycle or h.lifecycle
    versions = tuple(int(v["version"]) for v in store.versions_of(db, h.record_id))
    usage = row["usage_area"] or row["usage_project"]
    base = RecordView(
        record_id=h.record_id,
        lifecycle=state.value,
        sync_state=SyncState(row["sync_state"]),
        version=None if h.version is None else int(h.version["version"]),
        recorded_at=None if h.version is None else h.version["recorded_at"],
        refusal_reason=row["refusal_reason"],
        usage_restriction=f"only for {usage}" if usage else None,
        superseded_by=row["superseded_by"],
        conflicts_with=tuple(live_conflicts(db, row)),
        versions=versions,
        device_only=bool(row["device_only"]),
    )
    c = h.content
    if c is None:
        return base
    computed = compute(c, state, now)
    return replace(
        base,
        text=c.text,
        epistemic_state=c.epistemic_state.value,
        content_type=c.custom_type.name if c.custom_type else c.content_type.value,
        confidence=shown_class(h, now, state).value,
        confidence_score=computed.score,
        confidence_formula=computed.formula_version,
        layer=c.layer.value,
        time_kind=timeline.effective_time_kind(c, now).value,
        valid_from=_iso(c.valid_from),
        valid_until=_iso(c.valid_until),
        expected_end=_iso(c.expected_end),
        life_areas=tuple(a.value for a in c.life_areas),
        project=c.project,
        sensitivity=c.sensitivity.value,
        source_kind=c.source_kind.value,
        line=line_for(db, h, now, lifecycle=state),
        background=c.background,
        derived_from=tuple(c.derived_from),
        context_text=c.context_text,
        relations=tuple(c.relations),
        **_provenance_fields(c, state),
    )


def _provenance_fields(c: RecordContent, state: LifecycleState) -> dict[str, Any]:
    """Who produced the record's words, who verified it, and why it waits (in words)."""
    origin = provenance_of(c)
    verified = verification_of(c)
    warning = confirm_warning(c)
    return {
        "producer": origin.producer.value,
        "source": None if origin.producer is Producer.USER else source_words(origin),
        "source_reference": origin.reference,
        "users_words": origin.producer is Producer.USER,
        "verified_by": None if verified is None else verified.by.value,
        "waits_because": (tuple(waiting_reasons(c)) if state is LifecycleState.CANDIDATE else ()),
        "confirm_warning": None if warning is None else warning.text,
    }


def what_do_you_know(db: Database, now: datetime) -> list[RecordView]:
    return [view(db, held(db, row), now) for row in store.all_records(db)]


def record_history(db: Database, record_id: str) -> list[VersionView]:
    row = store.record_row(db, record_id)
    if row is None:
        raise UnknownRecord(record_id)
    rows = store.versions_of(db, record_id)
    out = []
    for i, version in enumerate(rows):
        number = int(version["version"])
        current = row["current_version"] is not None and number == int(row["current_version"])
        content = _open(db, version)
        if current:
            note, state = "current", version["epistemic_state"]
        else:
            later = rows[i + 1]["recorded_at"][:10] if i + 1 < len(rows) else "later"
            note, state = f"corrected on {later}; no longer active", EpistemicState.INVALID.value
        out.append(
            VersionView(
                record_id=record_id,
                version=number,
                supersedes=version["supersedes"],
                recorded_at=version["recorded_at"],
                current=current,
                epistemic_state=state,
                text=None if content is None else content.text,
                note=note,
            )
        )
    return out


def as_of(db: Database, when: datetime) -> list[RecordView]:
    """What memory said at ``when``: the version and lifecycle current then."""
    out = []
    for row in store.all_records(db):
        if row["lifecycle"] == FORGOTTEN:
            if row["forgotten_at"] and datetime.fromisoformat(row["forgotten_at"]) <= when:
                out.append(view(db, held(db, row), when))
            continue
        versions = [
            timeline.VersionTime(int(v["version"]), datetime.fromisoformat(v["recorded_at"]))
            for v in store.versions_of(db, row["record_id"])
        ]
        number = timeline.version_as_of(versions, when)
        if number is None:
            continue
        changes = [
            timeline.StateChange(datetime.fromisoformat(e["at"]), LifecycleState(e["lifecycle"]))
            for e in catalog.events_of(db, row["record_id"])
        ]
        lifecycle = timeline.lifecycle_as_of(changes, when) or LifecycleState(row["lifecycle"])
        out.append(view(db, held(db, row, number), when, lifecycle=lifecycle))
    return out


def explain(db: Database, record_id: str, now: datetime) -> str:
    h = held_record(db, record_id)
    if h.lifecycle is LifecycleState.FORGOTTEN:
        return FORGOTTEN_MESSAGE
    if h.content is None:
        return f"Record {record_id} has no readable content on this device."
    from device.facts import episode_facts  # lazily: it brings the rules, a list needs none

    episodes: dict[str, tuple[datetime, str] | None] = {}
    kinds: dict[str, SourceKind] = {}
    for episode_id in h.content.source_episode_ids:
        facts = episode_facts(db, episode_id)
        episodes[episode_id] = (
            None if facts is None or facts.typed_at is None else (facts.typed_at, facts.text)
        )
        if facts is not None:
            kinds[episode_id] = facts.source_kind
    superseded = is_active(db, h.row["superseded_by"])
    return explain_sentence(
        h.content,
        shown_class(h, now),
        episodes,
        version=int(h.version["version"]) if h.version is not None else 1,
        conflicts=len(live_conflicts(db, h.row)),
        superseded=superseded,
        related={
            note.record_id: known
            for note in h.content.relations
            if (known := _known(db, note.record_id)) is not None
        },
        replaced_by=_known(db, h.row["superseded_by"]) if superseded else None,
        episode_kinds=kinds,
    )


def _known(db: Database, record_id: str) -> Known | None:
    """What this device knows of another record for an explanation: its content (None
    once forgotten) and when it was said; None when the device does not hold it."""
    row = store.record_row(db, record_id)
    if row is None:
        return None
    other = held(db, row)
    if other.lifecycle is LifecycleState.FORGOTTEN:
        return Known(None)
    if other.content is None:
        return None
    return Known(other.content, said_on(db, other.content, other.learned_at))


def sources(db: Database, record_id: str) -> list[SourceView]:
    """The source episodes of the record's current version (none for a skeleton); their
    words only for the user's own (said/verified) records, never for an inference."""
    h = held_record(db, record_id)
    if h.lifecycle is LifecycleState.FORGOTTEN or h.content is None:
        return []
    quotable = is_users_words(h.content)
    from device.facts import episode_facts  # lazily, as in explain

    out = []
    for episode_id in h.content.source_episode_ids:
        facts = episode_facts(db, episode_id)
        if facts is None:
            out.append(SourceView(episode_id, None, None, None, forgotten=True))
            continue
        out.append(
            SourceView(
                episode_id,
                _iso(facts.typed_at),
                facts.source_kind.value,
                facts.text if quotable and facts.source_kind is SourceKind.USER_STATEMENT else None,
                source=episode_source(facts.source_kind, facts.source_id),
            )
        )
    return out


def episode_source(kind: SourceKind, source_id: str | None) -> str:
    """What a source episode is, in words (never its text)."""
    match kind:
        case SourceKind.USER_STATEMENT:
            return "what you typed"
        case SourceKind.USER_BEHAVIOUR:
            return "an app's behaviour event" + (f" ({source_id})" if source_id else "")
        case SourceKind.EXTERNAL_CONTENT | SourceKind.CONNECTED_SOURCE:
            medium, reference = split_source(source_id)
            if medium is None:
                connected = kind is SourceKind.CONNECTED_SOURCE
                medium = "connected_source" if connected else "external"
            return source_words(
                Provenance(producer=Producer.SOURCE, medium=medium, reference=reference)
            )
        case SourceKind.IMPORT:
            return source_words(Provenance(producer=Producer.IMPORT, reference=source_id))
        case unknown:
            assert_never(unknown)


def due_questions(db: Database, now: datetime) -> list[tuple[str, str]]:
    """("Still doing this?") for active "for now" records past their expected end."""
    out = []
    for row in store.all_records(db):
        if row["lifecycle"] != LifecycleState.ACTIVE.value:
            continue
        h = held(db, row)
        if h.content is None or h.learned_at is None:
            continue
        if timeline.question_due(h.content, h.learned_at, now):
            out.append((h.record_id, f"Still doing this? {h.content.text}"))
    return out
