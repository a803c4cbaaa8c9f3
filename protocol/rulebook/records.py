"""The rules for an op on one existing record: correct, confirm, corroborate, don't use,
use again, restrict, reaffirm, revise a rule, and time passing.

Invariants:
- Every lifecycle move is the table's (``protocol.lifecycle.transition``): the state,
  the op, the initiator and the record's basis give the new state or a named refusal.
- A correction is a new version in the user's own words (checked verbatim), never an
  overwrite; one that raced another device's version is applied and says so.
- Only the user confirms; corroboration needs a second, independent source (another
  origin, not an import, not instruction-shaped); neither makes external content a
  behaviour rule.
"""

from __future__ import annotations

from dataclasses import replace

from protocol import behaviour, provenance
from protocol.instructions import instruction_shape
from protocol.lifecycle import Move, Op, Refusal, basis_of, transition
from protocol.model import (
    EpistemicState,
    Layer,
    LifecycleState,
    Observation,
    SourceKind,
    TimeKind,
    Verification,
    VerifiedBy,
)
from protocol.operations import (
    Confirm,
    Correct,
    Corroborate,
    DontUse,
    EffectKind,
    PassTime,
    Reaffirm,
    RefusalCode,
    RestrictUsage,
    ReviseRule,
    UseAgain,
)
from protocol.rulebook.creating import EXTERNAL_KINDS
from protocol.rulebook.effects import (
    Accept,
    Decision,
    Refuse,
    SetLifecycle,
    SetUsage,
    next_version,
    refuse_forgotten,
)
from protocol.rulebook.facts import Facts, RecordFacts
from protocol.rulebook.saying import provenanced, said_episode, with_context
from protocol.timeline import DEFAULT_FOR_NOW, effective_time_kind


def existing_record(record_id: str, facts: Facts) -> Refuse | RecordFacts:
    record = facts.record
    if record is None:
        return Refuse(
            RefusalCode.UNKNOWN_RECORD, f"record {record_id} does not exist in this space"
        )
    if record.lifecycle is LifecycleState.FORGOTTEN or record.content is None:
        return refuse_forgotten(record_id)
    return record


RecordOp = Confirm | Corroborate | DontUse | UseAgain | Correct | ReviseRule | Reaffirm | PassTime


def lifecycle_move(op: RecordOp, kind: Op, facts: Facts) -> Refuse | tuple[RecordFacts, Move]:
    """The record ``op`` names and the move the lifecycle table allows it, or the
    table's refusal naming the record and the reason."""
    record = facts.record
    if record is None:
        return Refuse(
            RefusalCode.UNKNOWN_RECORD, f"record {op.record_id} does not exist in this space"
        )
    content = None if record.lifecycle is LifecycleState.FORGOTTEN else record.content
    if content is None and record.lifecycle is not LifecycleState.FORGOTTEN:
        return refuse_forgotten(op.record_id)  # its keys are gone
    state = record.lifecycle
    outcome = transition(state, kind, op.initiated_by, basis_of(content))
    if isinstance(outcome, Refusal):
        source = content.source_kind.value if content is not None else ""
        return Refuse(outcome.code, outcome.reason(op.record_id, state, source))
    return record, outcome


def correct(op: Correct, facts: Facts) -> Decision:
    found = lifecycle_move(op, Op.CORRECT, facts)
    if isinstance(found, Refuse):
        return found
    record, move = found
    assert record.content is not None
    said = said_episode(op.record_id, op.text, op.conversation_id, op.source_episode_ids, facts)
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
    content = provenanced(with_context(content, op.conversation_id, facts), facts)
    accepted = next_version(record, content, move.to, EffectKind.CORRECTED)
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


def dont_use(op: DontUse, facts: Facts) -> Decision:
    found = lifecycle_move(op, Op.DONT_USE, facts)
    if isinstance(found, Refuse):
        return found
    record, move = found
    effect = SetLifecycle(op.record_id, move.to)
    return Accept((effect,), EffectKind.NOT_IN_USE, op.record_id, (record.version,))


def use_again(op: UseAgain, facts: Facts) -> Decision:
    """Back to what the record was: a candidate when its content still waits for the
    user (``protocol.lifecycle``), else active."""
    found = lifecycle_move(op, Op.USE_AGAIN, facts)
    if isinstance(found, Refuse):
        return found
    record, move = found
    effect = SetLifecycle(op.record_id, move.to)
    return Accept((effect,), EffectKind.IN_USE_AGAIN, op.record_id, (record.version,))


def restrict(op: RestrictUsage, facts: Facts) -> Decision:
    record = existing_record(op.record_id, facts)
    if isinstance(record, Refuse):
        return record
    project = op.restriction.project if op.restriction else None
    if project is not None and project not in facts.projects:
        return Refuse(RefusalCode.UNKNOWN_PROJECT, f"project {project!r} does not exist")
    kind = EffectKind.USAGE_RESTRICTED if op.restriction else EffectKind.USAGE_UNRESTRICTED
    effect = SetUsage(op.record_id, op.restriction)
    return Accept((effect,), kind, op.record_id, (record.version,))


def confirm(op: Confirm, facts: Facts) -> Decision:
    found = lifecycle_move(op, Op.CONFIRM, facts)
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
    return next_version(record, content, move.to, EffectKind.CONFIRMED)


def reaffirm(op: Reaffirm, facts: Facts) -> Decision:
    found = lifecycle_move(op, Op.REAFFIRM, facts)
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
    return next_version(record, content, move.to, kind)


def revise_rule(op: ReviseRule, facts: Facts) -> Decision:
    found = lifecycle_move(op, Op.REVISE_RULE, facts)
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
    return next_version(record, content, move.to, EffectKind.RULE_REVISED)


def pass_time(op: PassTime, facts: Facts) -> Decision:
    found = lifecycle_move(op, Op.PASS_TIME, facts)
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
    return next_version(record, past, move.to, EffectKind.TIME_PASSED)


def corroborate(op: Corroborate, facts: Facts) -> Decision:
    found = lifecycle_move(op, Op.CORROBORATE, facts)
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
    return next_version(record, updated, move.to, EffectKind.CORROBORATED)
