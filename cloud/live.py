"""Waking live pulls when a space's change feed moves, in this process and across processes.

Invariants:
- ``changed(space_id)`` runs after every commit that appends to a space's change feed
  and wakes every live pull of that space waiting in this process. On PostgreSQL the
  committing transaction also sends ``NOTIFY memsync_changes, '<space_id>'``
  (``cloud.store.sql``), which PostgreSQL delivers only on commit; one listener
  thread per process LISTENs and calls ``changed`` for each, so a commit in any
  process wakes the waiters of every process. The payload is the space id, never content.
- No lost wake-up: a waiter subscribes before it reads the feed's position, so a
  commit after the read wakes it and a commit before the read is seen by the read.
  A listener that (re)connects wakes every waiter, since notifications may have been
  missed while it was away; a waiter always re-reads the position after waking.
- Waiting holds no database connection and no thread: a waiter is an asyncio event,
  set thread-safely from the committing thread or the listener thread.
- A device has at most one waiting pull per process: any newer pull by the same
  device ends the older wait, which is then answered at once.
- The listener starts when the process first holds something a change can make stale
  (a waiting pull, cached vectors: ``ensure_listening``); it wakes everything on each
  connect, so nothing committed before it listened is missed.
- ``close`` ends every wait and stops the listener (it reconnects while open).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum

import psycopg
from sqlalchemy.engine import make_url

from cloud.store.sql import CHANGES_CHANNEL

log = logging.getLogger("memsync.cloud.live")

CHANNEL = CHANGES_CHANNEL
LISTENER_KEEPALIVE = 30.0  # seconds of silence after which the listener checks its link
CONNECT_TIMEOUT = 5  # seconds for the listener's connection attempt
RECONNECT_BACKOFF = (0.1, 0.5, 1.0, 2.0, 5.0)  # seconds, then the last one again

Clock = Callable[[], float]
Position = Callable[[], Awaitable[int]]


class WaitOutcome(StrEnum):
    CHANGED = "changed"  # the feed is past the cursor (or was at once)
    TIMED_OUT = "timed_out"
    SUPERSEDED = "superseded"  # a newer pull by the same device
    CANCELLED = "cancelled"  # the caller's ``until`` finished (e.g. the client left)
    CLOSED = "closed"  # the service is closing


@dataclass(eq=False)
class _Waiter:
    """One waiting pull: an asyncio event in its loop, set from any thread."""

    space_id: str
    device_id: str
    loop: asyncio.AbstractEventLoop
    event: asyncio.Event = field(default_factory=asyncio.Event)
    superseded: bool = False

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits any more
            self.loop.call_soon_threadsafe(self.event.set)


class ChangeNotifier:
    """The waiters of one ``CloudService`` and (on PostgreSQL) its listener thread."""

    def __init__(self, *, listen_url: str | None = None, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._waiters: dict[str, set[_Waiter]] = {}
        self._by_device: dict[tuple[str, str], _Waiter] = {}
        self._callbacks: list[Callable[[str | None], None]] = []
        self._closed = False
        self._listen_url = listen_url
        self._listener: PgListener | None = None

    # --- waking -----------------------------------------------------------------------

    def on_change(self, callback: Callable[[str | None], None]) -> None:
        """Call ``callback(space_id)`` on every change this process hears of, after the
        waiters are woken, and ``callback(None)`` when changes may have been missed (a
        listener reconnected). An exception is logged, never raised to the committer."""
        with self._lock:
            self._callbacks.append(callback)

    def changed(self, space_id: str) -> None:
        """The space's change feed moved (committed): wake its waiters in this process."""
        with self._lock:
            waiters = list(self._waiters.get(space_id, ()))
            callbacks = list(self._callbacks)
        for waiter in waiters:
            waiter.wake()
        self._tell(callbacks, space_id)

    def wake_all(self) -> None:
        """Wake every waiter so each re-reads its position (after a listener reconnects:
        notifications may have been missed, for any space)."""
        with self._lock:
            waiters = [w for group in self._waiters.values() for w in group]
            callbacks = list(self._callbacks)
        for waiter in waiters:
            waiter.wake()
        self._tell(callbacks, None)

    @staticmethod
    def _tell(callbacks: list[Callable[[str | None], None]], space_id: str | None) -> None:
        for callback in callbacks:
            try:
                callback(space_id)
            except Exception:  # a cache's trouble must not fail a commit already made
                log.exception("change callback for %s failed", space_id or "every space")

    def supersede(self, space_id: str, device_id: str) -> None:
        """End the device's waiting pull in this process, if any (a newer pull came)."""
        with self._lock:
            older = self._by_device.pop((space_id, device_id), None)
        if older is not None:
            older.superseded = True
            older.wake()

    @property
    def waiting(self) -> int:
        """How many pulls are waiting in this process."""
        with self._lock:
            return sum(len(group) for group in self._waiters.values())

    # --- waiting ----------------------------------------------------------------------

    async def wait(
        self,
        space_id: str,
        device_id: str,
        after_seq: int,
        timeout: float,
        position: Position,
        until: Awaitable[object] | None = None,
    ) -> WaitOutcome:
        """Return once the space's feed is no longer at ``after_seq`` (``position()``
        reads it), or after ``timeout`` seconds, or when ``until`` finishes, or when a
        newer pull by the same device or ``close`` ends the wait."""
        self.ensure_listening()
        waiter = self._subscribe(space_id, device_id)
        guard = None if until is None else asyncio.ensure_future(until)
        try:
            if self._closed:
                return WaitOutcome.CLOSED
            deadline = self._clock() + timeout
            while True:
                if await position() != after_seq:  # subscribed first: no lost wake-up
                    return WaitOutcome.CHANGED
                remaining = deadline - self._clock()
                if remaining <= 0:
                    return WaitOutcome.TIMED_OUT
                woke = asyncio.ensure_future(waiter.event.wait())
                pending = {woke} if guard is None else {woke, guard}
                done, _ = await asyncio.wait(
                    pending, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
                if woke not in done:
                    woke.cancel()
                if guard is not None and guard in done:
                    return WaitOutcome.CANCELLED
                if self._closed:
                    return WaitOutcome.CLOSED
                if waiter.superseded:
                    return WaitOutcome.SUPERSEDED
                waiter.event.clear()
        finally:
            if guard is not None and not guard.done():
                guard.cancel()
            self._unsubscribe(waiter)

    def _subscribe(self, space_id: str, device_id: str) -> _Waiter:
        waiter = _Waiter(space_id, device_id, asyncio.get_running_loop())
        with self._lock:
            older = self._by_device.get((space_id, device_id))
            self._by_device[space_id, device_id] = waiter
            self._waiters.setdefault(space_id, set()).add(waiter)
        if older is not None:
            older.superseded = True
            older.wake()
        return waiter

    def _unsubscribe(self, waiter: _Waiter) -> None:
        with self._lock:
            group = self._waiters.get(waiter.space_id)
            if group is not None:
                group.discard(waiter)
                if not group:
                    del self._waiters[waiter.space_id]
            key = (waiter.space_id, waiter.device_id)
            if self._by_device.get(key) is waiter:
                del self._by_device[key]

    # --- the PostgreSQL listener ------------------------------------------------------

    def ensure_listening(self) -> None:
        """Start the listener (once). The service calls it when the process first holds
        something a change can make stale: a live pull, or cached vectors. A process
        that never does (the CLI, a worker) never opens a LISTEN connection; changes
        made before the listener is up are covered by its wake-up-everything on connect."""
        if self._listen_url is None:
            return
        with self._lock:
            if self._listener is not None or self._closed:
                return
            self._listener = PgListener(self._listen_url, self.changed, self.wake_all)
            listener = self._listener
        listener.start()

    @property
    def listener(self) -> PgListener | None:
        return self._listener

    def close(self) -> None:
        """End every wait and stop the listener (joined)."""
        with self._lock:
            self._closed = True
            listener, self._listener = self._listener, None
            waiters = [w for group in self._waiters.values() for w in group]
        for waiter in waiters:
            waiter.wake()
        if listener is not None:
            listener.stop()


def libpq_url(store_url: str) -> str:
    """The store's SQLAlchemy URL as a libpq connection string for psycopg."""
    return make_url(store_url).set(drivername="postgresql").render_as_string(hide_password=False)


class PgListener:
    """One thread with its own psycopg connection doing ``LISTEN memsync_changes``.

    Each notification's payload (a space id) goes to ``on_change``; every successful
    (re)connection calls ``on_connect`` (the notifier wakes all its waiters then). A
    dropped connection is retried with back-off until ``stop``.
    """

    def __init__(
        self,
        store_url: str,
        on_change: Callable[[str], None],
        on_connect: Callable[[], None],
        *,
        keepalive: float = LISTENER_KEEPALIVE,
    ) -> None:
        self._conninfo = libpq_url(store_url)
        self._on_change = on_change
        self._on_connect = on_connect
        self._keepalive = keepalive
        self._stopping = threading.Event()
        self._wake_r, self._wake_w = os.pipe()  # stop() interrupts the select at once
        self.connected = threading.Event()
        self.connections = 0  # how many times it has connected (tests watch reconnects)
        self.backend_pid: int | None = None
        self._thread = threading.Thread(target=self._run, name="memsync-listen", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        os.write(self._wake_w, b"x")
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                with psycopg.connect(
                    self._conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT
                ) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.backend_pid = conn.info.backend_pid
                    self.connections += 1
                    self.connected.set()
                    failures = 0
                    self._on_connect()
                    self._listen(conn)
            except (psycopg.Error, OSError) as exc:
                if self._stopping.is_set():
                    break
                pause = RECONNECT_BACKOFF[min(failures, len(RECONNECT_BACKOFF) - 1)]
                log.warning("change listener lost its connection (%s); retrying in %ss", exc, pause)
                failures += 1
                self._stopping.wait(pause)
            finally:
                self.connected.clear()

    def _listen(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        while not self._stopping.is_set():
            ready, _, _ = select.select([conn.fileno(), self._wake_r], [], [], self._keepalive)
            if self._wake_r in ready:
                return
            if not ready:
                conn.execute("SELECT 1")  # silence: make sure the link is still there
            for note in conn.notifies(timeout=0):
                if note.channel == CHANNEL and note.payload:
                    self._on_change(note.payload)
