"""The daily time job: records whose date has passed become things of the past.

Invariants:
- A live record whose stored time kind is not ``past`` but whose effective time kind
  now is (``protocol.timeline.effective_time_kind``: its valid time ended, or a one-off
  or event's day went by) gets a ``PassTime`` op; the rules write the new version (the
  words are unchanged). Its op id is keyed by (record, current version), so a second
  run, or a retry, writes nothing new.
- "For now" records whose "Still doing this?" question is due
  (``protocol.timeline.question_due``) and stale ones (``is_stale``) are only counted:
  the device asks the question, and decay is computed at read time by
  ``protocol.timeline.priority``. The job never rewrites a priority and never deletes.
- One space per transaction, under its lock (``CloudService.apply_system``); the
  records are re-read inside it, so a record forgotten meanwhile is not touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cloud.consolidator.plan import BY, Context
from protocol.model import LifecycleState, TimeKind
from protocol.operations import PassTime
from protocol.timeline import effective_time_kind, is_stale, question_due


@dataclass
class TimeReport:
    passed: list[str] = field(default_factory=list)  # record ids given PassTime
    questions_due: int = 0
    stale: int = 0


def plan_time(ctx: Context, report: TimeReport) -> list[PassTime]:
    """The ``PassTime`` ops one space needs now; counts due questions into ``report``."""
    ops: list[PassTime] = []
    for row in ctx.s.live_records(ctx.space_id):
        if row.lifecycle == LifecycleState.FORGOTTEN.value:
            continue
        content = ctx.reader.content(row)
        if content is None:
            continue
        if content.time_kind is TimeKind.FOR_NOW:
            report.questions_due += question_due(content, row.created_at, ctx.now)
            report.stale += is_stale(content, row.created_at, ctx.now)
        if (
            content.time_kind is not TimeKind.PAST
            and effective_time_kind(content, ctx.now) is TimeKind.PAST
        ):
            ops.append(
                PassTime(
                    op_id=ctx.op_id("pass_time", row.record_id, str(row.current_version)),
                    made_at=ctx.now,
                    initiated_by=BY,
                    record_id=row.record_id,
                )
            )
    return ops
