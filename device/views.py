"""What the agent returns to its callers: plain, frozen values.

Invariants: a skeleton view never carries text; a recall hit is always an active,
in-use record re-checked against authoritative state, whose line is built by
``protocol.presentation.labelled_line`` (only said/verified lines are quoted); a
local result carries the receipt of the committed effect and the sentence the user
is told, built from that receipt alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from device.sync_state import SyncState
from protocol.model import LifecycleState, RelationNote

if TYPE_CHECKING:
    from protocol.operations import Receipt


@dataclass(frozen=True, slots=True)
class LocalResult:
    """A local operation applied at once and queued for the cloud (sync_state pending).

    ``record_id`` is the record the op names ("" when it names none: a mass forget,
    a project, an artifact — see ``artifact_id``).
    """

    record_id: str
    op_id: str
    sync_state: SyncState = SyncState.PENDING
    forgotten_at: str | None = None
    receipt: Receipt | None = None
    message: str = ""
    artifact_id: str | None = None
    episode_id: str | None = None


@dataclass(frozen=True, slots=True)
class RecallHit:
    record_id: str
    text: str
    epistemic_state: str
    line: str
    score: float
    content_type: str = ""
    confidence: str = ""
    conflict: bool = False
    rank: float = 0.0
    pulled_in_by: str | None = None  # the hit that brought this one in (relation/companion)
    relation: str | None = None  # how a related record was pulled in
    outdated: bool = False  # superseded by a newer record returned beside it
    current: bool = False  # the newer record of a supersedes pair
    lexical: float = 0.0
    vector: float = 0.0
    from_cloud: bool = False  # a cloud answer's line this device does not hold


@dataclass(frozen=True, slots=True)
class RecordView:
    record_id: str
    lifecycle: str
    sync_state: SyncState
    version: int | None = None
    text: str | None = None
    epistemic_state: str | None = None
    recorded_at: str | None = None
    refusal_reason: str | None = None
    forgotten_at: str | None = None
    content_type: str | None = None
    confidence: str | None = None  # the class the user sees
    confidence_score: float | None = None  # the computed value behind it ...
    confidence_formula: str | None = None  # ... and the formula version that computed it
    layer: str | None = None
    time_kind: str | None = None
    valid_from: str | None = None
    valid_until: str | None = None
    expected_end: str | None = None
    life_areas: tuple[str, ...] = ()
    project: str | None = None
    sensitivity: str | None = None
    source_kind: str | None = None
    usage_restriction: str | None = None
    superseded_by: str | None = None
    conflicts_with: tuple[str, ...] = ()
    versions: tuple[int, ...] = ()
    line: str | None = None
    background: bool = False  # written by background consolidation ("recently learned")
    device_only: bool = False  # a sensitive class kept only on this device: never synced
    derived_from: tuple[str, ...] = ()
    context_text: str | None = None  # the sentence that gave it its subject
    relations: tuple[RelationNote, ...] = ()  # how it relates to earlier records, and why
    # Who produced the words (``protocol.provenance``): user, source, assistant, import.
    producer: str | None = None
    source: str | None = None  # in words: "a web page (pay.example)"; None for the user's
    source_reference: str | None = None  # the source's full reference (URL, message, file)
    users_words: bool = False  # a sentence the user typed: the only kind quoted as theirs
    verified_by: str | None = None  # "user" or "sources" when verified
    waits_because: tuple[str, ...] = ()  # a candidate's reasons to wait, in words
    confirm_warning: str | None = None  # shown before a confirmation needs a second step

    @property
    def lifecycle_state(self) -> LifecycleState:
        return LifecycleState(self.lifecycle)

    @property
    def is_skeleton(self) -> bool:
        return self.lifecycle_state is LifecycleState.FORGOTTEN

    @property
    def in_use(self) -> bool:
        """Whether retrieval may use it at all (before area, project and flags)."""
        return (
            self.lifecycle_state is LifecycleState.ACTIVE and self.sync_state != SyncState.REFUSED
        )

    @property
    def conflict(self) -> bool:
        return bool(self.conflicts_with)

    @property
    def superseded_by_record(self) -> str | None:
        """The wire's name (``RecordStateChange``) for ``superseded_by``."""
        return self.superseded_by


@dataclass(frozen=True, slots=True)
class VersionView:
    """One version in a record's chain, as the user's own history shows it."""

    record_id: str
    version: int
    supersedes: int | None
    recorded_at: str
    current: bool
    epistemic_state: str
    text: str | None  # None when it no longer opens
    note: str  # e.g. "current" or "corrected on 2026-03-02; no longer active"


@dataclass(frozen=True, slots=True)
class SourceView:
    """One source episode of a record's current version, as "how do you know this?"
    shows it: ``text`` only when the record is the user's own words (a sentence the user
    typed) and the episode is one the user typed and still opens; otherwise None (an
    inference, a source or an import never quotes). ``source`` says what the episode is,
    in words: "what you typed", "a web page (pay.example)", "an app's behaviour event
    (chat-app)", "an import (notes.txt)"."""

    episode_id: str
    typed_at: str | None
    source_kind: str | None
    text: str | None
    forgotten: bool = False
    source: str | None = None


@dataclass(frozen=True, slots=True)
class DetectedSentence:
    """One sentence of what the user typed, as the on-device detector read it."""

    sentence: int
    text: str
    candidate: bool
    score: float
    content_type: str
    sensitivity: str
    time_kind: str


@dataclass(frozen=True, slots=True)
class SaidResult:
    """What ``say`` logged: the episode, what the detector saw, and whether the episode
    is kept only on this device (a device-only sensitive class)."""

    episode_id: str
    sentences: tuple[DetectedSentence, ...]
    device_only: bool
    model_id: str

    @property
    def candidates(self) -> tuple[DetectedSentence, ...]:
        return tuple(s for s in self.sentences if s.candidate)


@dataclass(slots=True)
class SyncReport:
    acked: list[int] = field(default_factory=list)
    pushed: int = 0
    applied: int = 0
    duplicates: int = 0
    refused: list[tuple[str, str, str]] = field(default_factory=list)  # op_id, code, reason
    # applied, and flagged: it raced a change made elsewhere (op_id, the cloud's reason)
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    pull_required: bool = False
    # pulls a push needed (``pull_required``): more than one when forgets kept landing
    # elsewhere between this sync's pull and its push
    pulls_before_push: int = 0
    pulled: int = 0
    shredded: list[str] = field(default_factory=list)
    ignored: int = 0  # pulled changes for content this device already forgot
    resynced: bool = False  # the cursor was below the cloud's feed floor: rebuilt from the start
    # synced records, episodes and artifacts a resync shredded: the cloud no longer has them
    resync_removed: list[str] = field(default_factory=list)
    # the cloud's ``Memsync-Closing`` header: the service is closing (``closes_at=...;
    # export_until=...``), None when it is not
    closing: str | None = None
    # the service closed and takes no writes: the push was held (the queue stays), why
    push_held: str | None = None
    # the device subset (protocol 3): records that entered it, that left it (evicted:
    # still in the cloud, never forgotten), and that left with an operation still queued
    # (evicted once it is sent)
    entered: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    left_later: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class AccountDeletion:
    """The account was deleted from this device: every key of its memory is destroyed in
    the cloud, and this device wiped its own copy (queued changes included)."""

    space_id: str
    ended_at: str
    wiped_records: int  # records this device held
    wiped_queued: int  # queued changes that were never sent, wiped with the rest
    confirmed: bool  # the cloud heard this device's wipe (else at its next call)
    pending: tuple[tuple[str, str], ...]  # (device id, name): other devices still to wipe


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What importing one file wrote: ``kind`` is ``package`` (a memsync export package)
    or ``text``; every record is a candidate "imported, not verified".
    ``not_imported`` counts what the package held that is not memory content."""

    path: str
    kind: str
    export_id: str | None
    episode_ids: tuple[str, ...]
    record_ids: tuple[str, ...]
    not_imported: tuple[tuple[str, int], ...] = ()
    device_only: tuple[str, ...] = ()  # records kept only on this device (a kept class)
    # for a package: "signed by this account", "signed by another account" or "unsigned"
    origin: str | None = None
