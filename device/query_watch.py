"""A watched query: a recall that re-runs when records change, and says when it differs.

Invariants:
- The query runs once at the start and its answer is always called back; after that
  it re-runs once per committed transaction that changed any record on this device
  (the simplest correct rule: a change to any record may add a hit, drop one or
  reorder them), and calls back only when the answer differs from the last one told.
- "Differs" is what an app shows: the hits in order, with their lines, states and
  flags; scores alone moving is not a new answer.
- A forgotten, evicted or no-longer-usable record drops out because the re-run is a
  real recall: it re-checks every hit against the record's authoritative state.
- Re-runs and call-backs are serialised (one lock per watch), in the committing thread;
  a callback that raises is logged and the watch goes on (``device.changes``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from device.changes import ChangeHub, RecordEvent
from device.views import RecallHit

log = logging.getLogger(__name__)

Answer = list[RecallHit]
_Key = tuple[tuple[object, ...], ...]


def answer_key(hits: Sequence[RecallHit]) -> _Key:
    """What of an answer an app shows (the order included), scores left out."""
    return tuple(
        (
            h.record_id,
            h.line,
            h.text,
            h.epistemic_state,
            h.content_type,
            h.confidence,
            h.conflict,
            h.outdated,
            h.current,
            h.from_cloud,
            h.pulled_in_by,
            h.relation,
        )
        for h in hits
    )


class QueryWatch:
    """What ``DeviceAgent.watch_query`` returns: ``results`` is the last answer told;
    ``cancel()`` (or leaving its ``with`` block) stops the watch."""

    def __init__(
        self,
        hub: ChangeHub,
        run: Callable[[], Answer],
        told: Callable[[Answer], None],
        callback: Callable[[Answer], None],
    ) -> None:
        self._run = run
        self._told = told  # the agent counts a told answer's records as used
        self._callback = callback
        self._lock = threading.Lock()
        self._last: _Key | None = None
        self.results: Answer = []
        self.runs = 0  # how many times the query ran (the first run included)
        self._subscription = hub.add(self._changed)
        try:
            self.refresh()
        except BaseException:
            self._subscription.cancel()
            raise

    def _changed(self, events: list[RecordEvent]) -> None:
        if events:
            self.refresh()

    def refresh(self) -> bool:
        """Run the query now; call back if the answer differs. Returns whether it did."""
        with self._lock:
            hits = self._run()
            self.runs += 1
            key = answer_key(hits)
            if key == self._last:
                return False
            self._last, self.results = key, hits
            self._told(hits)
            try:
                self._callback(list(hits))
            except Exception:
                log.exception("a watched query's callback raised; the watch goes on")
            return True

    def cancel(self) -> None:
        self._subscription.cancel()

    def __enter__(self) -> QueryWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()
