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
    AnyOperation,
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
    match op.kind:  # the tag, not isinstance: a pydantic isinstance costs ~0.5 µs a case
        case "add_episode":
            return items.add_episode(op, facts)
        case "mark_candidate":
            return items.mark_candidate(op, facts)
        case "end_session":
            return items.end_session(op, facts)
        case "set_project":
            return items.set_project(op, facts)
        case "add_artifact":
            return items.add_artifact(op, facts)
        case "remember":
            return creating.remember(op, facts)
        case "infer":
            return creating.infer(op, facts)
        case "consolidate":
            return creating.consolidate(op, facts)
        case "correct":
            return records.correct(op, facts)
        case "dont_use":
            return records.dont_use(op, facts)
        case "use_again":
            return records.use_again(op, facts)
        case "restrict_usage":
            return records.restrict(op, facts)
        case "confirm":
            return records.confirm(op, facts)
        case "reaffirm":
            return records.reaffirm(op, facts)
        case "corroborate":
            return records.corroborate(op, facts)
        case "revise_rule":
            return records.revise_rule(op, facts)
        case "pass_time":
            return records.pass_time(op, facts)
        case "forget_permanently":
            return forgetting.forget(op, facts)
        case "forget_area":
            return forgetting.forget_area(op, facts)
        case _:
            assert_never(op)
