"""Candidate items: a sentence the device's detector marked becomes a background record
in the user's own words.

Invariants:
- The record's text is the sentence verbatim (``protocol.sentences.split_sentences`` of
  the opened episode, the sentence the mark names), epistemic state *said*, source kind
  ``user_statement``, the episode as its one source and its conversation; the rules
  re-check that it is a whole sentence the user typed there. Everything else (type,
  time, areas, sensitivity) is extracted (``protocol.consolidation.content``).
- The cloud decides from its own reading: the same detector model runs on the opened
  sentence, and the item is dropped (never written) when the model says it is not a
  candidate, when the sentence is a question, when its episode is forgotten or holds
  no such sentence, or when the sentence is already accounted for
  (``protocol.consolidation.accounted``): a record, in any lifecycle state and any of
  its versions, has its words and came from the same episode, or was decided by the
  user after that episode arrived. A record that still holds the words finishes the
  item (an explicit "remember this" came first); one the user corrected or took out
  of use drops it with a reason naming the record. Consolidation never undoes the
  user; a restatement typed after the user's decision is a new statement and is kept.
- The rules decide the lifecycle: a normal-class fact goes active ("recently learned"),
  a sensitive one stays a candidate until the user confirms it.
- One record per candidate: its record id and op id are keyed hashes of the candidate
  (space, episode, sentence), so a retry is a duplicate, never a second record.
"""

from __future__ import annotations

import sys

from cloud.consolidator.plan import BY, Context, Plan
from cloud.store.base import WorkItemRow
from protocol.consolidation import accounted as history
from protocol.consolidation.accounted import Accounted
from protocol.consolidation.content import said_content
from protocol.consolidation.extract import Hints
from protocol.model import SourceKind
from protocol.operations import CandidateRef, Consolidate
from protocol.sentences import is_question, normalise, split_sentences


def plan_candidate(ctx: Context, item: WorkItemRow) -> Plan:
    assert item.sentence is not None
    episode = ctx.episode(item.episode_id)
    if episode is None:
        return Plan.dropped(f"episode {item.episode_id} is forgotten or unknown")
    if episode.source_kind is not SourceKind.USER_STATEMENT:
        return Plan.dropped(
            f"episode {item.episode_id} holds {episode.source_kind.value}, not the user's words"
        )
    sentences = split_sentences(episode.text)
    if item.sentence >= len(sentences):
        return Plan.dropped(
            f"episode {item.episode_id} has {len(sentences)} sentence(s), not #{item.sentence}"
        )
    sentence = sentences[item.sentence]
    if is_question(sentence):
        return Plan.dropped(f"{item.name} is a question")
    detection = ctx.onnx.detect(sentence)
    if not detection.candidate:
        return Plan.dropped(
            f"{item.name}: the cloud's detector ({ctx.onnx.detector.model_id}) says it is "
            f"not a memory candidate (score {detection.score:.2f})"
        )
    found = accounted_for(ctx, item, sentence)
    if found is not None:
        if found.kept:
            return Plan(record_id=found.record_id)
        return Plan.dropped(f"{item.name}: {found.reason}")
    already = _kept_already(ctx, item, sentence)
    if already is not None:
        return Plan(record_id=already)
    said_at = episode.typed_at or item.marked_at
    extraction = ctx.extractor.extract(sentence, said_at=said_at, hints=Hints())
    content = said_content(
        sentence,
        extraction,
        episode_id=item.episode_id,
        conversation_id=episode.conversation_id,
        said_at=said_at,
    )
    record_id = ctx.record_id("candidate", item.episode_id, str(item.sentence))
    op = Consolidate(
        op_id=ctx.op_id("candidate", item.episode_id, str(item.sentence)),
        made_at=ctx.now,
        initiated_by=BY,
        record_id=record_id,
        content=content,
        candidates=[CandidateRef(episode_id=item.episode_id, sentence=item.sentence)],
    )
    return Plan(ops=[op], record_id=record_id)


def accounted_for(ctx: Context, item: WorkItemRow, sentence: str) -> Accounted | None:
    """The record that already accounts for this sentence, in any lifecycle state and any
    version, found through the history index (``protocol.consolidation.accounted``)."""
    keys = history.lookup_keys(item.episode_id, sentence)
    histories = ctx.reader.histories(keys)
    if not histories:
        return None
    arrived = ctx.s.episode_seq(ctx.space_id, item.episode_id)
    candidate = history.CandidateSentence(
        item.episode_id, sentence, sys.maxsize if arrived is None else arrived
    )
    return history.accounted_for(candidate, histories)


def _kept_already(ctx: Context, item: WorkItemRow, sentence: str) -> str | None:
    """A live record of this very sentence from this episode (e.g. "remember this"),
    through the subject index: records written before the history index (migration 13)
    have no history keys."""
    wanted = normalise(sentence)
    for record in ctx.reader.related("", sentence, None):
        content = record.content
        if (
            content is not None
            and item.episode_id in content.source_episode_ids
            and normalise(content.text) == wanted
        ):
            return record.record_id
    return None
