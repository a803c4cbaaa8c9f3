"""Behaviour rules and what the background wrote, read from the records this device
holds: the rules, one rule by id, the words an undo goes back to, what was learned
lately, and what waits for the user's confirmation.

Invariants:
- Reads only: every answer is a filter of ``reading.what_do_you_know``'s views; the
  changes a rule's controls make are ordinary operations (``device.ops``).
- A rule control names a record that is a behaviour rule held here, else
  ``InvalidOperation`` is raised before any operation is built.
- An undo goes back to the newest earlier version whose words differ from the
  current ones; a rule never revised has nothing to go back to (``None``: stop using it).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from device.errors import InvalidOperation
from device.views import RecordView, VersionView
from protocol.model import Layer, LifecycleState


def rules(views: Sequence[RecordView]) -> list[RecordView]:
    """Behaviour rules: proposed (candidate), accepted (active), undone (not in use)."""
    return [v for v in views if v.layer == Layer.BEHAVIOUR_RULE.value]


def rule(views: Sequence[RecordView], record_id: str) -> RecordView:
    for view in rules(views):
        if view.record_id == record_id:
            return view
    raise InvalidOperation(f"record {record_id} is not a behaviour rule held on this device")


def undo_words(view: RecordView, history: Sequence[VersionView]) -> str | None:
    """The words an undo of ``view`` restores, or None (never revised)."""
    written = [v for v in history if v.text is not None]
    previous = [v for v in written if not v.current and v.text != view.text]
    return str(previous[-1].text) if previous else None


def recently_learned(views: Sequence[RecordView], now: datetime, days: int) -> list[RecordView]:
    """Active records the background consolidation wrote in the last ``days`` days."""
    since = now - timedelta(days=days)
    return [
        v
        for v in views
        if v.background
        and v.lifecycle == LifecycleState.ACTIVE.value
        and v.recorded_at is not None
        and datetime.fromisoformat(v.recorded_at) >= since
    ]


def waiting(views: Sequence[RecordView]) -> list[RecordView]:
    """Candidates the user is asked to confirm."""
    return [v for v in views if v.lifecycle == LifecycleState.CANDIDATE.value]
