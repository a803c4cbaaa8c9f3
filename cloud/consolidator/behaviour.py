"""Behaviour items: logged behaviour events ("coffee order: americano") merged into what
was observed, what it suggests, and (for the assistant's own conduct) a proposed rule.

Invariants:
- A behaviour episode's text is ``observations.event_text(subject, value)``; one that
  does not parse is dropped. The events of the item's subject are gathered from the
  space's behaviour work items (the newest ``SCAN`` of them, waiting or done, whose
  episodes still open: a forgotten event counts no more) and summarised over the last
  ``WINDOW`` (``protocol.consolidation.observations.summarise``).
- The *observed* record ("14 of the last 17 coffee orders were americano.") carries
  the evidence itself (``Evidence.count``/``ratio`` are computed from it); it has one
  keyed id per subject and each later run with other events refreshes it as a new
  version. For an inferred or hypothesis reading a *derived* record ("Usually chooses
  americano for coffee order.") is written with ``derived_from`` the observed record
  and the reading's ``alternatives``: forgetting the observation forgets the inference.
  Confidence is never stored: ``protocol.confidence`` computes it at read time.
- The two records are kept under different explicit subjects (the derived one under
  the subject, the observation under "<subject> (observed)"), so an inference never
  reads as a conflict with its own evidence.
- A behaviour rule is only proposed from an *inferred* reading of a subject about the
  assistant's own conduct (``protocol.behaviour.is_assistant_aspect``), with the text
  ``rule_text(subject, value)``, derived from the inferred record, and only if
  ``rule_problem`` finds nothing wrong with it; the rules keep it a candidate until the
  user accepts it. It is proposed once per subject.
- A record the user confirmed (verified) or forgot is not rewritten; the op ids of a
  summary are keyed by the subject and the exact set of events it read, so the same
  run again is a duplicate.
"""

from __future__ import annotations

import hashlib

from cloud.consolidator.plan import BY, Context, Plan
from cloud.store.base import WorkItemRow
from protocol import behaviour
from protocol.consolidation.observations import (
    ObservedEvent,
    Reading,
    Summary,
    normalise,
    parse_event,
    summarise,
)
from protocol.model import EpistemicState, Layer, LifecycleState, RecordContent
from protocol.operations import AnyOperation, Consolidate
from protocol.rules import RecordFacts

WINDOW = 20  # events a summary reads ("14 of the last 17")
SCAN = 2_000  # newest behaviour items of a space looked at for one subject
SUBJECT_CHARS = 200


def plan_behaviour(ctx: Context, item: WorkItemRow) -> Plan:
    episode = ctx.episode(item.episode_id)
    if episode is None:
        return Plan.dropped(f"episode {item.episode_id} is forgotten or unknown")
    event = parse_event(episode.text)
    if event is None:
        return Plan.dropped(f"episode {item.episode_id} is not a behaviour event")
    subject = normalise(event.subject)
    events, waiting = _events(ctx, subject)
    summaries = summarise(events, window=WINDOW, now=ctx.now)
    if not summaries:
        return Plan.dropped(f"{item.name}: no readable events for its subject")
    summary = summaries[0]
    observed_id = ctx.record_id("observed", subject)
    finishes = [key for key in waiting if key != item.key]
    observed = ctx.record(observed_id)
    if _untouchable(observed):
        return Plan(finishes=finishes, record_id=observed_id)
    digest = hashlib.blake2b(
        "|".join(sorted(summary.episode_ids)).encode(), digest_size=12
    ).hexdigest()
    ops: list[AnyOperation] = [
        Consolidate(
            op_id=ctx.op_id("observed", subject, digest),
            made_at=ctx.now,
            initiated_by=BY,
            record_id=observed_id,
            content=_observed(summary),
        )
    ]
    if summary.reading is not Reading.OBSERVED_ONLY:
        inferred_id = ctx.record_id("inferred", subject)
        if not _untouchable(ctx.record(inferred_id)):
            ops.append(
                Consolidate(
                    op_id=ctx.op_id("inferred", subject, digest),
                    made_at=ctx.now,
                    initiated_by=BY,
                    record_id=inferred_id,
                    content=summary.content().model_copy(
                        update={"derived_from": [observed_id], "background": True}
                    ),
                )
            )
            rule = _rule(ctx, summary, subject, inferred_id)
            if rule is not None:
                ops.append(rule)
    return Plan(ops=ops, finishes=finishes, record_id=observed_id)


def _events(ctx: Context, subject: str) -> tuple[list[ObservedEvent], list[tuple[str, int | None]]]:
    """The subject's readable events, and the keys of its items still waiting."""
    items = ctx.s.work_items(ctx.space_id, "behaviour", ("waiting", "done"), SCAN)
    opened = ctx.episodes(i.episode_id for i in items)
    events: list[ObservedEvent] = []
    waiting: list[tuple[str, int | None]] = []
    for it in items:
        episode = opened.get(it.episode_id)
        parsed = parse_event(episode.text) if episode is not None else None
        if episode is None or parsed is None or normalise(parsed.subject) != subject:
            continue
        events.append(
            ObservedEvent(
                episode_id=it.episode_id,
                subject=parsed.subject,
                value=parsed.value,
                at=episode.typed_at or it.marked_at,
                source_id=episode.source_id or it.episode_id,
            )
        )
        if it.state == "waiting":
            waiting.append((it.episode_id, None))
    return events, waiting


def _untouchable(record: RecordFacts | None) -> bool:
    """Forgotten (a skeleton: the subject is never learned again) or confirmed by the
    user (verified: the user's word stands, no refresh rewrites it)."""
    if record is None:
        return False
    if record.lifecycle is LifecycleState.FORGOTTEN or record.content is None:
        return True
    return record.content.epistemic_state in (EpistemicState.VERIFIED, EpistemicState.INVALID)


def _observed(summary: Summary) -> RecordContent:
    """What was seen: the counts and the evidence, nothing inferred."""
    reading = summary.content()
    return reading.model_copy(
        update={
            "text": summary.observed_text,
            "epistemic_state": EpistemicState.OBSERVED,
            "layer": Layer.EVENT,
            "alternatives": [],
            "subject": f"{summary.subject} (observed)"[:SUBJECT_CHARS],
            "background": True,
        }
    )


def _rule(ctx: Context, summary: Summary, subject: str, inferred_id: str) -> Consolidate | None:
    if summary.reading is not Reading.INFERRED or not behaviour.is_assistant_aspect(subject):
        return None
    text = behaviour.rule_text(summary.subject, summary.top_value)
    if behaviour.rule_problem(text) is not None:
        return None
    rule_id = ctx.record_id("rule", subject)
    if ctx.record(rule_id) is not None:  # proposed once; the user decides, not a refresh
        return None
    inferred = summary.content()
    content = inferred.model_copy(
        update={
            "text": text,
            "layer": Layer.BEHAVIOUR_RULE,
            "epistemic_state": EpistemicState.INFERRED,
            "alternatives": [],
            "derived_from": [inferred_id],
            "subject": f"{summary.subject} (rule)"[:SUBJECT_CHARS],
            "background": True,
        }
    )
    return Consolidate(
        op_id=ctx.op_id("rule", subject), made_at=ctx.now, initiated_by=BY,
        record_id=rule_id, content=content,
    )  # fmt: skip
