"""SyncStatus: where this device stands with its cloud, for an app to show.

Invariants:
- Read from the database (queued ops, when it last synced, the cursor, what it
  holds) and from what this process saw (the last attempt, its error, whether a
  sync is running, the subset size the cloud last reported); reading writes nothing.
- ``last_synced_at`` is stored (``meta.last_synced_at``) only when a sync went
  through, so it survives a restart; a failed sync stores nothing, its error is kept
  in memory only (a refused sync changes nothing on disk).
- The first sync is the one that runs while ``last_synced_at`` is still None; its
  progress counts the records this device holds against the cloud's count of this
  device's subset when the cloud told it (``GET /v1/subset``), else ``expected`` is
  None: the pull feed does not say how much follows.
- Times come from the injected clock.
"""

from __future__ import annotations

import threading
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from device import store
from device.db import Database
from device.errors import Offline


class Connection(StrEnum):
    UNKNOWN = "unknown"  # no call to the cloud in this process yet
    ONLINE = "online"  # the last call to the cloud (a sync, a count) went through
    OFFLINE = "offline"  # the last call could not reach the cloud
    ERROR = "error"  # the cloud answered the last sync with an error
    NOT_ENROLLED = "not_enrolled"  # no cloud to sync with yet


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FirstSync(_Frozen):
    in_progress: bool
    received: int  # records this device holds now
    expected: int | None  # records in this device's subset, as the cloud last said


class SyncStatus(_Frozen):
    device_id: str | None
    connection: Connection
    syncing: bool  # a sync is running now
    live: bool  # live sync is on
    queued_ops: int
    oldest_queued_at: datetime | None
    last_synced_at: datetime | None  # None: never synced
    last_attempt_at: datetime | None  # this process's last sync, whatever its outcome
    last_error: str | None  # why the last sync failed (None once one went through)
    cursor: str | None  # the feed position this device pulled up to (opaque)
    records_held: int
    cloud_records: int | None  # this device's subset as the cloud last counted it
    cloud_records_at: datetime | None
    lag: int | None  # cloud_records minus records_held, when the cloud told its count
    first_sync: FirstSync | None  # None once the device synced once

    @property
    def never_synced(self) -> bool:
        return self.last_synced_at is None


def _when(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


class SyncTracker:
    """What this process saw of its syncs (the agent tells it; ``read`` shows it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connection = Connection.UNKNOWN
        self._error: str | None = None
        self._attempt_at: datetime | None = None
        self._running = 0
        self._cloud_records: int | None = None
        self._cloud_records_at: datetime | None = None

    def started(self, at: datetime) -> None:
        with self._lock:
            self._running += 1
            self._attempt_at = at

    def succeeded(self) -> None:
        with self._lock:
            self._running -= 1
            self._connection, self._error = Connection.ONLINE, None

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            self._running -= 1
            self._connection = Connection.OFFLINE if isinstance(exc, Offline) else Connection.ERROR
            self._error = f"{type(exc).__name__}: {str(exc)[:300]}"

    def cloud_counted(self, records: int, at: datetime) -> None:
        """The cloud said this device's subset holds ``records`` records (so it was
        reached: online; the last sync's error, if any, stays told)."""
        with self._lock:
            self._cloud_records, self._cloud_records_at = records, at
            self._connection = Connection.ONLINE

    def unreachable(self, exc: Offline) -> None:
        """Asking the cloud for its count did not reach it."""
        with self._lock:
            self._connection = Connection.OFFLINE
            self._error = f"{type(exc).__name__}: {str(exc)[:300]}"

    def read(self, db: Database, *, live: bool) -> SyncStatus:
        meta = store.get_meta(db)
        last = _when(store.last_synced_at(db))
        held = store.held_count(db)
        with self._lock:
            connection, error = self._connection, self._error
            syncing, attempt = self._running > 0, self._attempt_at
            cloud, cloud_at = self._cloud_records, self._cloud_records_at
        if meta.credential is None:
            connection = Connection.NOT_ENROLLED
        first = None
        if last is None and meta.credential is not None:
            first = FirstSync(in_progress=syncing, received=held, expected=cloud)
        return SyncStatus(
            device_id=meta.device_id,
            connection=connection,
            syncing=syncing,
            live=live,
            queued_ops=store.queue_count(db),
            oldest_queued_at=_when(store.oldest_queued_at(db)),
            last_synced_at=last,
            last_attempt_at=attempt,
            last_error=error,
            cursor=meta.pull_cursor,
            records_held=held,
            cloud_records=cloud,
            cloud_records_at=cloud_at,
            lag=None if cloud is None else max(0, cloud - held),
            first_sync=first,
        )


def describe(status: SyncStatus) -> str:
    """A few lines a person reads (``memsync device status``)."""
    lines = [f"Connection: {status.connection.value}" + (" (syncing now)" * status.syncing)]
    lines.append(
        "Last synced: "
        + ("never" if status.last_synced_at is None else status.last_synced_at.isoformat())
    )
    queued = f"Queued changes: {status.queued_ops}"
    if status.oldest_queued_at is not None:
        queued += f" (oldest from {status.oldest_queued_at.isoformat()})"
    lines.append(queued)
    held = f"Records on this device: {status.records_held}"
    if status.cloud_records is not None:
        held += f" of {status.cloud_records} in its subset (lag {status.lag})"
    lines.append(held)
    lines.append(f"Cursor: {status.cursor or 'none (nothing pulled yet)'}")
    if status.first_sync is not None:
        first = status.first_sync
        expected = "?" if first.expected is None else str(first.expected)
        state = "in progress" if first.in_progress else "not done yet"
        lines.append(f"First sync: {state}, {first.received}/{expected} records")
    if status.live:
        lines.append("Live sync: on")
    if status.last_error is not None:
        lines.append(f"Last error: {status.last_error}")
    return "\n".join(lines)
