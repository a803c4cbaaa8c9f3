"""The rules for a new record: the user's explicit remember, the assistant's inference,
and background consolidation.

Invariants:
- ``remember`` makes a said record only from a whole sentence the user typed
  (``saying.said_episode``); background consolidation passes the same verbatim check
  for every said record it writes.
- Anything from external content or an import (its own source kind, a source
  episode's, or a parent record's) stays a candidate and can never become a behaviour
  rule, a preference or the user's words; sensitive classes and behaviour rules wait
  for the user's confirmation (``background_lifecycle``).
- A behaviour rule rests on the user's own words or behaviour and is never authority
  (``protocol.behaviour``).
- The consolidator refreshes only a record it derived itself, and a refresh never
  takes away what the record waits for (``still_waiting``).
"""

from __future__ import annotations

from typing import Any

from protocol import behaviour
from protocol.model import (
    ContentType,
    EpistemicState,
    Initiator,
    Layer,
    LifecycleState,
    RecordContent,
    Sensitivity,
    SourceKind,
)
from protocol.operations import Consolidate, EffectKind, Infer, RefusalCode, Remember
from protocol.rulebook.effects import (
    Accept,
    AddVersion,
    CreateRecord,
    Decision,
    Refuse,
    ResolveCandidates,
    refuse_forgotten,
)
from protocol.rulebook.facts import Facts
from protocol.rulebook.items import check_parents
from protocol.rulebook.saying import (
    default_end,
    provenanced,
    relations_to_kept,
    said_episode,
    with_conflicts,
    with_context,
)


def remember(op: Remember, facts: Facts) -> Decision:
    if facts.record is not None:
        if facts.record.lifecycle is LifecycleState.FORGOTTEN:
            return refuse_forgotten(op.record_id)
        return Refuse(
            RefusalCode.RECORD_EXISTS,
            f"record {op.record_id} already exists (v{facts.record.version}); "
            "a new record needs a new id",
        )
    said = said_episode(op.record_id, op.text, op.conversation_id, op.source_episode_ids, facts)
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
        expected_end=default_end(op.time_kind, op.expected_end, op.made_at),
        source_episode_ids=list(op.source_episode_ids),
        source_kind=SourceKind.USER_STATEMENT,
        life_areas=list(op.life_areas),
        project=op.project,
        sensitivity=op.sensitivity,
        conversation_id=op.conversation_id,
        subject=op.subject,
        said_at=said.typed_at or op.made_at,
    )
    content = provenanced(with_context(content, op.conversation_id, facts), facts)
    relations, conflicts, content = relations_to_kept(op.record_id, content, facts, op.made_at)
    if conflicts:
        content = with_conflicts(content, conflicts)
    create = CreateRecord(op.record_id, 1, LifecycleState.ACTIVE, content)
    return Accept((create, *relations), EffectKind.CREATED, op.record_id, (1,))


# What stays a candidate and is never authority: a page, email, document, calendar
# invite, another agent or tool output, and an import. A connected source (the user's
# own calendar, say) is not external content: its records can be active and conflict
# with what the user said; but no behaviour rule ever rests on it (``RULE_SOURCES``).
EXTERNAL_KINDS = (SourceKind.EXTERNAL_CONTENT, SourceKind.IMPORT)

RULE_SOURCES = (SourceKind.USER_STATEMENT, SourceKind.USER_BEHAVIOUR)


def external_origin(content: RecordContent, facts: Facts) -> str | None:
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


def background_problem(record_id: str, content: RecordContent, facts: Facts) -> Refuse | None:
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
    problem = check_parents(record_id, content.derived_from, facts)
    if problem is not None:
        return problem
    external = external_origin(content, facts)
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


def background_lifecycle(content: RecordContent, facts: Facts) -> LifecycleState:
    """Normal-class facts go live; sensitive classes, behaviour rules, external content
    and imports wait for the user's confirmation."""
    waits = external_origin(content, facts) is not None
    waits = waits or content.layer is Layer.BEHAVIOUR_RULE
    waits = waits or content.sensitivity is not Sensitivity.NORMAL
    return LifecycleState.CANDIDATE if waits else LifecycleState.ACTIVE


def infer(op: Infer, facts: Facts) -> Decision:
    if facts.record is not None:
        if facts.record.lifecycle is LifecycleState.FORGOTTEN:
            return refuse_forgotten(op.record_id)
        return Refuse(RefusalCode.RECORD_EXISTS, f"record {op.record_id} already exists")
    content = op.content
    problem = background_problem(op.record_id, content, facts)
    if problem is not None:
        return problem
    lifecycle = background_lifecycle(content, facts)
    content = content.model_copy(
        update={"expected_end": default_end(content.time_kind, content.expected_end, op.made_at)}
    )
    content = provenanced(with_context(content, content.conversation_id, facts), facts)
    relations, conflicts, content = relations_to_kept(op.record_id, content, facts, op.made_at)
    if conflicts:
        content = with_conflicts(content, conflicts)
    create = CreateRecord(op.record_id, 1, lifecycle, content)
    return Accept((create, *relations), EffectKind.CREATED, op.record_id, (1,))


def consolidate(op: Consolidate, facts: Facts) -> Decision:
    if op.initiated_by is not Initiator.ASSISTANT:
        return Refuse(
            RefusalCode.NOT_ALLOWED,
            f"record {op.record_id}: consolidation is the assistant's background work; "
            "the user keeps a sentence with remember",
        )
    content = op.content.model_copy(update={"background": True})
    problem = background_problem(op.record_id, content, facts)
    if problem is not None:
        return problem
    if content.epistemic_state is EpistemicState.SAID:
        if content.conversation_id is None:
            return Refuse(
                RefusalCode.NOT_SAID,
                f"record {op.record_id} refused: a said record names the conversation "
                "it was typed in",
            )
        said = said_episode(
            op.record_id,
            content.text,
            content.conversation_id,
            content.source_episode_ids,
            facts,
        )
        if isinstance(said, Refuse):
            return said
        content = content.model_copy(update={"said_at": said.typed_at or op.made_at})
    content = provenanced(with_context(content, content.conversation_id, facts), facts)
    content = content.model_copy(
        update={"expected_end": default_end(content.time_kind, content.expected_end, op.made_at)}
    )
    resolve = ResolveCandidates(tuple(op.candidates), op.record_id)
    existing = facts.record
    if existing is not None:
        if existing.lifecycle is LifecycleState.FORGOTTEN:
            return refuse_forgotten(op.record_id)
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
        content = provenanced(still_waiting(existing.content, content), facts)
        lifecycle = (
            existing.lifecycle
            if existing.lifecycle is not LifecycleState.ACTIVE
            else background_lifecycle(content, facts)
        )
        new = existing.next_version
        refresh = AddVersion(op.record_id, new, existing.version, content, lifecycle)
        return Accept(
            (refresh, resolve), EffectKind.REFRESHED, op.record_id, (existing.version, new)
        )
    lifecycle = background_lifecycle(content, facts)
    relations, conflicts, content = relations_to_kept(op.record_id, content, facts, op.made_at)
    if conflicts:
        content = with_conflicts(content, conflicts)
    create = CreateRecord(op.record_id, 1, lifecycle, content)
    return Accept((create, *relations, resolve), EffectKind.LEARNED, op.record_id, (1,))


def still_waiting(held: RecordContent, refreshed: RecordContent) -> RecordContent:
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
