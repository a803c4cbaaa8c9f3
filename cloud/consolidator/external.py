"""External items: what a web page, an email, a document, another agent or a connected
source said becomes candidate claims, never the user's words and never authority.

Invariants:
- Each declarative sentence of the episode (questions skipped, at most
  ``MAX_CLAIMS``) is one claim: source kind ``external_content`` (a connected source's
  claims too, so they stay candidates), epistemic state *observed*, evidence one
  ``Observation`` of the episode's source, layer ``consolidated_fact``. It is never a
  behaviour rule, and a ``preference`` reading becomes ``personal_fact``: a source
  cannot say what the user prefers. The rules keep it a candidate.
- A claim's record id is a keyed hash of (space, the normalised sentence)
  (``tokens.claim_record_id``), so the same claim from anywhere lands on one record:
  from a second, different source the record is corroborated (``Corroborate``: the
  rules make it active and verified); from the same source again the rules refuse it
  ("same source counts once") and it stays a candidate. An instruction-shaped claim
  (``protocol.instructions``: payments, accounts, credentials, imperatives, always/never
  rules) is never corroborated: only the user's confirmation makes it active. A claim
  already active is left alone; a forgotten claim's id is a skeleton, so the claim is
  never written again.
- Op ids are keyed per (episode, claim): re-planning the same item gives the same ids.
"""

from __future__ import annotations

from cloud.consolidator.plan import BY, Context, Plan
from cloud.consolidator.tokens import claim_key, claim_record_id
from cloud.store.base import WorkItemRow
from protocol.consolidation.extract import Hints
from protocol.instructions import instruction_shape
from protocol.model import (
    ContentType,
    EpistemicState,
    Evidence,
    Layer,
    LifecycleState,
    Observation,
    RecordContent,
    SourceKind,
)
from protocol.operations import AnyOperation, Consolidate, Corroborate
from protocol.rules import EXTERNAL_KINDS, EpisodeFacts
from protocol.sentences import is_question, split_sentences
from protocol.subjects import words

MAX_CLAIMS = 20
MIN_WORDS = 3  # "Hi there." or "Best, Ana" is not a claim
SOURCE_ID_CHARS = 128  # Observation.source_id


def claims_of(text: str) -> list[str]:
    """The declarative sentences of an external text that may be claims, in order,
    each claim once."""
    seen: set[str] = set()
    out: list[str] = []
    for sentence in split_sentences(text):
        key = claim_key(sentence)
        if is_question(sentence) or len(words(sentence)) < MIN_WORDS or key in seen:
            continue
        seen.add(key)
        out.append(sentence)
        if len(out) == MAX_CLAIMS:
            break
    return out


def plan_external(ctx: Context, item: WorkItemRow) -> Plan:
    episode = ctx.episode(item.episode_id)
    if episode is None:
        return Plan.dropped(f"episode {item.episode_id} is forgotten or unknown")
    if episode.source_kind not in (SourceKind.EXTERNAL_CONTENT, SourceKind.CONNECTED_SOURCE):
        return Plan.dropped(
            f"episode {item.episode_id} holds {episode.source_kind.value}, not external content"
        )
    ops: list[AnyOperation] = []
    first: str | None = None
    for index, sentence in enumerate(claims_of(episode.text)):
        op = _claim(ctx, item, episode, index, sentence)
        if op is not None:
            ops.append(op)
            first = first or op.record_id
    if not ops:
        return Plan(record_id=None)
    return Plan(ops=ops, record_id=first)


def _claim(
    ctx: Context, item: WorkItemRow, episode: EpisodeFacts, index: int, sentence: str
) -> Consolidate | Corroborate | None:
    record_id = claim_record_id(ctx.vault, ctx.space_id, sentence)
    op_id = ctx.op_id("external", item.episode_id, str(index))
    existing = ctx.record(record_id)
    if existing is None:
        return Consolidate(
            op_id=op_id,
            made_at=ctx.now,
            initiated_by=BY,
            record_id=record_id,
            content=_content(ctx, item, episode, sentence),
        )
    content = existing.content
    if (
        existing.lifecycle is LifecycleState.CANDIDATE
        and content is not None
        and content.source_kind in EXTERNAL_KINDS
        and instruction_shape(sentence) is None  # only the user makes an instruction true
    ):
        # a second piece of evidence: the rules count it only from a different source
        return Corroborate(
            op_id=op_id, made_at=ctx.now, initiated_by=BY, record_id=record_id,
            episode_id=item.episode_id,
        )  # fmt: skip
    return None  # active already, not in use, forgotten (a skeleton), or not a claim


def _content(
    ctx: Context, item: WorkItemRow, episode: EpisodeFacts, sentence: str
) -> RecordContent:
    seen_at = episode.typed_at or item.marked_at
    extraction = ctx.extractor.extract(sentence, said_at=seen_at, hints=Hints())
    content_type = extraction.content_type
    if content_type is ContentType.PREFERENCE:  # a source cannot say what the user prefers
        content_type = ContentType.PERSONAL_FACT
    time = extraction.time
    source = (episode.source_id or item.episode_id)[:SOURCE_ID_CHARS]
    return RecordContent(
        text=sentence,
        content_type=content_type,
        epistemic_state=EpistemicState.OBSERVED,
        layer=Layer.CONSOLIDATED_FACT,
        time_kind=time.time_kind,
        valid_from=time.valid_from,
        valid_until=time.valid_until,
        expected_end=time.expected_end,
        source_episode_ids=[item.episode_id],
        source_kind=SourceKind.EXTERNAL_CONTENT,
        evidence=Evidence(
            observations=[
                Observation(source_id=source, source_kind=episode.source_kind, at=seen_at)
            ]
        ),
        life_areas=list(extraction.life_areas),
        sensitivity=extraction.sensitivity,
        background=True,
    )
