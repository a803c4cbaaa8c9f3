"""The change feed: typed events for every record that changed on this device.

Invariants:
- Events are told only after the local transaction that made the change committed;
  a rolled-back transaction (or a failed COMMIT) tells nothing. The hub is the
  database's ``TransactionObserver`` (``device.db``): the writers (``device.store``,
  ``device.shred``) call ``touch`` before they change a record's row, the hub notes
  the row as it was (once per transaction) and, just before COMMIT, compares it with
  the row as it is: one event per record per transaction, none when nothing a reader
  sees moved (a sync state, say).
- Added: the device did not hold it and now does; Changed: held before and after,
  with what moved; Forgotten: now a skeleton; Evicted: its row went (it left this
  device's subset, or the copy was wiped) and it may come back.
- An event carries ids, versions, states and times, never words: a forgotten
  record's event cannot hold what it said, and no event outlives a shred with text.
- ``cause`` is ``pulled`` while ``caused_by(Cause.PULLED)`` is in force in the thread
  that writes (the agent's sync), ``local`` otherwise; ``at`` comes from the injected
  clock.
- Nothing is noted while no one listens (no read on the write path then).
- A listener that raises is logged and skipped; the write and the other listeners
  go on. Listeners run in the thread that committed, after the database lock is
  released, so they may read and write the store (a write there tells its own events).
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, assert_never

from pydantic import BaseModel, ConfigDict, Field

from device.db import Database
from protocol.model import LifecycleState

log = logging.getLogger(__name__)

FORGOTTEN = LifecycleState.FORGOTTEN.value


class Cause(StrEnum):
    LOCAL = "local"  # a call on this device: remember, correct, forget, an import...
    PULLED = "pulled"  # the cloud's word: a pulled change, a receipt, a subset leave


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    record_id: str
    version: int | None  # the current version after the change (before it, if forgotten)
    cause: Cause
    at: datetime


class RecordAdded(_Event):
    kind: Literal["added"] = "added"
    lifecycle: LifecycleState


class RecordChanged(_Event):
    kind: Literal["changed"] = "changed"
    lifecycle: LifecycleState
    # what moved, in this order: lifecycle, version, usage, superseded_by, conflicts_with
    changed: tuple[str, ...]


class RecordForgotten(_Event):
    kind: Literal["forgotten"] = "forgotten"


class RecordEvicted(_Event):
    kind: Literal["evicted"] = "evicted"


RecordEvent = Annotated[
    RecordAdded | RecordChanged | RecordForgotten | RecordEvicted, Field(discriminator="kind")
]
Listener = Callable[[list[RecordEvent]], None]

_cause: ContextVar[Cause] = ContextVar("memsync_change_cause", default=Cause.LOCAL)


@contextlib.contextmanager
def caused_by(cause: Cause) -> Iterator[None]:
    """Changes this thread commits meanwhile are told with ``cause``."""
    token = _cause.set(cause)
    try:
        yield
    finally:
        _cause.reset(token)


# (lifecycle, current_version, highest version, usage, superseded_by, conflicts_with)
_Row = tuple[str, int | None, int | None, tuple[str | None, str | None], str | None, str]
_FIELDS = ("lifecycle", "version", "usage", "superseded_by", "conflicts_with")

_ROW_SQL = (
    "SELECT lifecycle, current_version, "
    "(SELECT max(version) FROM record_versions v WHERE v.record_id = r.record_id) AS top, "
    "usage_area, usage_project, superseded_by, conflicts_with "
    "FROM records r WHERE record_id = ?"
)


def _read(db: Database, record_id: str) -> _Row | None:
    row = db.one(_ROW_SQL, (record_id,))
    if row is None:
        return None
    return (
        str(row["lifecycle"]),
        row["current_version"],
        row["top"],
        (row["usage_area"], row["usage_project"]),
        row["superseded_by"],
        json.dumps(sorted(json.loads(row["conflicts_with"] or "[]"))),
    )


def _moved(before: _Row, after: _Row) -> tuple[str, ...]:
    pairs = (
        (before[0], after[0]),
        ((before[1], before[2]), (after[1], after[2])),
        (before[3], after[3]),
        (before[4], after[4]),
        (before[5], after[5]),
    )
    return tuple(name for name, (b, a) in zip(_FIELDS, pairs, strict=True) if b != a)


def event_for(
    record_id: str, before: _Row | None, after: _Row | None, cause: Cause, at: datetime
) -> RecordEvent | None:
    """What one record's change in one transaction tells (None: nothing a reader sees)."""
    held_before = before is not None and before[0] != FORGOTTEN
    if not held_before:
        if after is None or after[0] == FORGOTTEN:
            return None  # never held here: a skeleton arriving tells nothing
        return RecordAdded(
            record_id=record_id,
            version=after[1],
            cause=cause,
            at=at,
            lifecycle=LifecycleState(after[0]),
        )
    assert before is not None
    if after is None:
        return RecordEvicted(record_id=record_id, version=before[1], cause=cause, at=at)
    if after[0] == FORGOTTEN:
        return RecordForgotten(record_id=record_id, version=before[1], cause=cause, at=at)
    moved = _moved(before, after)
    if not moved:
        return None
    return RecordChanged(
        record_id=record_id,
        version=after[1],
        cause=cause,
        at=at,
        lifecycle=LifecycleState(after[0]),
        changed=moved,
    )


def describe(event: RecordEvent) -> str:
    """One line a person reads for an event (ids and states only: an event has no words)."""
    source = "from the cloud" if event.cause is Cause.PULLED else "here"
    match event:
        case RecordAdded():
            what = f"added ({event.lifecycle.value})"
        case RecordChanged():
            what = f"changed: {', '.join(event.changed)} (now {event.lifecycle.value})"
        case RecordForgotten():
            what = "permanently forgotten"
        case RecordEvicted():
            what = "left this device (still in the cloud)"
        case _:
            assert_never(event)
    version = "" if event.version is None else f" v{event.version}"
    return f"{event.at.isoformat()} {event.record_id}{version} {what}, {source}"


class Subscription:
    """What ``watch`` returns: ``cancel()`` (or leaving its ``with`` block) stops it."""

    def __init__(self, hub: ChangeHub, listener: Listener) -> None:
        self._hub = hub
        self._listener = listener

    def cancel(self) -> None:
        self._hub.remove(self._listener)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class ChangeHub:
    """One database's observer and its listeners (``DeviceAgent`` makes one)."""

    def __init__(self, db: Database, clock: Callable[[], datetime]) -> None:
        self._db = db
        self._clock = clock
        self._listeners: list[Listener] = []
        self._guard = threading.Lock()
        # the transaction in progress (one at a time: the database's lock is held)
        self._before: dict[str, tuple[_Row | None, Cause]] = {}
        db.observer = self

    @property
    def listening(self) -> bool:
        return bool(self._listeners)

    def add(self, listener: Listener) -> Subscription:
        with self._guard:
            self._listeners = [*self._listeners, listener]
        return Subscription(self, listener)

    def remove(self, listener: Listener) -> None:
        with self._guard:
            self._listeners = [x for x in self._listeners if x is not listener]

    # --- the writers' side ----------------------------------------------------------

    def touch(self, record_id: str) -> None:
        if not self._listeners or not self._db.in_transaction or record_id in self._before:
            return
        self._before[record_id] = (_read(self._db, record_id), _cause.get())

    # --- TransactionObserver ---------------------------------------------------------

    def before_commit(self) -> list[RecordEvent]:
        touched, self._before = self._before, {}
        if not touched:
            return []
        try:
            at = self._clock()
            events = [
                event
                for record_id, (before, cause) in touched.items()
                if (event := event_for(record_id, before, _read(self._db, record_id), cause, at))
                is not None
            ]
        except Exception:  # never leave a transaction open on a bug here
            log.exception("the change feed could not read %d record(s)", len(touched))
            return []
        return events

    def after_commit(self, sealed: object) -> None:
        events = sealed if isinstance(sealed, list) else []
        if not events:
            return
        for listener in self._listeners:
            try:
                listener(list(events))
            except Exception:
                log.exception("a change listener raised; the write stands, the others go on")

    def discarded(self) -> None:
        self._before = {}


def touch(db: Database, record_id: str) -> None:
    """A writer is about to change this record's row (call inside ``db.atomic()``)."""
    hub = db.observer
    if isinstance(hub, ChangeHub):
        hub.touch(record_id)


_CLOSED: Any = object()


class ChangeFeed:
    """The iterator form: events queue here as they commit, for any thread to read.

    Iterating blocks until the next event and ends once ``close`` is called (a thread
    that writes must not iterate its own feed: drain it instead)."""

    def __init__(self, hub: ChangeHub) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._subscription = hub.add(self._put)
        self._closed = False

    def _put(self, events: list[RecordEvent]) -> None:
        for event in events:
            self._queue.put(event)

    def get(self, timeout: float | None = None) -> RecordEvent | None:
        """The next event (waiting up to ``timeout`` seconds; None: none came, or closed)."""
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is _CLOSED:
            self._queue.put(_CLOSED)  # every later reader sees the end too
            return None
        event: RecordEvent = item
        return event

    def drain(self) -> list[RecordEvent]:
        """Every event queued now, without waiting."""
        out: list[RecordEvent] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return out
            if item is _CLOSED:
                self._queue.put(_CLOSED)
                return out
            out.append(item)

    def __iter__(self) -> Iterator[RecordEvent]:
        while (event := self.get()) is not None:
            yield event

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._subscription.cancel()
            self._queue.put(_CLOSED)

    def __enter__(self) -> ChangeFeed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
