"""The transition rules: one pure function both device and cloud apply.

Invariants:
- A permanently forgotten record accepts no operation; nothing can write it back.
- Only the user's own whole sentence, checked against the episode log, is "said";
  a correction is a new version in the user's words, never an overwrite.
- A newer said statement on the same subject wins; the older is flagged, not lost. A
  record on the same subject from another kind of source is a conflict: both flagged.
  A one-off record is an exception and touches neither.
- Anything from external content or an import (its own source kind, a source
  episode's, or a parent record's) stays a candidate and can never become a behaviour
  rule, a preference or the user's words; it goes live only by the user's confirmation
  or a second, independent source (``corroborate``). Sensitive classes and behaviour
  rules wait for the user's confirmation; only the user confirms. A behaviour rule is
  never authority (``protocol.behaviour``).
- Only episodes the user typed can make a record "said"; background consolidation
  passes the same verbatim check as ``remember``.
- Forgetting covers everything derived from the record, transitively.
- A mass forget needs the user as initiator and a valid strong-authentication proof.
- ``decide`` reads only the facts it is handed and returns effects as data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, assert_never

from protocol import behaviour, provenance, relating, statements, strongauth, subjects
from protocol.instructions import instruction_shape
from protocol.lifecycle import Move, Op, Refusal, basis_of, transition
from protocol.model import (
    ArtifactKind,
    ContentType,
    EpistemicState,
    Initiator,
    Layer,
    LifecycleState,
    Observation,
    RecordContent,
    RelationNote,
    Sensitivity,
    SourceKind,
    StatementRelation,
    TimeKind,
    UsageRestriction,
    Verification,
    VerifiedBy,
)
from protocol.operations import (
    AddArtifact,
    AddEpisode,
    AnyOperation,
    CandidateRef,
    Confirm,
    Consolidate,
    Correct,
    Corroborate,
    DontUse,
    EffectKind,
    EndSession,
    ForgetArea,
    ForgetPermanently,
    Infer,
    MarkCandidate,
    PassTime,
    Reaffirm,
    RefusalCode,
    Remember,
    RestrictUsage,
    ReviseRule,
    SetProject,
    UseAgain,
)
from protocol.sentences import check_said, is_question, normalise, split_sentences
from protocol.timeline import DEFAULT_FOR_NOW, effective_time_kind

# --- facts: what the caller's store knows ------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordFacts:
    """What the store knows about one record: its state and its current content.

    ``content`` is None when the record is forgotten (its keys are gone).
    ``highest_version`` is the highest version number the store holds for the record
    when that is above ``version``: a device may hold its own not-yet-numbered
    ("provisional") version above the current one after a pulled version took its
    number. A new version is numbered above both, so it never takes a held number.
    """

    record_id: str
    lifecycle: LifecycleState
    version: int
    content: RecordContent | None = None
    highest_version: int = 0

    @property
    def next_version(self) -> int:
        """The number a new version of this record takes."""
        return max(self.version, self.highest_version) + 1


@dataclass(frozen=True, slots=True)
class EpisodeFacts:
    episode_id: str
    conversation_id: str
    text: str
    typed_at: datetime | None = None
    source_kind: SourceKind = SourceKind.USER_STATEMENT
    source_id: str | None = None


@dataclass(frozen=True, slots=True)
class Facts:
    """Everything ``decide`` may look at, gathered by the caller from its store.

    - ``record``: the record the op names (None if absent).
    - ``episodes``: each episode id the op names that exists (content opened; for a
      forget, existence is enough).
    - ``related``: active records that may share a subject with the op's text (the
      store finds them by ``subjects.lookup_keys``; ``decide`` checks precisely).
    - ``children``: derivation edges, parent record id -> derived items, for every
      record reachable from the ones a forget names.
    - ``area_records``: for a mass forget, the ids of the records it covers.
    - ``known_records``: for ops naming other records (derived_from), their facts.
    - ``projects``: project name -> open?
    - ``concurrent_versions``: for a correction naming a ``base_version``, the versions
      of its record after that one made by someone other than the op's device (the
      cloud knows who made each version; a device gathers none).
    """

    space_id: str = ""
    record: RecordFacts | None = None
    episodes: Mapping[str, EpisodeFacts] | None = None
    related: Sequence[RecordFacts] = ()
    children: Mapping[str, Sequence[DerivedItem]] = field(default_factory=dict)
    area_records: Sequence[str] = ()
    known_records: Mapping[str, RecordFacts] = field(default_factory=dict)
    projects: Mapping[str, bool] = field(default_factory=dict)
    concurrent_versions: Sequence[int] = ()
    artifact_exists: bool = False
    account_key: bytes | None = None
    candidate_marked: bool = False


@dataclass(frozen=True, slots=True)
class DerivedItem:
    kind: str  # "record" or "artifact"
    item_id: str


def episodes_named(op: AnyOperation, record: RecordContent | None = None) -> list[str]:
    """The episode ids whose facts ``decide(op)`` looks at. ``record``: the current
    content of the record the op names, when the caller has read it (a corroboration
    compares its sources with the record's own episodes)."""
    if isinstance(op, AddEpisode | MarkCandidate):
        return [op.episode_id]
    if isinstance(op, ForgetPermanently):
        return list(op.episode_ids)
    if isinstance(op, Remember | Correct):
        return list(op.source_episode_ids)
    if isinstance(op, Infer | Consolidate):
        return list(op.content.source_episode_ids)
    if isinstance(op, Corroborate):
        own = list(record.source_episode_ids) if record is not None else []
        return [op.episode_id, *own]
    return []


def parents_named(op: AnyOperation) -> list[str]:
    """The records ``op`` says it derives from (their facts go in ``known_records``)."""
    if isinstance(op, Infer | Consolidate):
        return list(op.content.derived_from)
    if isinstance(op, AddArtifact):
        return list(op.derived_from)
    return []


def related_text(op: AnyOperation) -> tuple[str, str | None] | None:
    """The text and subject whose same-subject records ``decide(op)`` checks."""
    if isinstance(op, Remember):
        return op.text, op.subject
    if isinstance(op, Infer | Consolidate):
        return op.content.text, op.content.subject
    return None


def related_keys(op: AnyOperation, episodes: Mapping[str, EpisodeFacts] | None) -> list[str]:
    """The subject-index keys under which every record ``decide(op)`` may relate the
    op's statement to is kept (``episodes``: the op's episodes, as gathered for it, so
    a statement with no subject of its own is looked up with its context sentence)."""
    named = related_text(op)
    if named is None:
        return []
    text, subject = named
    conversation: str | None
    if isinstance(op, Remember):
        conversation, sources = op.conversation_id, op.source_episode_ids
    else:
        assert isinstance(op, Infer | Consolidate)
        conversation, sources = op.content.conversation_id, op.content.source_episode_ids
    found = statement_context(text, conversation, sources, episodes)
    return subjects.lookup_keys(text, subject, found[0] if found else None)


# --- effects: what the store must do ------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateEpisode:
    episode_id: str
    conversation_id: str


@dataclass(frozen=True, slots=True)
class CreateRecord:
    record_id: str
    version: int
    lifecycle_state: LifecycleState
    content: RecordContent

    @property
    def epistemic_state(self) -> EpistemicState:
        return self.content.epistemic_state


@dataclass(frozen=True, slots=True)
class AddVersion:
    """A new version of an existing record (correction, confirmation, reaffirmation)."""

    record_id: str
    version: int
    supersedes: int
    content: RecordContent
    lifecycle_state: LifecycleState


@dataclass(frozen=True, slots=True)
class SetLifecycle:
    record_id: str
    lifecycle_state: LifecycleState


@dataclass(frozen=True, slots=True)
class SetUsage:
    record_id: str
    restriction: UsageRestriction | None


@dataclass(frozen=True, slots=True)
class FlagSuperseded:
    """An older said statement on the same subject: flagged, kept, no longer current."""

    record_id: str
    by_record: str


@dataclass(frozen=True, slots=True)
class FlagConflict:
    """Two records on the same subject from different kinds of source: both kept."""

    record_id: str
    other_record: str


@dataclass(frozen=True, slots=True)
class ForgetRecords:
    """Destroy the keys of every version of these records, of their source episodes and
    of these artifacts; the records become skeletons. With ``all_episodes``, every
    episode of the space goes too (forgetting all memory).
    """

    record_ids: tuple[str, ...]
    artifact_ids: tuple[str, ...] = ()
    all_episodes: bool = False
    episode_ids: tuple[str, ...] = ()  # episodes to destroy beyond the records' own


@dataclass(frozen=True, slots=True)
class CreateArtifact:
    artifact_id: str
    artifact_kind: ArtifactKind
    derived_from: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SetProjectState:
    project: str
    open: bool


@dataclass(frozen=True, slots=True)
class CreateCandidate:
    """A detector's candidate: labels only; the words stay in their episode."""

    episode_id: str
    sentence: int
    conversation_id: str


@dataclass(frozen=True, slots=True)
class EndConversation:
    conversation_id: str


@dataclass(frozen=True, slots=True)
class ResolveCandidates:
    """These candidates were consolidated into ``record_id``."""

    candidates: tuple[CandidateRef, ...]
    record_id: str


Effect = (
    CreateEpisode
    | CreateRecord
    | AddVersion
    | SetLifecycle
    | SetUsage
    | FlagSuperseded
    | FlagConflict
    | ForgetRecords
    | CreateArtifact
    | SetProjectState
    | CreateCandidate
    | EndConversation
    | ResolveCandidates
)


@dataclass(frozen=True, slots=True)
class Accept:
    effects: tuple[Effect, ...]
    kind: EffectKind
    record_id: str | None = None
    versions: tuple[int, ...] = ()
    affected_records: tuple[str, ...] = ()
    conflict: str | None = None  # applied, but it raced another change: why (the receipt)

    @property
    def effect(self) -> Effect:
        """The primary effect (the first)."""
        return self.effects[0]


@dataclass(frozen=True, slots=True)
class Refuse:
    code: RefusalCode
    reason: str


Decision = Accept | Refuse


def decide(op: AnyOperation, facts: Facts) -> Decision:
    """Decide what ``op`` does given ``facts``; never raises for a well-formed op."""
    handler: Callable[[Any, Facts], Decision] = _HANDLERS[type(op)]
    return handler(op, facts)


# --- episodes, projects, artifacts --------------------------------------------------


def _add_episode(op: AddEpisode, facts: Facts) -> Decision:
    if facts.episodes and op.episode_id in facts.episodes:
        return Refuse(
            RefusalCode.EPISODE_EXISTS,
            f"episode {op.episode_id} already exists; an episode is written once",
        )
    return Accept((CreateEpisode(op.episode_id, op.conversation_id),), EffectKind.EPISODE_LOGGED)


def _set_project(op: SetProject, facts: Facts) -> Decision:
    exists = op.project in facts.projects
    if not op.open and not exists:
        return Refuse(RefusalCode.UNKNOWN_PROJECT, f"project {op.project!r} does not exist")
    kind = EffectKind.PROJECT_OPENED if op.open else EffectKind.PROJECT_CLOSED
    return Accept((SetProjectState(op.project, op.open),), kind)


def _add_artifact(op: AddArtifact, facts: Facts) -> Decision:
    if facts.artifact_exists:
        return Refuse(RefusalCode.ARTIFACT_EXISTS, f"artifact {op.artifact_id} already exists")
    problem = _check_parents(op.artifact_id, op.derived_from, facts)
    if problem is not None:
        return problem
    effect = CreateArtifact(op.artifact_id, op.artifact_kind, tuple(op.derived_from))
    return Accept((effect,), EffectKind.ARTIFACT_ADDED)


def _check_parents(item: str, parents: Sequence[str], facts: Facts) -> Refuse | None:
    for parent in parents:
        known = facts.known_records.get(parent)
        if known is None:
            return Refuse(
                RefusalCode.UNKNOWN_RECORD, f"{item} is derived from {parent}, which does not exist"
            )
        if known.lifecycle is LifecycleState.FORGOTTEN:
            return Refuse(
                RefusalCode.FORGOTTEN,
                f"{item} is derived from {parent}, which was permanently forgotten",
            )
    return None


# --- writing records -----------------------------------------------------------------


def _refuse_forgotten(record_id: str) -> Refuse:
    return Refuse(
        RefusalCode.FORGOTTEN,
        f"record {record_id} was permanently forgotten; it cannot be changed or brought back",
    )


def _said(
    record_id: str, text: str, conversation_id: str, sources: Sequence[str], facts: Facts
) -> Refuse | EpisodeFacts:
    """Check the verbatim rule; return the episode holding the sentence, or a refusal."""
    known = facts.episodes or {}
    missing = [e for e in sources if e not in known]
    if missing:
        return Refuse(
            RefusalCode.UNKNOWN_EPISODE,
            f"record {record_id} names episode(s) {', '.join(missing)} that this space "
            "does not hold (or whose content was forgotten)",
        )
    elsewhere = [e for e in sources if known[e].conversation_id != conversation_id]
    if elsewhere:
        return Refuse(
            RefusalCode.WRONG_CONVERSATION,
            f"record {record_id}: episode(s) {', '.join(elsewhere)} belong to another "
            f"conversation than {conversation_id}",
        )
    not_typed = [e for e in sources if known[e].source_kind is not SourceKind.USER_STATEMENT]
    if not_typed:
        kinds = sorted({known[e].source_kind.value for e in not_typed})
        return Refuse(
            RefusalCode.NOT_SAID,
            f"record {record_id} refused: episode(s) {', '.join(not_typed)} hold "
            f"{', '.join(kinds)}, not words the user typed; only the user's words are said",
        )
    for episode_id in sources:
        if check_said(text, [known[episode_id].text]).ok:
            return known[episode_id]
    check = check_said(text, (known[e].text for e in sources))
    return Refuse(RefusalCode.NOT_SAID, f"record {record_id} refused: {check.reason}")


def statement_context(
    text: str,
    conversation_id: str | None,
    sources: Sequence[str],
    episodes: Mapping[str, EpisodeFacts] | None,
) -> tuple[str, datetime | None] | None:
    """The sentence that gives a statement with no subject of its own ("No wait, it's on
    the 17th.") its subject: the nearest earlier sentence the user typed in the same
    conversation, among the op's source episodes, that has a frame and is not a
    question (at most ``CONTEXT_REACH`` sentences back). None when it needs none or
    none is there."""
    if conversation_id is None or not statements.needs_context(text):
        return None
    known = episodes or {}
    held = [
        known[e]
        for e in dict.fromkeys(sources)
        if e in known
        and known[e].conversation_id == conversation_id
        and known[e].source_kind is SourceKind.USER_STATEMENT
    ]
    held.sort(key=lambda f: (f.typed_at is not None, f.typed_at or datetime.min, f.episode_id))
    said = [(sentence, f.typed_at) for f in held for sentence in split_sentences(f.text)]
    wanted = normalise(text)
    at = max(
        (i for i, (sentence, _) in enumerate(said) if normalise(sentence) == wanted), default=-1
    )
    for sentence, typed_at in reversed(said[max(0, at - CONTEXT_REACH) : max(at, 0)]):
        if not is_question(sentence) and statements.parse(sentence).framed:
            return sentence, typed_at
    return None


CONTEXT_REACH = 3


def context_episodes(text: str, held: Sequence[tuple[str, EpisodeFacts]], own: str) -> list[str]:
    """The episodes a statement with no subject of its own also names as its sources,
    so the rules can find its context sentence (``statement_context``): the ones before
    ``own`` in ``held`` (a conversation's episodes, oldest first), up to the
    ``CONTEXT_REACH`` sentences it may look back. Empty when it needs no context."""
    if not statements.needs_context(text):
        return []
    ids = [e for e, _ in held]
    if own not in ids:
        return []
    out: list[str] = []
    reach = CONTEXT_REACH
    for episode_id, episode in reversed(held[: ids.index(own)]):
        if reach <= 0:
            break
        out.insert(0, episode_id)
        reach -= len(split_sentences(episode.text))
    return out


def _with_context(
    content: RecordContent, conversation_id: str | None, facts: Facts
) -> RecordContent:
    """``content`` with the context sentence the rules find (only said records keep one)."""
    found = None
    if content.epistemic_state is EpistemicState.SAID:
        found = statement_context(
            content.text, conversation_id, content.source_episode_ids, facts.episodes
        )
    text, at = found if found is not None else (None, None)
    # A record whose words the context repeats is a parent: forgetting it forgets the
    # copy of its words this record keeps (``derivation_closure``), so nothing a forget
    # named stays readable here.
    parents = [] if text is None else _records_saying(text, facts)
    derived = sorted({*content.derived_from, *parents})
    if (content.context_text, content.context_said_at, content.derived_from) == (
        text,
        at,
        derived,
    ):
        return content
    return content.model_copy(
        update={"context_text": text, "context_said_at": at, "derived_from": derived}
    )


def _records_saying(text: str, facts: Facts) -> list[str]:
    """Active records (of the related ones: every store hands ``decide`` those alike)
    whose current words are ``text``."""
    wanted = normalise(text).casefold()
    return [
        r.record_id
        for r in facts.related
        if r.content is not None
        and r.lifecycle is LifecycleState.ACTIVE
        and normalise(r.content.text).casefold() == wanted
    ]


def _provenanced(content: RecordContent, facts: Facts) -> RecordContent:
    """``content`` with the provenance the rules establish (whatever the op claimed):
    the user's only for a said record whose words ``_said`` checked verbatim."""
    held = facts.episodes or {}
    sources = {
        e: (found.source_kind, found.source_id)
        for e in content.source_episode_ids
        if (found := held.get(e)) is not None
    }
    made = provenance.establish(content, sources)
    if content.provenance == made:
        return content
    return content.model_copy(update={"provenance": made})


def _statement(content: RecordContent) -> statements.Statement:
    """A record's statement; an explicit subject key is its holder and attribute."""
    read = relating.statement_of(content.text, content.context_text)
    if content.subject:
        return replace(read, holder="subject", attribute=content.subject.casefold().strip())
    return read


def _relations(
    record_id: str, content: RecordContent, facts: Facts, made_at: datetime
) -> tuple[tuple[Effect, ...], list[str], RecordContent]:
    """How the new record relates to each active record that may share its subject
    (``protocol.relating``): a correction supersedes the older statement, a conflict
    flags both, an addition or exception leaves both current. Each decision and its
    evidence is noted on the new record; returns the effects, the conflicting ids and
    the content with its notes."""
    new = _statement(content)
    new_user = (
        content.source_kind is SourceKind.USER_STATEMENT
        and content.epistemic_state is EpistemicState.SAID
    )
    at = content.said_at or made_at
    effects: list[Effect] = []
    conflicts: list[str] = []
    notes: list[RelationNote] = []
    one_off = False
    for other in facts.related:
        body = other.content
        if (
            other.record_id == record_id
            or body is None
            or other.lifecycle is not LifecycleState.ACTIVE
            or bool(content.subject) != bool(body.subject)
        ):
            continue
        old_user = body.source_kind is SourceKind.USER_STATEMENT and body.epistemic_state in (
            EpistemicState.SAID,
            EpistemicState.VERIFIED,
        )
        verdict = relating.relate(
            new,
            _statement(body),
            same_source=new_user and old_user,
            new_one_off=content.time_kind is TimeKind.ONE_OFF,
            old_one_off=body.time_kind is TimeKind.ONE_OFF,
        )
        match verdict.kind:
            case StatementRelation.UNRELATED:
                continue
            case StatementRelation.CORRECTION:
                newer = (
                    body.said_at is None
                    or content.said_at is None
                    or (content.said_at >= body.said_at)
                )
                if newer:
                    effects.append(FlagSuperseded(other.record_id, record_id))
                else:
                    effects.append(FlagSuperseded(record_id, other.record_id))
            case StatementRelation.CONFLICT:
                effects.append(FlagConflict(record_id, other.record_id))
                effects.append(FlagConflict(other.record_id, record_id))
                conflicts.append(other.record_id)
            case StatementRelation.EXCEPTION:
                one_off = True
            case StatementRelation.ADDITION:
                pass
            case unknown:
                assert_never(unknown)
        notes.append(
            RelationNote(
                kind=verdict.kind, record_id=other.record_id, evidence=verdict.evidence, at=at
            )
        )
    update: dict[str, Any] = {}
    if notes:
        update["relations"] = notes[:MAX_NOTES]
    if one_off and content.time_kind is TimeKind.PERMANENT:
        # "make it decaf today" beside a lasting record: a one-off of that day
        update["time_kind"] = TimeKind.ONE_OFF
        update["valid_from"] = content.valid_from or at
    if update:
        content = content.model_copy(update=update)
    return tuple(effects), conflicts, content


MAX_NOTES = 64


def _remember(op: Remember, facts: Facts) -> Decision:
    if facts.record is not None:
        if facts.record.lifecycle is LifecycleState.FORGOTTEN:
            return _refuse_forgotten(op.record_id)
        return Refuse(
            RefusalCode.RECORD_EXISTS,
            f"record {op.record_id} already exists (v{facts.record.version}); "
            "a new record needs a new id",
        )
    said = _said(op.record_id, op.text, op.conversation_id, op.source_episode_ids, facts)
    if isinstance(said, Refuse):
        return said
    if op.project is not None and op.project not in facts.projects:
        return Refuse(RefusalCode.UNKNOWN_PROJECT, f"project {op.project!r} does not exist")
    content = RecordContent(
        text=op.text,
        content_type=op.content_type,
        custom_type=op.custom_type,
        epistemic_state=EpistemicState.SAID,
        layer=op.layer,
        time_kind=op.time_kind,
        valid_from=op.valid_from,
        valid_until=op.valid_until,
        expected_end=_default_end(op.time_kind, op.expected_end, op.made_at),
        source_episode_ids=list(op.source_episode_ids),
        source_kind=SourceKind.USER_STATEMENT,
        life_areas=list(op.life_areas),
        project=op.project,
        sensitivity=op.sensitivity,
        conversation_id=op.conversation_id,
        subject=op.subject,
        said_at=said.typed_at or op.made_at,
    )
    content = _provenanced(_with_context(content, op.conversation_id, facts), facts)
    relations, conflicts, content = _relations(op.record_id, content, facts, op.made_at)
    if conflicts:
        content = _with_conflicts(content, conflicts)
    create = CreateRecord(op.record_id, 1, LifecycleState.ACTIVE, content)
    return Accept((create, *relations), EffectKind.CREATED, op.record_id, (1,))


def _default_end(kind: TimeKind, given: datetime | None, now: datetime) -> datetime | None:
    if kind is not TimeKind.FOR_NOW:
        return given
    return given or now + DEFAULT_FOR_NOW


def _with_conflicts(content: RecordContent, conflicts: Sequence[str]) -> RecordContent:
    evidence = content.evidence.model_copy(
        update={"conflicting_records": sorted({*content.evidence.conflicting_records, *conflicts})}
    )
    return content.model_copy(update={"evidence": evidence})


# What stays a candidate and is never authority: a page, email, document, calendar
# invite, another agent or tool output, and an import. A connected source (the user's
# own calendar, say) is not external content: its records can be active and conflict
# with what the user said; but no behaviour rule ever rests on it (``RULE_SOURCES``).
EXTERNAL_KINDS = (SourceKind.EXTERNAL_CONTENT, SourceKind.IMPORT)
RULE_SOURCES = (SourceKind.USER_STATEMENT, SourceKind.USER_BEHAVIOUR)


def _external_origin(content: RecordContent, facts: Facts) -> str | None:
    """Why ``content`` counts as derived from external content or an import (None: it
    does not): its own source kind, a source episode's, or a parent record's."""
    if content.source_kind in EXTERNAL_KINDS:
        return f"it comes from {content.source_kind.value}"
    for episode_id in content.source_episode_ids:
        episode = (facts.episodes or {}).get(episode_id)
        if episode is not None and episode.source_kind in EXTERNAL_KINDS:
            return f"its episode {episode_id} holds {episode.source_kind.value}"
    for parent_id in content.derived_from:
        parent = facts.known_records.get(parent_id)
        if (
            parent is not None
            and parent.content is not None
            and (parent.content.source_kind in EXTERNAL_KINDS)
        ):
            return f"it is derived from {parent_id}, which holds external content"
    return None


def _background_problem(record_id: str, content: RecordContent, facts: Facts) -> Refuse | None:
    """What no background write may do: make external content a rule, a preference or
    the user's own statement; write a rule that is authority; cite missing episodes."""
    known = facts.episodes or {}
    missing = [e for e in content.source_episode_ids if e not in known]
    if missing:
        return Refuse(
            RefusalCode.UNKNOWN_EPISODE,
            f"record {record_id} names episode(s) {', '.join(missing)} that this space "
            "does not hold",
        )
    problem = _check_parents(record_id, content.derived_from, facts)
    if problem is not None:
        return problem
    external = _external_origin(content, facts)
    if external is not None:
        if content.layer is Layer.BEHAVIOUR_RULE:
            return Refuse(
                RefusalCode.NOT_ALLOWED,
                f"record {record_id}: {external}; external content can never become a "
                "behaviour rule",
            )
        if content.content_type is ContentType.PREFERENCE:
            return Refuse(
                RefusalCode.NOT_ALLOWED,
                f"record {record_id}: {external}; external content can never become a "
                "preference rule (a source cannot say what the user prefers)",
            )
        if content.source_kind not in EXTERNAL_KINDS:
            return Refuse(
                RefusalCode.NOT_ALLOWED,
                f"record {record_id}: {external}, so its source kind cannot be "
                f"{content.source_kind.value}",
            )
    if content.layer is Layer.BEHAVIOUR_RULE and content.source_kind not in RULE_SOURCES:
        return Refuse(
            RefusalCode.NOT_ALLOWED,
            f"record {record_id}: a behaviour rule rests on the user's own words or "
            f"behaviour, never on {content.source_kind.value}",
        )
    if content.layer is Layer.BEHAVIOUR_RULE:
        problem_text = behaviour.rule_problem(content.text)
        if problem_text is not None:
            return Refuse(RefusalCode.NOT_ALLOWED, f"record {record_id}: {problem_text}")
    return None


def _background_lifecycle(content: RecordContent, facts: Facts) -> LifecycleState:
    """Normal-class facts go live; sensitive classes, behaviour rules, external content
    and imports wait for the user's confirmation."""
    waits = _external_origin(content, facts) is not None
    waits = waits or content.layer is Layer.BEHAVIOUR_RULE
    waits = waits or content.sensitivity is not Sensitivity.NORMAL
    return LifecycleState.CANDIDATE if waits else LifecycleState.ACTIVE


def _infer(op: Infer, facts: Facts) -> Decision:
    if facts.record is not None:
        if facts.record.lifecycle is LifecycleState.FORGOTTEN:
            return _refuse_forgotten(op.record_id)
        return Refuse(RefusalCode.RECORD_EXISTS, f"record {op.record_id} already exists")
    content = op.content
    problem = _background_problem(op.record_id, content, facts)
    if problem is not None:
        return problem
    lifecycle = _background_lifecycle(content, facts)
    content = content.model_copy(
        update={"expected_end": _default_end(content.time_kind, content.expected_end, op.made_at)}
    )
    content = _provenanced(_with_context(content, content.conversation_id, facts), facts)
    relations, conflicts, content = _relations(op.record_id, content, facts, op.made_at)
    if conflicts:
        content = _with_conflicts(content, conflicts)
    create = CreateRecord(op.record_id, 1, lifecycle, content)
    return Accept((create, *relations), EffectKind.CREATED, op.record_id, (1,))


def _consolidate(op: Consolidate, facts: Facts) -> Decision:
    if op.initiated_by is not Initiator.ASSISTANT:
        return Refuse(
            RefusalCode.NOT_ALLOWED,
            f"record {op.record_id}: consolidation is the assistant's background work; "
            "the user keeps a sentence with remember",
        )
    content = op.content.model_copy(update={"background": True})
    problem = _background_problem(op.record_id, content, facts)
    if problem is not None:
        return problem
    if content.epistemic_state is EpistemicState.SAID:
        if content.conversation_id is None:
            return Refuse(
                RefusalCode.NOT_SAID,
                f"record {op.record_id} refused: a said record names the conversation "
                "it was typed in",
            )
        said = _said(
            op.record_id,
            content.text,
            content.conversation_id,
            content.source_episode_ids,
            facts,
        )
        if isinstance(said, Refuse):
            return said
        content = content.model_copy(update={"said_at": said.typed_at or op.made_at})
    content = _provenanced(_with_context(content, content.conversation_id, facts), facts)
    content = content.model_copy(
        update={"expected_end": _default_end(content.time_kind, content.expected_end, op.made_at)}
    )
    resolve = ResolveCandidates(tuple(op.candidates), op.record_id)
    existing = facts.record
    if existing is not None:
        if existing.lifecycle is LifecycleState.FORGOTTEN:
            return _refuse_forgotten(op.record_id)
        assert existing.content is not None
        if not existing.content.background or existing.content.epistemic_state in (
            EpistemicState.SAID,
            EpistemicState.VERIFIED,
            EpistemicState.INVALID,
        ):
            return Refuse(
                RefusalCode.RECORD_EXISTS,
                f"record {op.record_id} exists and is not the consolidator's own derived "
                "record; the consolidator refreshes only what it derived",
            )
        content = _provenanced(_still_waiting(existing.content, content), facts)
        lifecycle = (
            existing.lifecycle
            if existing.lifecycle is not LifecycleState.ACTIVE
            else _background_lifecycle(content, facts)
        )
        new = existing.next_version
        refresh = AddVersion(op.record_id, new, existing.version, content, lifecycle)
        return Accept(
            (refresh, resolve), EffectKind.REFRESHED, op.record_id, (existing.version, new)
        )
    lifecycle = _background_lifecycle(content, facts)
    relations, conflicts, content = _relations(op.record_id, content, facts, op.made_at)
    if conflicts:
        content = _with_conflicts(content, conflicts)
    create = CreateRecord(op.record_id, 1, lifecycle, content)
    return Accept((create, *relations, resolve), EffectKind.LEARNED, op.record_id, (1,))


def _still_waiting(held: RecordContent, refreshed: RecordContent) -> RecordContent:
    """A refresh never takes away what a record waits for: a sensitive class, the rule
    layer or an external source stays (only the user's confirmation settles them), so
    no later ``use_again`` can read the refreshed content as settled."""
    update: dict[str, Any] = {}
    if held.sensitivity is not Sensitivity.NORMAL and refreshed.sensitivity is Sensitivity.NORMAL:
        update["sensitivity"] = held.sensitivity
    if held.layer is Layer.BEHAVIOUR_RULE and refreshed.layer is not Layer.BEHAVIOUR_RULE:
        update["layer"] = held.layer
    if held.source_kind in EXTERNAL_KINDS and refreshed.source_kind not in EXTERNAL_KINDS:
        update["source_kind"] = held.source_kind
    return refreshed.model_copy(update=update) if update else refreshed


def _mark_candidate(op: MarkCandidate, facts: Facts) -> Decision:
    episode = (facts.episodes or {}).get(op.episode_id)
    if episode is None:
        return Refuse(
            RefusalCode.UNKNOWN_EPISODE,
            f"candidate {op.episode_id}#{op.sentence}: episode {op.episode_id} is not held "
            "here (or its content was forgotten)",
        )
    sentences = len(split_sentences(episode.text))
    if op.sentence >= sentences:
        return Refuse(
            RefusalCode.MALFORMED,
            f"candidate {op.episode_id}#{op.sentence}: the episode has only {sentences} "
            "sentence(s)",
        )
    if facts.candidate_marked:
        return Refuse(
            RefusalCode.CANDIDATE_EXISTS,
            f"candidate {op.episode_id}#{op.sentence} is already marked",
        )
    effect = CreateCandidate(op.episode_id, op.sentence, episode.conversation_id)
    return Accept((effect,), EffectKind.CANDIDATE_MARKED)


def _end_session(op: EndSession, facts: Facts) -> Decision:
    return Accept((EndConversation(op.conversation_id),), EffectKind.SESSION_ENDED)


def _corroborate(op: Corroborate, facts: Facts) -> Decision:
    found = _lifecycle_move(op, Op.CORROBORATE, facts)
    if isinstance(found, Refuse):
        return found
    record, move = found
    assert record.content is not None
    content = record.content
    episode = (facts.episodes or {}).get(op.episode_id)
    if episode is None:
        return Refuse(
            RefusalCode.UNKNOWN_EPISODE,
            f"record {op.record_id}: episode {op.episode_id} is not held here",
        )
    if episode.source_kind is SourceKind.IMPORT:
        return Refuse(
            RefusalCode.NOT_ALLOWED,
            f"record {op.record_id}: an import is not independent evidence",
        )
    shape = instruction_shape(content.text)
    if shape is not None:
        return Refuse(
            RefusalCode.NOT_ALLOWED,
            f"record {op.record_id}: {shape}; instruction-shaped external content becomes "
            "active only when you confirm it, never by corroboration",
        )
    new_source = episode.source_id or f"user:{episode.conversation_id}"
    known_sources = {o.source_id for o in content.evidence.observations}
    for source_episode in content.source_episode_ids:
        held = (facts.episodes or {}).get(source_episode)
        if held is not None and held.source_id is not None:
            known_sources.add(held.source_id)
    if new_source in known_sources or op.episode_id in content.source_episode_ids:
        return Refuse(
            RefusalCode.NOT_ALLOWED,
            f"record {op.record_id}: {new_source!r} is a source it already rests on; "
            "two pieces of evidence from the same source count as one",
        )
    origins = {provenance.origin_of(s) for s in known_sources}
    origin = provenance.origin_of(new_source)
    if origin in origins:
        return Refuse(
            RefusalCode.NOT_ALLOWED,
            f"record {op.record_id}: {new_source[:80]!r} comes from {origin[:80]!r}, the "
            "origin it already rests on; evidence from one sender or site is not independent",
        )
    observation = Observation(
        source_id=new_source,
        source_kind=episode.source_kind,
        at=episode.typed_at or op.made_at,
    )
    evidence = content.evidence.model_copy(
        update={"observations": [*content.evidence.observations, observation]}
    )
    updated = content.model_copy(
        update={
            "epistemic_state": EpistemicState.VERIFIED,
            "evidence": evidence,
            "source_episode_ids": [*content.source_episode_ids, op.episode_id][-64:],
            "provenance": provenance.provenance_of(content),
            "verification": Verification(
                by=VerifiedBy.SOURCES, at=op.made_at, sources=sorted({*origins, origin})[:64]
            ),
        }
    )
    return _next_version(record, updated, move.to, EffectKind.CORROBORATED)


def _pass_time(op: PassTime, facts: Facts) -> Decision:
    found = _lifecycle_move(op, Op.PASS_TIME, facts)
    if isinstance(found, Refuse):
        return found
    record, move = found
    assert record.content is not None
    content = record.content
    if content.time_kind is TimeKind.PAST or (
        effective_time_kind(content, op.made_at) is not TimeKind.PAST
    ):
        return Refuse(
            RefusalCode.WRONG_STATE,
            f"record {op.record_id} is {content.time_kind.value} and its time has not passed",
        )
    until = content.valid_until or content.valid_from or op.made_at
    past = content.model_copy(
        update={"time_kind": TimeKind.PAST, "valid_until": until, "expected_end": None}
    )
    return _next_version(record, past, move.to, EffectKind.TIME_PASSED)


def _revise_rule(op: ReviseRule, facts: Facts) -> Decision:
    found = _lifecycle_move(op, Op.REVISE_RULE, facts)
    if isinstance(found, Refuse):
        return found
    record, move = found
    assert record.content is not None
    if record.content.layer is not Layer.BEHAVIOUR_RULE:
        return Refuse(
            RefusalCode.WRONG_STATE,
            f"record {op.record_id} is a {record.content.layer.value}, not a behaviour rule",
        )
    problem = behaviour.rule_problem(op.text)
    if problem is not None:
        return Refuse(RefusalCode.NOT_ALLOWED, f"record {op.record_id}: {problem}")
    content = record.content.model_copy(
        update={
            "text": op.text,
            "epistemic_state": EpistemicState.VERIFIED,
            "provenance": provenance.provenance_of(record.content),
            "verification": Verification(by=VerifiedBy.USER, at=op.made_at),
        }
    )
    return _next_version(record, content, move.to, EffectKind.RULE_REVISED)


def _next_version(
    record: RecordFacts, content: RecordContent, lifecycle: LifecycleState, kind: EffectKind
) -> Accept:
    """A new version of ``record`` (the old one stays in the chain)."""
    new = record.next_version
    effect = AddVersion(record.record_id, new, record.version, content, lifecycle)
    return Accept((effect,), kind, record.record_id, (record.version, new))


def _existing(record_id: str, facts: Facts) -> Refuse | RecordFacts:
    record = facts.record
    if record is None:
        return Refuse(
            RefusalCode.UNKNOWN_RECORD, f"record {record_id} does not exist in this space"
        )
    if record.lifecycle is LifecycleState.FORGOTTEN or record.content is None:
        return _refuse_forgotten(record_id)
    return record


RecordOp = Confirm | Corroborate | DontUse | UseAgain | Correct | ReviseRule | Reaffirm | PassTime


def _lifecycle_move(op: RecordOp, kind: Op, facts: Facts) -> Refuse | tuple[RecordFacts, Move]:
    """The record ``op`` names and the move the lifecycle table allows it, or the
    table's refusal naming the record and the reason."""
    record = facts.record
    if record is None:
        return Refuse(
            RefusalCode.UNKNOWN_RECORD, f"record {op.record_id} does not exist in this space"
        )
    content = None if record.lifecycle is LifecycleState.FORGOTTEN else record.content
    if content is None and record.lifecycle is not LifecycleState.FORGOTTEN:
        return _refuse_forgotten(op.record_id)  # its keys are gone
    state = record.lifecycle
    outcome = transition(state, kind, op.initiated_by, basis_of(content))
    if isinstance(outcome, Refusal):
        source = content.source_kind.value if content is not None else ""
        return Refuse(outcome.code, outcome.reason(op.record_id, state, source))
    return record, outcome


def _correct(op: Correct, facts: Facts) -> Decision:
    found = _lifecycle_move(op, Op.CORRECT, facts)
    if isinstance(found, Refuse):
        return found
    record, move = found
    assert record.content is not None
    said = _said(op.record_id, op.text, op.conversation_id, op.source_episode_ids, facts)
    if isinstance(said, Refuse):
        return said
    content = record.content.model_copy(
        update={
            "text": op.text,
            "epistemic_state": EpistemicState.SAID,
            "source_kind": SourceKind.USER_STATEMENT,
            "source_episode_ids": list(op.source_episode_ids),
            "conversation_id": op.conversation_id,
            "said_at": said.typed_at or op.made_at,
            "alternatives": [],
            "relations": [],
            # typed in conversation, not written in the background: the user's word,
            # which the lifecycle's basis reads (``protocol.lifecycle.basis_of``)
            "background": False,
            "verification": None,
        }
    )
    content = _provenanced(_with_context(content, op.conversation_id, facts), facts)
    accepted = _next_version(record, content, move.to, EffectKind.CORRECTED)
    if not facts.concurrent_versions:
        return accepted
    raced = ", ".join(f"v{v}" for v in sorted(facts.concurrent_versions))
    return replace(
        accepted,
        conflict=(
            f"record {op.record_id} was changed elsewhere after v{op.base_version}, the "
            f"version this correction replaced ({raced}); both are kept, this correction "
            f"is v{accepted.versions[-1]}, the current one"
        ),
    )


def _dont_use(op: DontUse, facts: Facts) -> Decision:
    found = _lifecycle_move(op, Op.DONT_USE, facts)
    if isinstance(found, Refuse):
        return found
    record, move = found
    effect = SetLifecycle(op.record_id, move.to)
    return Accept((effect,), EffectKind.NOT_IN_USE, op.record_id, (record.version,))


def _use_again(op: UseAgain, facts: Facts) -> Decision:
    """Back to what the record was: a candidate when its content still waits for the
    user (``protocol.lifecycle``), else active."""
    found = _lifecycle_move(op, Op.USE_AGAIN, facts)
    if isinstance(found, Refuse):
        return found
    record, move = found
    effect = SetLifecycle(op.record_id, move.to)
    return Accept((effect,), EffectKind.IN_USE_AGAIN, op.record_id, (record.version,))


def _restrict(op: RestrictUsage, facts: Facts) -> Decision:
    record = _existing(op.record_id, facts)
    if isinstance(record, Refuse):
        return record
    project = op.restriction.project if op.restriction else None
    if project is not None and project not in facts.projects:
        return Refuse(RefusalCode.UNKNOWN_PROJECT, f"project {project!r} does not exist")
    kind = EffectKind.USAGE_RESTRICTED if op.restriction else EffectKind.USAGE_UNRESTRICTED
    effect = SetUsage(op.record_id, op.restriction)
    return Accept((effect,), kind, op.record_id, (record.version,))


def _confirm(op: Confirm, facts: Facts) -> Decision:
    found = _lifecycle_move(op, Op.CONFIRM, facts)
    if isinstance(found, Refuse):
        return found
    record, move = found
    assert record.content is not None
    if record.content.layer is Layer.BEHAVIOUR_RULE:
        problem = behaviour.rule_problem(record.content.text)
        if problem is not None:
            return Refuse(RefusalCode.NOT_ALLOWED, f"record {op.record_id}: {problem}")
        if record.content.source_kind in EXTERNAL_KINDS:
            return Refuse(
                RefusalCode.NOT_ALLOWED,
                f"record {op.record_id}: external content can never become a behaviour rule",
            )
    content = record.content.model_copy(
        update={
            "epistemic_state": EpistemicState.VERIFIED,
            "provenance": provenance.provenance_of(record.content),
            "verification": Verification(by=VerifiedBy.USER, at=op.made_at),
        }
    )
    return _next_version(record, content, move.to, EffectKind.CONFIRMED)


def _reaffirm(op: Reaffirm, facts: Facts) -> Decision:
    found = _lifecycle_move(op, Op.REAFFIRM, facts)
    if isinstance(found, Refuse):
        return found
    record, move = found
    assert record.content is not None
    if record.content.time_kind is not TimeKind.FOR_NOW:
        return Refuse(
            RefusalCode.WRONG_STATE,
            f"record {op.record_id} is {record.content.time_kind.value}, not 'for now'",
        )
    if op.still_true:
        end = op.expected_end or op.made_at + DEFAULT_FOR_NOW
        content = record.content.model_copy(update={"expected_end": end})
        kind = EffectKind.REAFFIRMED
    else:
        content = record.content.model_copy(
            update={"time_kind": TimeKind.PAST, "valid_until": op.made_at, "expected_end": None}
        )
        kind = EffectKind.ENDED
    return _next_version(record, content, move.to, kind)


# --- forgetting -------------------------------------------------------------------------


def derivation_closure(
    roots: Sequence[str], children: Mapping[str, Sequence[DerivedItem]]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Every record and artifact derived, directly or not, from ``roots`` (roots included)."""
    records: list[str] = []
    artifacts: list[str] = []
    seen: set[tuple[str, str]] = set()
    stack = [DerivedItem("record", r) for r in reversed(roots)]
    while stack:
        item = stack.pop()
        if (item.kind, item.item_id) in seen:
            continue
        seen.add((item.kind, item.item_id))
        if item.kind == "artifact":
            artifacts.append(item.item_id)
            continue
        records.append(item.item_id)
        stack.extend(reversed(list(children.get(item.item_id, ()))))
    return tuple(records), tuple(sorted(artifacts))


def _forget(op: ForgetPermanently, facts: Facts) -> Decision:
    if facts.record is None:
        held = tuple(sorted(e for e in op.episode_ids if e in (facts.episodes or {})))
        if held:
            # never seen here, forgotten where it was made: its words go all the same
            effect = ForgetRecords((), episode_ids=held)
            return Accept((effect,), EffectKind.FORGOTTEN, op.record_id)
        return Refuse(
            RefusalCode.UNKNOWN_RECORD, f"record {op.record_id} does not exist in this space"
        )
    if facts.record.lifecycle is LifecycleState.FORGOTTEN:
        return _refuse_forgotten(op.record_id)
    records, artifacts = derivation_closure([op.record_id], facts.children)
    effect = ForgetRecords(records, artifacts)
    return Accept((effect,), EffectKind.FORGOTTEN, op.record_id, (), records)


def _forget_area(op: ForgetArea, facts: Facts) -> Decision:
    what = f"all memory in {op.area.value}" if op.area else "all memory"
    if op.initiated_by is not Initiator.USER:
        return Refuse(
            RefusalCode.NOT_ALLOWED,
            f"forgetting {what} can only be started by the user, never by the assistant",
        )
    if facts.account_key is None or not strongauth.verify(
        facts.account_key,
        op.proof,
        facts.space_id,
        op.op_id,
        op.area.value if op.area else None,
    ):
        return Refuse(
            RefusalCode.STRONG_AUTH_REQUIRED,
            f"forgetting {what} needs strong authentication: the proof does not verify "
            "against this account's key",
        )
    records, artifacts = derivation_closure(list(facts.area_records), facts.children)
    effect = ForgetRecords(records, artifacts, all_episodes=op.area is None)
    return Accept((effect,), EffectKind.FORGOTTEN, None, (), records)


_HANDLERS: dict[type, Callable[[Any, Facts], Decision]] = {
    AddEpisode: _add_episode,
    Remember: _remember,
    Correct: _correct,
    DontUse: _dont_use,
    UseAgain: _use_again,
    RestrictUsage: _restrict,
    Confirm: _confirm,
    Reaffirm: _reaffirm,
    ForgetPermanently: _forget,
    ForgetArea: _forget_area,
    Infer: _infer,
    AddArtifact: _add_artifact,
    SetProject: _set_project,
    MarkCandidate: _mark_candidate,
    EndSession: _end_session,
    Consolidate: _consolidate,
    Corroborate: _corroborate,
    ReviseRule: _revise_rule,
    PassTime: _pass_time,
}
