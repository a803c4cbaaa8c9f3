"""The transition rules: one pure function both device and cloud apply.

Invariants:
- A permanently forgotten record accepts no operation; nothing can write it back.
- Only the user's own whole sentence, checked against the episode log, is "said";
  a correction is a new version in the user's words, never an overwrite.
- A newer said statement on the same subject wins; the older is flagged, not lost. A
  record on the same subject from another kind of source is a conflict: both flagged.
  A one-off record is an exception and touches neither.
- Anything from external content or an import stays a candidate and can never become
  a behaviour rule. Sensitive classes and behaviour rules wait for the user's
  confirmation; only the user confirms.
- Forgetting covers everything derived from the record, transitively.
- A mass forget needs the user as initiator and a valid strong-authentication proof.
- ``decide`` reads only the facts it is handed and returns effects as data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from protocol import strongauth, subjects
from protocol.model import (
    ArtifactKind,
    EpistemicState,
    Initiator,
    Layer,
    LifecycleState,
    RecordContent,
    Sensitivity,
    SourceKind,
    TimeKind,
    UsageRestriction,
)
from protocol.operations import (
    AddArtifact,
    AddEpisode,
    AnyOperation,
    Confirm,
    Correct,
    DontUse,
    EffectKind,
    ForgetArea,
    ForgetPermanently,
    Infer,
    Reaffirm,
    RefusalCode,
    Remember,
    RestrictUsage,
    SetProject,
    UseAgain,
)
from protocol.sentences import check_said
from protocol.timeline import DEFAULT_FOR_NOW

# --- facts: what the caller's store knows ------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordFacts:
    """What the store knows about one record: its state and its current content.

    ``content`` is None when the record is forgotten (its keys are gone).
    """

    record_id: str
    lifecycle: LifecycleState
    version: int
    content: RecordContent | None = None


@dataclass(frozen=True, slots=True)
class EpisodeFacts:
    episode_id: str
    conversation_id: str
    text: str
    typed_at: datetime | None = None


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
    """

    space_id: str = ""
    record: RecordFacts | None = None
    episodes: Mapping[str, EpisodeFacts] | None = None
    related: Sequence[RecordFacts] = ()
    children: Mapping[str, Sequence[DerivedItem]] = field(default_factory=dict)
    area_records: Sequence[str] = ()
    known_records: Mapping[str, RecordFacts] = field(default_factory=dict)
    projects: Mapping[str, bool] = field(default_factory=dict)
    artifact_exists: bool = False
    account_key: bytes | None = None


@dataclass(frozen=True, slots=True)
class DerivedItem:
    kind: str  # "record" or "artifact"
    item_id: str


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
)


@dataclass(frozen=True, slots=True)
class Accept:
    effects: tuple[Effect, ...]
    kind: EffectKind
    record_id: str | None = None
    versions: tuple[int, ...] = ()
    affected_records: tuple[str, ...] = ()

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
    for episode_id in sources:
        if check_said(text, [known[episode_id].text]).ok:
            return known[episode_id]
    check = check_said(text, (known[e].text for e in sources))
    return Refuse(RefusalCode.NOT_SAID, f"record {record_id} refused: {check.reason}")


def _relations(
    record_id: str, content: RecordContent, facts: Facts
) -> tuple[tuple[Effect, ...], list[str]]:
    """Flags for records on the same subject: older statements superseded, others conflict."""
    if content.time_kind is TimeKind.ONE_OFF:
        return (), []
    effects: list[Effect] = []
    conflicts: list[str] = []
    for other in facts.related:
        body = other.content
        if (
            other.record_id == record_id
            or body is None
            or other.lifecycle is not LifecycleState.ACTIVE
            or body.time_kind is TimeKind.ONE_OFF
            or not subjects.same_subject(content.text, content.subject, body.text, body.subject)
        ):
            continue
        both_user = (
            content.source_kind is SourceKind.USER_STATEMENT
            and body.source_kind is SourceKind.USER_STATEMENT
            and body.epistemic_state in (EpistemicState.SAID, EpistemicState.VERIFIED)
            and content.epistemic_state is EpistemicState.SAID
        )
        if both_user:
            newer = (
                body.said_at is None or content.said_at is None or content.said_at >= body.said_at
            )
            if newer:
                effects.append(FlagSuperseded(other.record_id, record_id))
            else:
                effects.append(FlagSuperseded(record_id, other.record_id))
        else:
            effects.append(FlagConflict(record_id, other.record_id))
            effects.append(FlagConflict(other.record_id, record_id))
            conflicts.append(other.record_id)
    return tuple(effects), conflicts


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
    relations, conflicts = _relations(op.record_id, content, facts)
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


def _infer(op: Infer, facts: Facts) -> Decision:
    if facts.record is not None:
        if facts.record.lifecycle is LifecycleState.FORGOTTEN:
            return _refuse_forgotten(op.record_id)
        return Refuse(RefusalCode.RECORD_EXISTS, f"record {op.record_id} already exists")
    content = op.content
    external = content.source_kind in (SourceKind.EXTERNAL_CONTENT, SourceKind.IMPORT)
    if external and content.layer is Layer.BEHAVIOUR_RULE:
        return Refuse(
            RefusalCode.NOT_ALLOWED,
            f"record {op.record_id} comes from {content.source_kind.value}; external content "
            "can never become a behaviour rule",
        )
    known = facts.episodes or {}
    missing = [e for e in content.source_episode_ids if e not in known]
    if missing:
        return Refuse(
            RefusalCode.UNKNOWN_EPISODE,
            f"record {op.record_id} names episode(s) {', '.join(missing)} that this space "
            "does not hold",
        )
    problem = _check_parents(op.record_id, content.derived_from, facts)
    if problem is not None:
        return problem
    waits = external or content.layer is Layer.BEHAVIOUR_RULE
    waits = waits or content.sensitivity is not Sensitivity.NORMAL
    lifecycle = LifecycleState.CANDIDATE if waits else LifecycleState.ACTIVE
    content = content.model_copy(
        update={"expected_end": _default_end(content.time_kind, content.expected_end, op.made_at)}
    )
    relations, conflicts = _relations(op.record_id, content, facts)
    if conflicts:
        content = _with_conflicts(content, conflicts)
    create = CreateRecord(op.record_id, 1, lifecycle, content)
    return Accept((create, *relations), EffectKind.CREATED, op.record_id, (1,))


def _existing(record_id: str, facts: Facts) -> Refuse | RecordFacts:
    record = facts.record
    if record is None:
        return Refuse(
            RefusalCode.UNKNOWN_RECORD, f"record {record_id} does not exist in this space"
        )
    if record.lifecycle is LifecycleState.FORGOTTEN or record.content is None:
        return _refuse_forgotten(record_id)
    return record


def _correct(op: Correct, facts: Facts) -> Decision:
    record = _existing(op.record_id, facts)
    if isinstance(record, Refuse):
        return record
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
        }
    )
    lifecycle = (
        LifecycleState.NOT_IN_USE
        if record.lifecycle is LifecycleState.NOT_IN_USE
        else LifecycleState.ACTIVE
    )
    new = record.version + 1
    effect = AddVersion(op.record_id, new, record.version, content, lifecycle)
    return Accept((effect,), EffectKind.CORRECTED, op.record_id, (record.version, new))


def _dont_use(op: DontUse, facts: Facts) -> Decision:
    record = _existing(op.record_id, facts)
    if isinstance(record, Refuse):
        return record
    if record.lifecycle is LifecycleState.NOT_IN_USE:
        return Refuse(RefusalCode.WRONG_STATE, f"record {op.record_id} is already not in use")
    effect = SetLifecycle(op.record_id, LifecycleState.NOT_IN_USE)
    return Accept((effect,), EffectKind.NOT_IN_USE, op.record_id, (record.version,))


def _use_again(op: UseAgain, facts: Facts) -> Decision:
    record = _existing(op.record_id, facts)
    if isinstance(record, Refuse):
        return record
    if record.lifecycle is not LifecycleState.NOT_IN_USE:
        return Refuse(
            RefusalCode.WRONG_STATE,
            f"record {op.record_id} is {record.lifecycle.value}, not 'not in use'",
        )
    effect = SetLifecycle(op.record_id, LifecycleState.ACTIVE)
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
    if op.initiated_by is not Initiator.USER:
        return Refuse(
            RefusalCode.NOT_ALLOWED, f"record {op.record_id}: only the user can confirm a record"
        )
    record = _existing(op.record_id, facts)
    if isinstance(record, Refuse):
        return record
    assert record.content is not None
    if record.lifecycle is not LifecycleState.CANDIDATE:
        return Refuse(
            RefusalCode.WRONG_STATE,
            f"record {op.record_id} is {record.lifecycle.value}; only a candidate is confirmed",
        )
    content = record.content.model_copy(update={"epistemic_state": EpistemicState.VERIFIED})
    new = record.version + 1
    effect = AddVersion(op.record_id, new, record.version, content, LifecycleState.ACTIVE)
    return Accept((effect,), EffectKind.CONFIRMED, op.record_id, (record.version, new))


def _reaffirm(op: Reaffirm, facts: Facts) -> Decision:
    record = _existing(op.record_id, facts)
    if isinstance(record, Refuse):
        return record
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
    new = record.version + 1
    effect = AddVersion(op.record_id, new, record.version, content, record.lifecycle)
    return Accept((effect,), kind, op.record_id, (record.version, new))


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
}
