"""The rules for what is not a record: episodes, candidates and ended conversations,
projects, and artifacts (derived items).

Invariants:
- An episode, a candidate mark and an artifact are written once: a second one with the
  same id is refused.
- A derived item's parents must exist and not be forgotten (``check_parents``).
- Closing a project needs the project; opening one creates or reopens it.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.model import LifecycleState
from protocol.operations import (
    AddArtifact,
    AddEpisode,
    EffectKind,
    EndSession,
    MarkCandidate,
    RefusalCode,
    SetProject,
)
from protocol.rulebook.effects import (
    Accept,
    CreateArtifact,
    CreateCandidate,
    CreateEpisode,
    Decision,
    EndConversation,
    Refuse,
    SetProjectState,
)
from protocol.rulebook.facts import Facts
from protocol.sentences import split_sentences


def add_episode(op: AddEpisode, facts: Facts) -> Decision:
    if facts.episodes and op.episode_id in facts.episodes:
        return Refuse(
            RefusalCode.EPISODE_EXISTS,
            f"episode {op.episode_id} already exists; an episode is written once",
        )
    return Accept((CreateEpisode(op.episode_id, op.conversation_id),), EffectKind.EPISODE_LOGGED)


def set_project(op: SetProject, facts: Facts) -> Decision:
    exists = op.project in facts.projects
    if not op.open and not exists:
        return Refuse(RefusalCode.UNKNOWN_PROJECT, f"project {op.project!r} does not exist")
    kind = EffectKind.PROJECT_OPENED if op.open else EffectKind.PROJECT_CLOSED
    return Accept((SetProjectState(op.project, op.open),), kind)


def add_artifact(op: AddArtifact, facts: Facts) -> Decision:
    if facts.artifact_exists:
        return Refuse(RefusalCode.ARTIFACT_EXISTS, f"artifact {op.artifact_id} already exists")
    problem = check_parents(op.artifact_id, op.derived_from, facts)
    if problem is not None:
        return problem
    effect = CreateArtifact(op.artifact_id, op.artifact_kind, tuple(op.derived_from))
    return Accept((effect,), EffectKind.ARTIFACT_ADDED)


def check_parents(item: str, parents: Sequence[str], facts: Facts) -> Refuse | None:
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


def mark_candidate(op: MarkCandidate, facts: Facts) -> Decision:
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


def end_session(op: EndSession, facts: Facts) -> Decision:
    return Accept((EndConversation(op.conversation_id),), EffectKind.SESSION_ENDED)
