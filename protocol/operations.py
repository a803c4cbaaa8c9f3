"""Operations: what a device asks the authority to do, each with a client-made id.

Invariants:
- An operation is applied at most once per space, keyed by ``op_id``; a replay gets
  the original receipt back, never a second effect.
- Every operation says who started it (``initiated_by``); ``forget_area`` started by
  the assistant is refused, whatever its proof.
- No string anywhere in an operation holds a NUL character (no store can keep one); such
  an op is malformed, and refused alone.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
    model_validator,
)

from protocol.ids import ArtifactId, ConversationId, EpisodeId, OpId, RecordId
from protocol.model import (
    ArtifactKind,
    ContentType,
    CustomType,
    EpistemicState,
    Initiator,
    Layer,
    LifeArea,
    LifeAreas,
    ProjectName,
    RecordContent,
    Sensitivity,
    SourceEpisodes,
    SourceId,
    SourceKind,
    Text,
    TimeKind,
    UsageRestriction,
)
from protocol.version import Since
from protocol.wire import B64Bytes, UtcDatetime, WireModel


def _holds_nul(value: Any) -> bool:
    """Whether any string (key or value) in ``value`` holds a NUL: ``nul_path``'s walk
    without its paths (most ops hold none, and then no path is built)."""
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return True
        elif isinstance(node, dict):
            if any(isinstance(key, str) and "\x00" in key for key in node):
                return True
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return False


def nul_path(value: Any) -> str | None:
    """The dotted path of the first string (key or value) holding a NUL, or None."""
    if not _holds_nul(value):
        return None
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return path or "(value)"
        elif isinstance(node, dict):
            for key, item in node.items():
                if isinstance(key, str) and "\x00" in key:
                    return f"{path}.(key)" if path else "(key)"
                stack.append((f"{path}.{key}" if path else str(key), item))
        elif isinstance(node, list | tuple):
            stack.extend((f"{path}.{i}" if path else str(i), item) for i, item in enumerate(node))
    return None


class _Op(WireModel):
    op_id: OpId
    made_at: UtcDatetime
    initiated_by: Initiator

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: Any) -> Any:
        where = nul_path(data)
        if where is not None:
            raise ValueError(f"field '{where}' contains a NUL character")
        return data


class AddEpisode(_Op):
    """Log what the user typed in a conversation (the episode log 'said' is checked against).

    ``source_kind`` says where the words came from: only ``user_statement`` episodes can
    ever make a record "said". Behaviour events, connected sources, external content
    (web page, email, document, calendar invite, another agent, tool output) and imports
    are logged as episodes of their own kind, with ``source_id`` naming the source.
    """

    kind: Literal["add_episode"] = "add_episode"
    episode_id: EpisodeId
    conversation_id: ConversationId
    text: Text
    typed_at: UtcDatetime
    source_kind: SourceKind = SourceKind.USER_STATEMENT
    source_id: SourceId | None = None

    @model_validator(mode="after")
    def _named_source(self) -> AddEpisode:
        if self.source_kind is not SourceKind.USER_STATEMENT and self.source_id is None:
            raise ValueError(
                f"episode {self.episode_id} from {self.source_kind.value} must name its source"
            )
        return self


class Remember(_Op):
    """Explicit "remember this": the user's own sentence becomes an active, said record."""

    kind: Literal["remember"] = "remember"
    record_id: RecordId
    text: Text
    conversation_id: ConversationId
    source_episode_ids: SourceEpisodes
    content_type: ContentType = ContentType.PERSONAL_FACT
    custom_type: CustomType | None = None
    layer: Literal[Layer.EVENT, Layer.CONSOLIDATED_FACT] = Layer.CONSOLIDATED_FACT
    time_kind: TimeKind = TimeKind.PERMANENT
    valid_from: UtcDatetime | None = None
    valid_until: UtcDatetime | None = None
    expected_end: UtcDatetime | None = None
    life_areas: LifeAreas = [LifeArea.GENERAL]
    project: ProjectName | None = None
    sensitivity: Sensitivity = Sensitivity.NORMAL
    subject: Annotated[str, Field(max_length=200)] | None = None


class Correct(_Op):
    """ "That's wrong": a new version in the user's own words; the old one becomes invalid.

    ``base_version`` (protocol 2) is the last version of the record this device had
    heard of from the cloud when the user corrected it. A cloud holding versions after
    it that another device (or the consolidator) made still applies the correction,
    and flags it: the receipt is ``conflict`` and names them, so two offline
    corrections are both kept and neither is silently dropped. Left out of the JSON
    when absent, so an op without it is the same message as before it existed.
    """

    kind: Literal["correct"] = "correct"
    record_id: RecordId
    text: Text
    conversation_id: ConversationId
    source_episode_ids: SourceEpisodes
    base_version: Annotated[int | None, Since(2), Field(ge=1, le=2**31)] = None

    @model_serializer(mode="wrap")
    def _omit_no_base(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.base_version is None:
            data.pop("base_version", None)
        return data


class DontUse(_Op):
    """ "Know it, but don't use it": excluded from retrieval and training; reversible."""

    kind: Literal["dont_use"] = "dont_use"
    record_id: RecordId


class UseAgain(_Op):
    kind: Literal["use_again"] = "use_again"
    record_id: RecordId


class RestrictUsage(_Op):
    """ "Only use for X", or ``restriction: null`` to lift it."""

    kind: Literal["restrict_usage"] = "restrict_usage"
    record_id: RecordId
    restriction: UsageRestriction | None


class Confirm(_Op):
    """The user confirms a candidate: it becomes active, and verified."""

    kind: Literal["confirm"] = "confirm"
    record_id: RecordId


class Reaffirm(_Op):
    """The answer to "Still doing this?" for a "for now" record."""

    kind: Literal["reaffirm"] = "reaffirm"
    record_id: RecordId
    still_true: bool
    expected_end: UtcDatetime | None = None


class ForgetPermanently(_Op):
    """Destroy the keys of a record and everything derived from it. Cannot be undone.

    ``episode_ids`` are the record's source episodes as the forgetting device knows
    them: when the authority never saw the record (it was forgotten on the device
    before its ``remember`` was pushed), those episodes are destroyed all the same, so
    the user's words do not outlive the record.
    """

    kind: Literal["forget_permanently"] = "forget_permanently"
    record_id: RecordId
    episode_ids: Annotated[list[EpisodeId], Field(max_length=64)] = []


class ForgetArea(_Op):
    """Forget a whole life area (or, with ``area: null``, all memory) permanently.

    Needs strong authentication: ``proof`` is an Ed25519 signature, by the account key
    derived from the user's account passphrase, over ``protocol.strongauth.challenge``.
    """

    kind: Literal["forget_area"] = "forget_area"
    area: LifeArea | None
    proof: B64Bytes


class Infer(_Op):
    """A record the assistant derived (observed, inferred, hypothesis): never "said"."""

    kind: Literal["infer"] = "infer"
    record_id: RecordId
    content: RecordContent

    @model_validator(mode="after")
    def _not_the_users_words(self) -> Infer:
        allowed = {EpistemicState.OBSERVED, EpistemicState.INFERRED, EpistemicState.HYPOTHESIS}
        if self.content.epistemic_state not in allowed:
            raise ValueError(
                f"an inferred record is observed, inferred or hypothesis, "
                f"not {self.content.epistemic_state.value}"
            )
        return self


class MarkCandidate(_Op):
    """The on-device detector's verdict: sentence ``sentence`` (0-based, as
    ``protocol.sentences.split_sentences`` splits it) of an episode is a memory
    candidate, with the labels the detector gave it. Carries no text; the consolidator
    reads the episode. Nothing is written as a record until it is consolidated."""

    kind: Literal["mark_candidate"] = "mark_candidate"
    episode_id: EpisodeId
    sentence: Annotated[int, Field(ge=0, le=255)]
    content_type: ContentType
    sensitivity: Sensitivity
    time_kind: TimeKind
    score: Annotated[float, Field(ge=0.0, le=1.0)]
    model_id: Annotated[str, Field(min_length=1, max_length=128)]


class EndSession(_Op):
    """A conversation ended: its candidates are ready for the session-end consolidation."""

    kind: Literal["end_session"] = "end_session"
    conversation_id: ConversationId


class CandidateRef(WireModel):
    episode_id: EpisodeId
    sentence: Annotated[int, Field(ge=0, le=255)]


class Consolidate(_Op):
    """A record the consolidator made in the background from candidates or observations.

    It may be *said* only if its text is one whole sentence the user typed in the source
    episode (checked against the episode log like ``remember``); otherwise it is
    observed, inferred or a hypothesis. Normal-class facts become active ("recently
    learned"); sensitive classes, behaviour rules, external content and imports stay
    candidates. Naming an existing record the consolidator made refreshes it (a new
    version), e.g. an observation summary with more evidence.
    """

    kind: Literal["consolidate"] = "consolidate"
    record_id: RecordId
    content: RecordContent
    candidates: Annotated[list[CandidateRef], Field(max_length=64)] = []

    @model_validator(mode="after")
    def _known_state(self) -> Consolidate:
        if self.content.epistemic_state in (EpistemicState.VERIFIED, EpistemicState.INVALID):
            raise ValueError(
                f"a consolidated record is said, observed, inferred or hypothesis, "
                f"not {self.content.epistemic_state.value}"
            )
        return self


class Corroborate(_Op):
    """A second, independent piece of evidence from a different source for an external
    candidate: with it the candidate becomes active and verified (never a rule)."""

    kind: Literal["corroborate"] = "corroborate"
    record_id: RecordId
    episode_id: EpisodeId


class ReviseRule(_Op):
    """The user rewrites (or, with an older version's text, undoes a change to) a
    behaviour rule: a new version, checked again by ``protocol.behaviour``."""

    kind: Literal["revise_rule"] = "revise_rule"
    record_id: RecordId
    text: Text


class PassTime(_Op):
    """The daily time job: a record whose date has passed is kept as something in the
    past (a new version with time kind ``past``; the words are unchanged)."""

    kind: Literal["pass_time"] = "pass_time"
    record_id: RecordId


class AddArtifact(_Op):
    """A derived item (summary, text view, embedding, cached copy) and what it came from."""

    kind: Literal["add_artifact"] = "add_artifact"
    artifact_id: ArtifactId
    artifact_kind: ArtifactKind
    derived_from: Annotated[list[RecordId], Field(min_length=1, max_length=256)]
    payload: Annotated[str, Field(max_length=200_000)]


class SetProject(_Op):
    """Open (create or reopen) or close a project. Closed projects are left out of retrieval."""

    kind: Literal["set_project"] = "set_project"
    project: ProjectName
    open: bool


AnyOperation = (
    AddEpisode
    | Remember
    | Correct
    | DontUse
    | UseAgain
    | RestrictUsage
    | Confirm
    | Reaffirm
    | ForgetPermanently
    | ForgetArea
    | Infer
    | AddArtifact
    | SetProject
    | MarkCandidate
    | EndSession
    | Consolidate
    | Corroborate
    | ReviseRule
    | PassTime
)
Operation = Annotated[AnyOperation, Field(discriminator="kind")]
OPERATION_ADAPTER: TypeAdapter[AnyOperation] = TypeAdapter(Operation)

MAX_OPS_PER_PUSH = 500


class ReceiptStatus(StrEnum):
    APPLIED = "applied"
    DUPLICATE = "duplicate"
    REFUSED = "refused"
    CONFLICT = "conflict"


class RefusalCode(StrEnum):
    MALFORMED = "malformed"
    UNKNOWN_RECORD = "unknown_record"
    UNKNOWN_EPISODE = "unknown_episode"
    RECORD_EXISTS = "record_exists"
    EPISODE_EXISTS = "episode_exists"
    ARTIFACT_EXISTS = "artifact_exists"
    FORGOTTEN = "forgotten"
    NOT_SAID = "not_said"
    WRONG_CONVERSATION = "wrong_conversation"
    WRONG_STATE = "wrong_state"
    NOT_ALLOWED = "not_allowed"
    STRONG_AUTH_REQUIRED = "strong_auth_required"
    UNKNOWN_PROJECT = "unknown_project"
    CANDIDATE_EXISTS = "candidate_exists"


class EffectKind(StrEnum):
    """What an applied operation did, as its receipt states it."""

    EPISODE_LOGGED = "episode_logged"
    CREATED = "created"
    CORRECTED = "corrected"
    NOT_IN_USE = "not_in_use"
    IN_USE_AGAIN = "in_use_again"
    USAGE_RESTRICTED = "usage_restricted"
    USAGE_UNRESTRICTED = "usage_unrestricted"
    CONFIRMED = "confirmed"
    REAFFIRMED = "reaffirmed"
    ENDED = "ended"
    FORGOTTEN = "forgotten"
    ARTIFACT_ADDED = "artifact_added"
    PROJECT_OPENED = "project_opened"
    PROJECT_CLOSED = "project_closed"
    CANDIDATE_MARKED = "candidate_marked"
    SESSION_ENDED = "session_ended"
    LEARNED = "learned"
    REFRESHED = "refreshed"
    CORROBORATED = "corroborated"
    RULE_REVISED = "rule_revised"
    TIME_PASSED = "time_passed"


class Receipt(WireModel):
    """The durable answer to one operation: what it did, to which record and versions."""

    index: Annotated[int, Field(ge=0)]
    op_id: str | None
    status: ReceiptStatus
    original_status: ReceiptStatus | None = None  # set on a duplicate: what the first try got
    code: RefusalCode | None = None
    reason: str | None = None
    effect: EffectKind | None = None
    record_id: RecordId | None = None
    versions: list[int] = []  # e.g. [1] for a new record, [1, 2] for a correction (old, new)
    affected_records: list[RecordId] = []  # every record a forget made a skeleton
    applied_at: UtcDatetime | None = None
