"""Watching this device: record events as they commit, a query that re-runs when
records change, and where the device stands with its cloud.

Invariants:
- Events and re-runs are told only after the transaction that made them committed
  (``device.changes``), in the committing thread; what a sync changes is told with
  cause ``pulled``.
- A watched query's told answer counts its records as used, as a recall does; a re-run
  whose answer is unchanged counts nothing (``device.query_watch``).
- The sync status writes nothing; asking the cloud for its count of this device's
  subset is optional, and when the cloud cannot answer the status says what it last
  knew (an older cloud, with no subset, leaves the count unknown).
"""

from __future__ import annotations

from collections.abc import Callable

from device import store
from device.changes import ChangeHub, RecordEvent, Subscription
from device.db import Database
from device.errors import NeedsNewerProtocol, Offline, ServerError, ServerRefused
from device.query_watch import QueryWatch
from device.recalling import Question, Recaller
from device.sync_status import SyncStatus, SyncTracker
from device.views import RecallHit


def watch(hub: ChangeHub, callback: Callable[[RecordEvent], None]) -> Subscription:
    """``callback`` with each record event, once its transaction committed."""

    def each(events: list[RecordEvent]) -> None:
        for event in events:
            callback(event)

    return hub.add(each)


def watch_query(
    hub: ChangeHub,
    recaller: Recaller,
    question: Question,
    callback: Callable[[list[RecallHit]], None],
) -> QueryWatch:
    """``question`` now and after each change, told when its answer differs."""
    return QueryWatch(hub, lambda: list(recaller.run(question).hits), recaller.count_uses, callback)


def sync_status(
    db: Database,
    status: SyncTracker,
    *,
    live: bool,
    ask_cloud: Callable[[], object] | None,
) -> SyncStatus:
    """Where this device stands; ``ask_cloud`` (its subset read) first, when given and
    the device is enrolled."""
    if ask_cloud is not None and store.get_meta(db).credential is not None:
        try:
            ask_cloud()
        except Offline as exc:
            status.unreachable(exc)
        except (ServerError, ServerRefused, NeedsNewerProtocol):
            pass  # an older cloud has no subset: the count stays unknown
    return status.read(db, live=live)
