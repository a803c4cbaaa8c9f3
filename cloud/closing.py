"""The service's closing: a shutdown announced with a date, an export window after it,
then the end of every account (the seed's "If One ever shuts down").

Invariants:
- The mode is a pure function of the stored state and the injected clock
  (``mode_at``): ``open`` (nothing announced), ``closing`` (before ``closes_at``),
  ``export_only`` (from ``closes_at`` until ``export_until``), ``closed`` (from
  ``export_until``).
- An announcement needs ``closes_at`` after now (injected clock) and ``export_until``
  at or after ``closes_at`` (default: ``closes_at``); otherwise it is refused naming
  the dates and nothing is stored. A closing can be cancelled only before
  ``closes_at``.
- While closing, everything works and every HTTP answer carries the
  ``Memsync-Closing`` header (``header``). While export only, a route answers only if
  ``gate`` lets it (reads, acknowledgements, wipe confirmations, export); every other
  route answers 503 ``service_closed`` naming the dates, and nothing changes. Once
  closed, every account is ended with reason ``service_shutdown`` exactly like a
  deletion (``CloudService.enforce_closing``), and every device hears 410
  ``account_ended``; only enrolling stays refused by the gate.
- A process re-reads the stored state at most every ``REFRESH`` of injected clock
  (``ClosingWatch``), and at once when it changed the state itself, so every process
  sharing a store agrees within ``REFRESH``; the per-request check is a comparison of
  the clock with the cached state.
- ``Closing`` (the service's side) refuses writes from ``closes_at`` on
  (``ServiceClosed``) and, once closed, ends every space that has not ended; one
  thread of a process at a time runs that enforcement.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from cloud.account_end import AccountEnd, EndReason
from cloud.errors import ClosingRefused, ServiceClosed
from cloud.store import SqlStore
from cloud.store.base import ServiceStateRow
from protocol.messages import ServiceMode, ServiceStatus, closing_header

log = logging.getLogger("memsync.cloud")

REFRESH = timedelta(seconds=5)

# routes that stay open while the service is export-only (export, and what a device
# needs to keep its copy in step and to confirm a wipe); everything else answers 503
EXPORT_ONLY_PATHS = frozenset(
    {
        "/openapi.json",
        "/v1/health",
        "/v1/service",
        "/v1/pull",
        "/v1/ack",
        "/v1/wiped",
        "/v1/export",
        "/v1/forgets/pending",
        "/v1/devices",
    }
)
EXPORT_ONLY_PREFIXES = ("/v1/records/", "/v1/export/")
# once closed, every account has ended (devices hear 410 from their own routes); only
# making a new device stays refused
CLOSED_PATHS = frozenset({"/v1/enroll"})


def mode_at(state: ServiceStateRow | None, now: datetime) -> ServiceMode:
    """Where the service is at ``now``: open, closing, export only or closed."""
    if state is None or state.closes_at is None:
        return ServiceMode.OPEN
    export_until = state.export_until or state.closes_at
    if now < state.closes_at:
        return ServiceMode.CLOSING
    if now < export_until:
        return ServiceMode.EXPORT_ONLY
    return ServiceMode.CLOSED


def gate(mode: ServiceMode, path: str) -> bool:
    """Whether a request to ``path`` may go on in ``mode`` (False: 503 service_closed)."""
    if mode is ServiceMode.EXPORT_ONLY:
        return path in EXPORT_ONLY_PATHS or path.startswith(EXPORT_ONLY_PREFIXES)
    if mode is ServiceMode.CLOSED:
        return path not in CLOSED_PATHS
    return True


def header(state: ServiceStateRow | None) -> str | None:
    """The ``Memsync-Closing`` header of every answer once a closing is announced."""
    if state is None or state.closes_at is None:
        return None
    return closing_header(state.closes_at, state.export_until or state.closes_at)


def refusal(state: ServiceStateRow, path: str) -> str:
    """The message of a 503 ``service_closed`` for ``path``."""
    assert state.closes_at is not None
    export_until = state.export_until or state.closes_at
    return (
        f"the memsync service closed at {state.closes_at.isoformat()}: {path} accepts no "
        f"request any more and nothing was changed; export stays open until "
        f"{export_until.isoformat()}, then all data is made unreadable"
    )


def announced(
    region: str, now: datetime, closes_at: datetime, export_until: datetime | None
) -> ServiceStateRow:
    """The state of a new announcement, or ``ClosingRefused`` naming what is wrong."""
    for name, at in (("closes_at", closes_at), ("export_until", export_until)):
        if at is not None and (at.tzinfo is None or at.utcoffset() is None):
            raise ClosingRefused(f"{name} {at.isoformat()} has no time zone; give a UTC time")
    if closes_at <= now:
        raise ClosingRefused(
            f"closes_at {closes_at.isoformat()} is not in the future (now is "
            f"{now.isoformat()}); a shutdown is announced ahead of time (nothing was stored)"
        )
    until = closes_at if export_until is None else export_until
    if until < closes_at:
        raise ClosingRefused(
            f"export_until {until.isoformat()} is before closes_at {closes_at.isoformat()}; "
            "export stays open at least until the service closes (nothing was stored)"
        )
    return ServiceStateRow(region, now, closes_at, until)


def cancelled(state: ServiceStateRow | None, region: str, now: datetime) -> ServiceStateRow:
    """The state after cancelling a closing, or ``ClosingRefused`` once it has begun."""
    if state is None or state.closes_at is None:
        raise ClosingRefused("no closing of the service is announced; nothing to cancel")
    if now >= state.closes_at:
        raise ClosingRefused(
            f"the service closed at {state.closes_at.isoformat()}; a closing can be cancelled "
            "only before it closes (nothing was changed)"
        )
    return ServiceStateRow(region)


def status(state: ServiceStateRow | None, region: str, now: datetime) -> ServiceStatus:
    return ServiceStatus(
        region=region if state is None else state.region,
        mode=mode_at(state, now),
        announced_at=None if state is None else state.announced_at,
        closes_at=None if state is None else state.closes_at,
        export_until=None if state is None or state.closes_at is None else state.export_until,
    )


class ClosingWatch:
    """This process's copy of the stored state, re-read at most every ``REFRESH``."""

    def __init__(self, read: Callable[[], ServiceStateRow | None]) -> None:
        self._read = read
        self._lock = threading.Lock()
        self._state: ServiceStateRow | None = None
        self._read_at: datetime | None = None
        self._enforced: ServiceStateRow | None = None  # the closed state enforced here

    def stale(self, now: datetime) -> bool:
        read_at = self._read_at
        return read_at is None or not read_at <= now < read_at + REFRESH

    def state(self, now: datetime) -> ServiceStateRow | None:
        """The state, re-read from the store when the cached copy is stale."""
        if self.stale(now):
            fresh = self._read()
            with self._lock:
                self._state, self._read_at = fresh, now
        return self._state

    @property
    def cached(self) -> ServiceStateRow | None:
        return self._state

    def changed(self, state: ServiceStateRow | None, now: datetime) -> None:
        """This process wrote ``state``: use it at once."""
        with self._lock:
            self._state, self._read_at = state, now

    def owes_enforcement(self, now: datetime) -> bool:
        """Closed by the cached state, and the end of every account not yet run here."""
        state = self._state
        return mode_at(state, now) is ServiceMode.CLOSED and self._enforced != state

    def enforced(self, state: ServiceStateRow | None) -> None:
        self._enforced = state


class Closing:
    """The closing as the service runs it: its state read through ``watch``, the writes
    that announce or cancel it, and the end of every account once it is closed."""

    def __init__(
        self,
        store: SqlStore,
        clock: Callable[[], datetime],
        region: str,
        end_space: Callable[[str, EndReason], AccountEnd],
    ) -> None:
        self.store = store
        self._clock = clock
        self.region = region
        self._end_space = end_space
        self.watch = ClosingWatch(self.read_state)
        self._enforcing = threading.Lock()

    def read_state(self) -> ServiceStateRow | None:
        with self.store.session() as s:
            return s.service_state()

    def mode(self, now: datetime | None = None) -> ServiceMode:
        now = self._clock() if now is None else now
        return mode_at(self.watch.state(now), now)

    def check_writable(self, now: datetime, what: str) -> None:
        """``ServiceClosed`` from ``closes_at`` on: the service takes no more writes."""
        state = self.watch.state(now)
        if mode_at(state, now) in (ServiceMode.EXPORT_ONLY, ServiceMode.CLOSED):
            assert state is not None
            raise ServiceClosed(refusal(state, what))

    def status(self) -> ServiceStatus:
        """The region and where the service is in a shutdown (``GET /v1/service``)."""
        now = self._clock()
        return status(self.watch.state(now), self.region, now)

    def announce(self, closes_at: datetime, export_until: datetime | None = None) -> ServiceStatus:
        """Put the service into closing mode: everything works until ``closes_at``, export
        stays open until ``export_until`` (default: ``closes_at``), then every account
        ends. ``ClosingRefused`` (nothing stored) for dates in the past or out of order."""
        now = self._clock()
        state = announced(self.region, now, closes_at, export_until)
        with self.store.session() as s:
            s.put_service_state(state)
        self.watch.changed(state, now)
        log.warning(
            "the service closes at %s; export stays open until %s",
            closes_at.isoformat(),
            state.export_until.isoformat() if state.export_until else closes_at.isoformat(),
        )
        return status(state, self.region, now)

    def cancel(self) -> ServiceStatus:
        """Call off an announced closing (only before ``closes_at``)."""
        now = self._clock()
        with self.store.session() as s:
            state = cancelled(s.service_state(), self.region, now)
            s.put_service_state(state)
        self.watch.changed(state, now)
        log.warning("the closing of the service was cancelled")
        return status(state, self.region, now)

    def enforce(self) -> list[AccountEnd]:
        """Once the service is closed (after ``export_until``), end every space that has
        not ended (reason ``service_shutdown``), exactly like a deletion. Idempotent; runs
        at start-up, on requests and from the CLI. Another thread of this process already
        at it: returns at once (its ends are not listed)."""
        now = self._clock()
        state = self.watch.state(now)
        if mode_at(state, now) is not ServiceMode.CLOSED:
            return []
        if not self._enforcing.acquire(blocking=False):
            return []
        try:
            with self.store.session() as s:
                open_spaces = s.space_ids()
            ends = [self._end_space(space, EndReason.SERVICE_SHUTDOWN) for space in open_spaces]
            self.watch.enforced(state)
            return ends
        finally:
            self._enforcing.release()

    def tick(self) -> None:
        """What each HTTP request runs first (in a worker thread, only when needed): read
        the stored state if the cached copy is stale, and end every account once closed."""
        now = self._clock()
        self.watch.state(now)
        if self.watch.owes_enforcement(now):
            self.enforce()
