"""The user's words in the rules: the verbatim check behind "said", the context
sentence a statement with no subject of its own takes, who produced the words, and how
a new statement relates to the records the user already has.

Invariants:
- Only a whole sentence the user typed, in that conversation, in an episode of the
  user's own typing, is "said" (``said_episode``); the check reads the episode facts,
  never the op's claim.
- A context sentence is the nearest earlier framed, non-question sentence of the same
  conversation among the op's sources, at most ``CONTEXT_REACH`` sentences back, else
  the sentence just before it (no question, a subject of its own).
- Provenance is established here, whatever the op claimed (``protocol.provenance``).
- A newer said statement on the same subject supersedes the older (flagged, not
  lost); a statement from another kind of source is a conflict (both flagged); a
  one-off is an exception and touches neither (``protocol.relating`` decides).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, assert_never

from protocol import provenance, relating, statements, subjects
from protocol.model import (
    EpistemicState,
    LifecycleState,
    RecordContent,
    RelationNote,
    SourceKind,
    StatementRelation,
    TimeKind,
)
from protocol.operations import AnyOperation, Consolidate, Infer, RefusalCode, Remember
from protocol.rulebook.effects import Effect, FlagConflict, FlagSuperseded, Refuse
from protocol.rulebook.facts import EpisodeFacts, Facts
from protocol.sentences import check_said, is_question, normalise, split_sentences
from protocol.timeline import DEFAULT_FOR_NOW


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


def said_episode(
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
    question (at most ``CONTEXT_REACH`` sentences back); failing that, the sentence
    just before it when that one is no question and has a subject of its own. None
    when it needs none or none is there."""
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
    before = said[max(0, at - CONTEXT_REACH) : max(at, 0)]
    for sentence, typed_at in reversed(before):
        if not is_question(sentence) and statements.parse(sentence).framed:
            return sentence, typed_at
    # none has a frame: the sentence just before it, if it states something ("The party
    # starts at seven. Actually, it's at eight now."); the follow-up is then about that
    # sentence alone (``protocol.relating``)
    if at > 0 and before:
        sentence, typed_at = before[-1]
        if not is_question(sentence) and not statements.needs_context(sentence):
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


def with_context(
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
    parents = [] if text is None else records_saying(text, facts)
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


def records_saying(text: str, facts: Facts) -> list[str]:
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


def provenanced(content: RecordContent, facts: Facts) -> RecordContent:
    """``content`` with the provenance the rules establish (whatever the op claimed):
    the user's only for a said record whose words ``said_episode`` checked verbatim."""
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


def statement_of_record(content: RecordContent) -> statements.Statement:
    """A record's statement; an explicit subject key is its holder and attribute."""
    read = relating.statement_of(content.text, content.context_text)
    if content.subject:
        return replace(read, holder="subject", attribute=content.subject.casefold().strip())
    return read


def relations_to_kept(
    record_id: str, content: RecordContent, facts: Facts, made_at: datetime
) -> tuple[tuple[Effect, ...], list[str], RecordContent]:
    """How the new record relates to each active record that may share its subject
    (``protocol.relating``): a correction supersedes the older statement, a conflict
    flags both, an addition or exception leaves both current. Each decision and its
    evidence is noted on the new record; returns the effects, the conflicting ids and
    the content with its notes."""
    new = statement_of_record(content)
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
            statement_of_record(body),
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


def default_end(kind: TimeKind, given: datetime | None, now: datetime) -> datetime | None:
    if kind is not TimeKind.FOR_NOW:
        return given
    return given or now + DEFAULT_FOR_NOW


def with_conflicts(content: RecordContent, conflicts: Sequence[str]) -> RecordContent:
    evidence = content.evidence.model_copy(
        update={"conflicting_records": sorted({*content.evidence.conflicting_records, *conflicts})}
    )
    return content.model_copy(update={"evidence": evidence})
