"""The transition rules: one pure function, ``decide``, both device and cloud apply.

``decide`` is one ``match`` over the operations, each sent to the rule of its family in
``protocol/rulebook/``: ``items`` (episodes, candidates, projects, artifacts),
``creating`` (remember, infer, consolidate), ``records`` (every op on one existing
record), ``forgetting``. What the rules read (``rulebook.facts``) and return
(``rulebook.effects``), and the rules' words on "said" and on relations
(``rulebook.saying``), are re-exported here: device, cloud and the reference ledger
import them from this one place.

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
- ``decide`` reads only the facts it is handed and returns effects as data; every
  operation has its case, and a new one fails the type checker (``assert_never``).
"""

from __future__ import annotations

from typing import assert_never

from protocol.operations import (
    AddArtifact,
    AddEpisode,
    AnyOperation,
    Confirm,
    Consolidate,
    Correct,
    Corroborate,
    DontUse,
    EndSession,
    ForgetArea,
    ForgetPermanently,
    Infer,
    MarkCandidate,
    PassTime,
    Reaffirm,
    Remember,
    RestrictUsage,
    ReviseRule,
    SetProject,
    UseAgain,
)
from protocol.rulebook import creating, forgetting, items, records
from protocol.rulebook.creating import EXTERNAL_KINDS, RULE_SOURCES
from protocol.rulebook.effects import (
    Accept,
    AddVersion,
    CreateArtifact,
    CreateCandidate,
    CreateEpisode,
    CreateRecord,
    Decision,
    Effect,
    EndConversation,
    FlagConflict,
    FlagSuperseded,
    ForgetRecords,
    Refuse,
    ResolveCandidates,
    SetLifecycle,
    SetProjectState,
    SetUsage,
)
from protocol.rulebook.facts import (
    DerivedItem,
    EpisodeFacts,
    Facts,
    RecordFacts,
    episodes_named,
    parents_named,
)
from protocol.rulebook.forgetting import derivation_closure
from protocol.rulebook.saying import (
    CONTEXT_REACH,
    context_episodes,
    related_keys,
    related_text,
    statement_context,
)

__all__ = [
    "CONTEXT_REACH",
    "EXTERNAL_KINDS",
    "RULE_SOURCES",
    "Accept",
    "AddVersion",
    "CreateArtifact",
    "CreateCandidate",
    "CreateEpisode",
    "CreateRecord",
    "Decision",
    "DerivedItem",
    "Effect",
    "EndConversation",
    "EpisodeFacts",
    "Facts",
    "FlagConflict",
    "FlagSuperseded",
    "ForgetRecords",
    "RecordFacts",
    "Refuse",
    "ResolveCandidates",
    "SetLifecycle",
    "SetProjectState",
    "SetUsage",
    "context_episodes",
    "decide",
    "derivation_closure",
    "episodes_named",
    "parents_named",
    "related_keys",
    "related_text",
    "statement_context",
]


def decide(op: AnyOperation, facts: Facts) -> Decision:
    """Decide what ``op`` does given ``facts``; never raises for a well-formed op."""
    match op:
        case AddEpisode():
            return items.add_episode(op, facts)
        case MarkCandidate():
            return items.mark_candidate(op, facts)
        case EndSession():
            return items.end_session(op, facts)
        case SetProject():
            return items.set_project(op, facts)
        case AddArtifact():
            return items.add_artifact(op, facts)
        case Remember():
            return creating.remember(op, facts)
        case Infer():
            return creating.infer(op, facts)
        case Consolidate():
            return creating.consolidate(op, facts)
        case Correct():
            return records.correct(op, facts)
        case DontUse():
            return records.dont_use(op, facts)
        case UseAgain():
            return records.use_again(op, facts)
        case RestrictUsage():
            return records.restrict(op, facts)
        case Confirm():
            return records.confirm(op, facts)
        case Reaffirm():
            return records.reaffirm(op, facts)
        case Corroborate():
            return records.corroborate(op, facts)
        case ReviseRule():
            return records.revise_rule(op, facts)
        case PassTime():
            return records.pass_time(op, facts)
        case ForgetPermanently():
            return forgetting.forget(op, facts)
        case ForgetArea():
            return forgetting.forget_area(op, facts)
        case _:
            assert_never(op)
