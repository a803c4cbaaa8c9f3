"""Candidate items: a sentence the device's detector marked becomes a background record
in the user's own words.

Invariants:
- The record's text is the sentence verbatim (``protocol.sentences.split_sentences`` of
  the opened episode, the sentence the mark names), epistemic state *said*, source kind
  ``user_statement``, the episode as its one source and its conversation; the rules
  re-check that it is a whole sentence the user typed there. Everything else (type,
  time, areas, sensitivity) is extracted (``protocol.consolidation.content``).
- The cloud decides candidacy from its own reading: the same detector model runs on the opened
  sentence, and the item is dropped (never written) when the model says it is not a
  candidate, when the sentence is a question, when its episode is forgotten or holds
  no such sentence, or when the sentence is already accounted for
  (``protocol.consolidation.accounted``): a record, in any lifecycle state and any of
  its versions, has its words and came from the same episode, or was decided by the
  user after that episode arrived. A record that still holds the words finishes the
  item (an explicit "remember this" came first); one the user corrected or took out
  of use drops it with a reason naming the record. Consolidation never undoes the
  user; a restatement typed after the user's decision is a new statement and is kept.
- Sensitivity is the device's or the cloud's: the device's label (sealed with the item,
  ``hints``) is the extraction's hint, and the chain (the detector, the device lexicon,
  the embedding classifier, the broader lexicon) can only raise it.
- The rules decide the lifecycle: a normal-class fact goes active ("recently learned"),
  a sensitive one stays a candidate until the user confirms it.
- One record per candidate: its record id and op id are keyed hashes of the candidate
  (space, episode, sentence), so a retry is a duplicate, never a second record.
"""

from __future__ import annotations

import sys

from cloud.consolidator.hints import open_hint
from cloud.consolidator.plan import BY, Context, Plan
from cloud.store.base import WorkItemRow
from protocol import statements
from protocol.consolidation import accounted as history
from protocol.consolidation.accounted import Accounted
from protocol.consolidation.content import said_content
from protocol.consolidation.extract import Hints
from protocol.detection import follow_up
from protocol.model import SourceKind
from protocol.operations import CandidateRef, Consolidate
from protocol.rules import EpisodeFacts, context_episodes
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
    earlier = _earlier(ctx, item, episode, sentences)
    detection = ctx.onnx.detect(sentence)
    said_before = [
        *(s for _e, f in earlier for s in split_sentences(f.text)),
        *sentences[: item.sentence],
    ]
    if not detection.candidate and not follow_up.is_correction(sentence, said_before):
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
    # the device's class is a hint the chain can only raise: sensitive if either says so
    device = open_hint(ctx.vault, ctx.s, ctx.space_id, item.episode_id, item.sentence)
    extraction = ctx.extractor.extract(sentence, said_at=said_at, hints=Hints(sensitivity=device))
    content = said_content(
        sentence,
        extraction,
        episode_id=item.episode_id,
        conversation_id=episode.conversation_id,
        said_at=said_at,
    )
    held = [*earlier, (item.episode_id, episode)]
    context = context_episodes(sentence, held, item.episode_id)
    if context:
        # the sentences that may give it its subject: the rules find its context there
        content = content.model_copy(update={"source_episode_ids": [*context, item.episode_id]})
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


def _earlier(
    ctx: Context, item: WorkItemRow, episode: EpisodeFacts, sentences: list[str]
) -> list[tuple[str, EpisodeFacts]]:
    """The conversation's earlier episodes the user typed (oldest first), read only when
    the sentence could need them: a correction, or a sentence with no subject of its
    own whose own episode holds too few sentences before it."""
    index = item.sentence
    assert index is not None
    sentence = sentences[index]
    if not (follow_up.correction_cued(sentence) or statements.needs_context(sentence)):
        return []
    if index >= follow_up.CONTEXT_REACH:
        return []
    token = item.conversation_token
    ids = [
        e
        for e in ctx.s.conversation_episodes(
            ctx.space_id, token, item.marked_at, follow_up.CONTEXT_REACH + 1
        )
        if e != item.episode_id
    ]
    opened = ctx.episodes(ids)
    earlier = [
        (e, f)
        for e in ids
        if (f := opened.get(e)) is not None
        and f.source_kind is SourceKind.USER_STATEMENT
        and f.conversation_id == episode.conversation_id
        and (f.typed_at is None or episode.typed_at is None or f.typed_at <= episode.typed_at)
    ]
    earlier.sort(key=lambda pair: (pair[1].typed_at is not None, pair[1].typed_at, pair[0]))
    return earlier


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
