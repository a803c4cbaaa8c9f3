"""The memory record and the episode, as both sides understand them.

Invariants:
- Every field of the record is independent; none stands in for another.
- A record's source episodes are never empty, and it belongs to at least one of the
  ten fixed life areas (users add projects, never areas).
- A custom content type always maps to one of the eight core types.
- A ``RecordContent`` is held in a record schema its holder knows: it serialises
  ``schema_version`` only when it is not 1, so schema-1 content is byte-identical to
  content written before the field existed (and old readers open it). A reader opens
  content of a newer schema through the forward-compatible set (``docs/protocol.md``):
  a ``schema_version`` above its own, and a ``content_type`` beyond the core eight sent
  with ``custom_type`` naming its core, which it reads as that core type.
- Everything that says what a record is about (text, type, source, evidence, areas,
  sensitivity) lives in the sealed ``RecordContent``; a permanently forgotten record is
  a skeleton (id, state, when) that keeps none of it.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field, model_validator

from protocol.ids import ConversationId, EpisodeId, RecordId, SpaceId
from protocol.wire import UtcDatetime, WireModel

MAX_TEXT_CHARS = 4_000
RECORD_SCHEMA_VERSION = 1  # the newest record content schema this code reads and writes
FORMULA_VERSION_PATTERN = r"^conf-v[0-9]+$"


class ContentType(StrEnum):
    """The eight core content types."""

    PREFERENCE = "preference"
    ROUTINE = "routine"
    GOAL = "goal"
    CONSTRAINT = "constraint"
    RELATIONSHIP = "relationship"
    PERSONAL_FACT = "personal_fact"
    OPINION = "opinion"
    EVENT = "event"


CORE_TYPE_NAMES = frozenset(t.value for t in ContentType)


class EpistemicState(StrEnum):
    """How the assistant knows a record."""

    SAID = "said"
    OBSERVED = "observed"
    INFERRED = "inferred"
    HYPOTHESIS = "hypothesis"
    VERIFIED = "verified"
    INVALID = "invalid"


class Layer(StrEnum):
    EVENT = "event"
    CONSOLIDATED_FACT = "consolidated_fact"
    BEHAVIOUR_RULE = "behaviour_rule"


class TimeKind(StrEnum):
    PERMANENT = "permanent"
    FOR_NOW = "for_now"
    SEASONAL = "seasonal"
    ONE_OFF = "one_off"
    PAST = "past"


class SourceKind(StrEnum):
    USER_STATEMENT = "user_statement"
    USER_BEHAVIOUR = "user_behaviour"
    CONNECTED_SOURCE = "connected_source"
    EXTERNAL_CONTENT = "external_content"
    IMPORT = "import"


class LifeArea(StrEnum):
    """The ten fixed life areas. ``general`` holds name, language, address form, time zone."""

    WORK = "work"
    HEALTH = "health"
    FINANCE = "finance"
    RELATIONSHIPS = "relationships"
    HOME = "home"
    TRAVEL = "travel"
    SHOPPING = "shopping"
    LEARNING = "learning"
    LEISURE = "leisure"
    GENERAL = "general"


class Sensitivity(StrEnum):
    """Normal, or one of the sensitive classes (the special categories of personal data)."""

    NORMAL = "normal"
    HEALTH = "health"
    SEX_LIFE = "sex_life"
    ETHNIC_ORIGIN = "ethnic_origin"
    POLITICAL_OPINION = "political_opinion"
    RELIGIOUS_BELIEF = "religious_belief"
    TRADE_UNION = "trade_union"
    GENETIC = "genetic"
    BIOMETRIC = "biometric"
    FINANCIAL_DETAIL = "financial_detail"


class LifecycleState(StrEnum):
    CANDIDATE = "candidate"
    ACTIVE = "active"
    NOT_IN_USE = "not_in_use"
    FORGOTTEN = "permanently_forgotten"


class Initiator(StrEnum):
    """Who started an operation. The assistant may never start a mass forget."""

    USER = "user"
    ASSISTANT = "assistant"


Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
SourceId = Annotated[str, Field(min_length=1, max_length=512)]
ProjectName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}$")]
CustomTypeName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{1,39}$")]
LifeAreas = Annotated[list[LifeArea], Field(min_length=1, max_length=10)]
SourceEpisodes = Annotated[list[EpisodeId], Field(min_length=1, max_length=64)]


class CustomType(WireModel):
    """A content type beyond the core eight, always mapped to a core type."""

    name: CustomTypeName
    core: ContentType


class Observation(WireModel):
    """One piece of evidence: from which source, when, and whether it supported the record."""

    source_id: SourceId
    source_kind: SourceKind
    at: UtcDatetime
    supports: bool = True


class Evidence(WireModel):
    """What a record rests on. Two observations from one source count as one."""

    observations: Annotated[list[Observation], Field(max_length=10_000)] = []
    conflicting_records: list[RecordId] = []

    def distinct_sources(self) -> dict[str, Observation]:
        """The latest observation of each source: the unit evidence is counted in."""
        latest: dict[str, Observation] = {}
        for obs in sorted(self.observations, key=lambda o: o.at):
            latest[obs.source_id] = obs
        return latest

    @property
    def count(self) -> int:
        return len(self.distinct_sources())

    @property
    def ratio(self) -> float:
        sources = self.distinct_sources().values()
        return sum(o.supports for o in sources) / len(sources) if sources else 0.0

    @property
    def first_observed(self) -> datetime | None:
        return min((o.at for o in self.observations), default=None)

    @property
    def last_observed(self) -> datetime | None:
        return max((o.at for o in self.observations), default=None)


class StatementRelation(StrEnum):
    """How a new statement relates to one the user had (``protocol.relating`` decides)."""

    CORRECTION = "correction"  # the new one supersedes; the old is no longer current
    ADDITION = "addition"  # both stay current (another value, another attribute)
    EXCEPTION = "exception"  # a one-off beside the lasting record, which is unchanged
    CONFLICT = "conflict"  # both kept, flagged, always retrieved together
    UNRELATED = "unrelated"


class RelationNote(WireModel):
    """The decision about one earlier record, and the evidence it rests on, kept with the
    newer record (sealed with it) so "How do you know this?" can say why."""

    kind: StatementRelation
    record_id: RecordId
    evidence: Annotated[str, Field(min_length=1, max_length=500)]
    at: UtcDatetime  # when the newer statement was said


class Producer(StrEnum):
    """Who produced a record's words (its provenance), apart from how it is known."""

    USER = "user"  # a sentence the user typed in a conversation, verbatim
    SOURCE = "source"  # a web page, email, document, invite, agent, tool or connected source
    ASSISTANT = "assistant"  # the assistant wrote it: an observation, inference or proposed rule
    IMPORT = "import"  # a package or dump the user imported


MediumName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")]


class Provenance(WireModel):
    """Where a record's words came from: typed by the user in conversation X at time T;
    a source (its medium and reference); the assistant; an import."""

    producer: Producer
    medium: MediumName | None = None  # web_page, email, ... for a source; the app for behaviour
    reference: SourceId | None = None  # the source's URL, message id or file; the import's name
    conversation_id: ConversationId | None = None  # where the user typed it
    at: UtcDatetime | None = None  # typed, seen, imported or inferred at


class VerifiedBy(StrEnum):
    """Who made a record *verified*: the user, or independent sources."""

    USER = "user"
    SOURCES = "sources"


class Verification(WireModel):
    """How a verified record was verified, kept apart from who produced its words."""

    by: VerifiedBy
    at: UtcDatetime | None = None
    sources: Annotated[list[SourceId], Field(max_length=64)] = []  # the independent origins


class Alternative(WireModel):
    """Another plausible reading of the same evidence."""

    text: Text
    content_type: ContentType


class UsageRestriction(WireModel):
    """ "Only use for this area or project": the record is retrieved only there."""

    area: LifeArea | None = None
    project: ProjectName | None = None

    @model_validator(mode="after")
    def _one_target(self) -> UsageRestriction:
        if (self.area is None) == (self.project is None):
            raise ValueError("a usage restriction names exactly one area or one project")
        return self


def _custom_name_and_core(custom: object) -> tuple[object, object]:
    if isinstance(custom, CustomType):
        return custom.name, custom.core
    if isinstance(custom, dict):
        return custom.get("name"), custom.get("core")
    return None, None


def core_type_of(content_type: str, custom_type: object) -> object:
    """The core type to read a non-core ``content_type`` as: the core its ``custom_type``
    (``{"name": content_type, "core": ...}``) names. Raises ``ValueError`` naming the
    type and the reason when the content names no core for it."""
    if custom_type is None:
        raise ValueError(
            f"content type {content_type!r} is not one of the eight core types "
            f"({', '.join(sorted(CORE_TYPE_NAMES))}) and the content names no core type for "
            f"it: a newer writer sends custom_type {{name: {content_type!r}, core: <core type>}}"
        )
    name, core = _custom_name_and_core(custom_type)
    if name != content_type:
        raise ValueError(
            f"content type {content_type!r} is not one of the eight core types, and "
            f"custom_type names {name!r}, not {content_type!r}, so no core type is named for it"
        )
    return core


class RecordContent(WireModel):
    """What one record version seals: everything that must vanish with its key."""

    schema_version: Annotated[
        int, Field(ge=1, le=RECORD_SCHEMA_VERSION, exclude_if=lambda v: v == 1)
    ] = RECORD_SCHEMA_VERSION
    text: Text
    content_type: ContentType = ContentType.PERSONAL_FACT
    custom_type: CustomType | None = None
    epistemic_state: EpistemicState = EpistemicState.SAID
    layer: Layer = Layer.CONSOLIDATED_FACT
    time_kind: TimeKind = TimeKind.PERMANENT
    valid_from: UtcDatetime | None = None
    valid_until: UtcDatetime | None = None
    expected_end: UtcDatetime | None = None
    source_episode_ids: SourceEpisodes
    source_kind: SourceKind = SourceKind.USER_STATEMENT
    evidence: Evidence = Evidence()
    alternatives: list[Alternative] = []
    life_areas: LifeAreas = [LifeArea.GENERAL]
    project: ProjectName | None = None
    sensitivity: Sensitivity = Sensitivity.NORMAL
    conversation_id: ConversationId | None = None
    subject: Annotated[str, Field(max_length=200)] | None = None
    derived_from: list[RecordId] = []
    said_at: UtcDatetime | None = None
    background: bool = False  # written by background consolidation, not in conversation
    # A sentence with no subject of its own ("No wait, it's on the 17th.") takes the
    # subject of the user's previous sentence in the same conversation; that sentence is
    # kept verbatim beside it (a whole typed sentence of one of the source episodes).
    context_text: Annotated[Text | None, Field(exclude_if=lambda v: v is None)] = None
    context_said_at: Annotated[UtcDatetime | None, Field(exclude_if=lambda v: v is None)] = None
    relations: Annotated[list[RelationNote], Field(max_length=64, exclude_if=lambda v: not v)] = []
    # Who produced the words (``protocol.provenance``); absent in content written before
    # the field, whose provenance is read from its source kind and state.
    provenance: Annotated[Provenance | None, Field(exclude_if=lambda v: v is None)] = None
    verification: Annotated[Verification | None, Field(exclude_if=lambda v: v is None)] = None

    @model_validator(mode="before")
    @classmethod
    def _read_newer_schema(cls, data: Any) -> Any:
        """Read a newer schema's content as this schema (the forward-compatible set)."""
        if not isinstance(data, dict):
            return data
        declared = data.get("schema_version")
        kind = data.get("content_type")
        newer = isinstance(declared, int) and declared > RECORD_SCHEMA_VERSION
        unknown = isinstance(kind, str) and kind not in CORE_TYPE_NAMES
        if not newer and not unknown:
            return data
        data = dict(data)
        if newer:
            data["schema_version"] = RECORD_SCHEMA_VERSION
        if unknown:
            assert isinstance(kind, str)
            data["content_type"] = core_type_of(kind, data.get("custom_type"))
        return data

    @model_validator(mode="after")
    def _consistent(self) -> RecordContent:
        if self.custom_type is not None and self.custom_type.core is not self.content_type:
            raise ValueError(
                f"custom type {self.custom_type.name!r} maps to {self.custom_type.core.value}, "
                f"not to the record's content type {self.content_type.value}"
            )
        if self.valid_from and self.valid_until and self.valid_until < self.valid_from:
            raise ValueError("valid_until is before valid_from")
        if len(set(self.life_areas)) != len(self.life_areas):
            raise ValueError("a life area is listed twice")
        return self


class MemoryRecord(WireModel):
    """One version of a memory record, opened (readable), with the record's state."""

    id: RecordId
    space: SpaceId
    version: Annotated[int, Field(ge=1)]
    supersedes: Annotated[int, Field(ge=1)] | None = None
    lifecycle_state: LifecycleState
    usage_restriction: UsageRestriction | None = None
    recorded_at: UtcDatetime
    superseded_at: UtcDatetime | None = None
    superseded_by_record: RecordId | None = None
    conflicts_with: list[RecordId] = []
    content: RecordContent

    @model_validator(mode="after")
    def _not_forgotten(self) -> MemoryRecord:
        if self.lifecycle_state is LifecycleState.FORGOTTEN:
            raise ValueError(
                f"record {self.id} is permanently forgotten; only a Skeleton may stand for it"
            )
        if self.supersedes is not None and self.supersedes >= self.version:
            raise ValueError(
                f"record {self.id} v{self.version} cannot supersede v{self.supersedes}"
            )
        return self

    @property
    def text(self) -> str:
        return self.content.text

    @property
    def epistemic_state(self) -> EpistemicState:
        return self.content.epistemic_state


class Skeleton(WireModel):
    """What remains of a permanently forgotten record: id, state, and when."""

    id: RecordId
    lifecycle_state: LifecycleState = LifecycleState.FORGOTTEN
    forgotten_at: UtcDatetime


class Episode(WireModel):
    """What the user typed, once, in a conversation (or, with another ``source_kind``,
    what a behaviour event, source, page or import said)."""

    id: EpisodeId
    conversation_id: ConversationId
    text: Text
    typed_at: UtcDatetime
    source_kind: SourceKind = SourceKind.USER_STATEMENT
    source_id: SourceId | None = None


class ArtifactKind(StrEnum):
    """Derived items: each names the records it came from, and dies with them."""

    SUMMARY = "summary"
    TEXT_VIEW = "text_view"
    EMBEDDING = "embedding"
    CACHED_COPY = "cached_copy"


class ArtifactContent(WireModel):
    """What a derived artifact seals."""

    kind: ArtifactKind
    payload: Annotated[str, Field(max_length=200_000)]


class EpisodeContent(WireModel):
    """What an episode seals: its words and where they came from (sealed on both
    sides; ``protocol.messages`` re-exports it)."""

    conversation_id: ConversationId
    text: Text
    source_kind: SourceKind = SourceKind.USER_STATEMENT
    source_id: SourceId | None = None
