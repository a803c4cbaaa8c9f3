"""Live sync: an online device hears of changes as the cloud commits them, without polling.

Invariants:
- Every change is applied by the ordinary sync (``SyncSession`` through the agent's
  ``sync``): the same pages, shredding, cursor moves and acknowledgements as a manual
  sync. The live pull is only a wake-up: it asks for one change after the cursor with
  ``wait`` seconds to wait (``PullRequest.wait``); when the cursor moved, a sync runs.
- Two threads: the poller (one sync, then live pulls back to back) and the pusher (a
  sync whenever the agent signals a queued op, so a local forget leaves at once).
  Syncs never overlap: the agent serialises them, and the device database serialises
  every statement and transaction (``device.db``).
- The live pull's HTTP timeout is ``wait`` + ``TIMEOUT_MARGIN``, longer than the cloud
  may hold it, so a quiet space is one request per ``wait`` seconds, never a loop.
- Live pull is protocol 2 (``PullRequest.wait``). Against a cloud that speaks only
  version 1 the loop syncs every ``wait`` seconds instead (``can_wait`` is false).
- ``Offline`` (and any refusal) backs off through the injected sleeper (0.5 s doubling
  to 30 s), then syncs again in full; a revoked device stops (its memory was wiped).
- ``stop`` returns promptly: no sync starts after it, a sync in flight is waited for,
  and the live pull in flight is ended by a plain pull of the same device (the cloud
  answers a device's older waiting pull when a newer pull arrives). If that cannot
  reach the cloud, the poller thread is left to end with its request; it never touches
  the database after ``stop``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from device.client import CloudClient
from device.db import Database
from device.errors import CopyWiped, DeviceError, InvalidOperation, Offline
from device.store import get_meta
from device.views import SyncReport
from protocol.messages import MAX_PULL_WAIT, PullRequest, PullResponse

log = logging.getLogger("memsync.device.live")

DEFAULT_WAIT = 20.0  # seconds the cloud may hold one live pull
TIMEOUT_MARGIN = 10.0  # seconds the HTTP timeout adds to ``wait``
CANCEL_TIMEOUT = 2.0  # seconds ``stop`` gives the pull that ends the live one
JOIN_TIMEOUT = 5.0
CANCEL_ATTEMPTS = 3  # the live pull may reach the cloud just after the one that ends it
NOTHING_NEW = "nothing new"
BACKOFF = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0)  # seconds after each failure in a row

# waits up to ``seconds``; returns early once the event is set (``stop``)
Sleeper = Callable[[float, threading.Event], object]


def _sleep(seconds: float, stop: threading.Event) -> None:
    stop.wait(seconds)


class LiveEventKind(StrEnum):
    SYNCED = "synced"  # a sync ran: ``report`` says what it pushed, applied, shredded
    OFFLINE = "offline"  # the cloud could not be reached; backing off
    REFUSED = "refused"  # the cloud (or the device) refused; backing off
    STOPPED = "stopped"  # the live loop ended (``message`` says why)


@dataclass(frozen=True, slots=True)
class LiveEvent:
    kind: LiveEventKind
    message: str
    report: SyncReport | None = None


def wait_for_change(db: Database, client: CloudClient, wait: float) -> bool:
    """One live pull from this device's cursor: True when the cloud's feed has moved
    past it (a sync should run), False when ``wait`` passed with nothing new."""
    cursor = get_meta(db).pull_cursor
    page = client.post(
        "/v1/pull",
        PullRequest(cursor=cursor, limit=1, wait=wait),
        PullResponse,
        timeout=wait + TIMEOUT_MARGIN,
    )
    return bool(page.changes) or page.cursor != cursor


def end_waiting_pull(db: Database, client: CloudClient) -> None:
    """A plain one-change pull: the cloud then answers this device's waiting pull."""
    cursor = get_meta(db).pull_cursor
    client.post(
        "/v1/pull", PullRequest(cursor=cursor, limit=1), PullResponse, timeout=CANCEL_TIMEOUT
    )


class LiveSync:
    """The live loop of one device agent (start it with ``DeviceAgent.start_live``)."""

    def __init__(
        self,
        *,
        sync: Callable[[], SyncReport],
        wait_for_change: Callable[[float], bool],
        end_wait: Callable[[], None],
        wait: float = DEFAULT_WAIT,
        can_wait: Callable[[], bool] = lambda: True,
        on_event: Callable[[LiveEvent], None] | None = None,
        sleeper: Sleeper | None = None,
    ) -> None:
        if not 0 < wait <= MAX_PULL_WAIT:
            raise InvalidOperation(
                f"live wait {wait!r} must be above 0 and at most {MAX_PULL_WAIT:g} seconds; "
                "live sync was not started"
            )
        self.wait = wait
        self._sync = sync
        self._wait_for_change = wait_for_change
        self._can_wait = can_wait
        self._end_wait = end_wait
        self._on_event = on_event or (lambda event: None)
        self._sleep = sleeper or _sleep
        self._stop = threading.Event()
        self._queued = threading.Event()
        self._gate = threading.RLock()  # a sync runs only while holding it, and never after stop
        self._waiting = threading.Event()  # the poller is inside a live pull
        self._poller = threading.Thread(target=self._poll_loop, name="memsync-live", daemon=True)
        self._pusher = threading.Thread(target=self._push_loop, name="memsync-push", daemon=True)

    # --- control ----------------------------------------------------------------------

    def start(self) -> None:
        self._poller.start()
        self._pusher.start()

    @property
    def running(self) -> bool:
        return not self._stop.is_set() and self._poller.is_alive()

    @property
    def waiting(self) -> bool:
        """The poller is in a live pull (sent, or about to be)."""
        return self._waiting.is_set()

    @property
    def alive(self) -> bool:
        """Either thread is still running (after ``stop``: a live pull it could not end)."""
        return self._poller.is_alive() or self._pusher.is_alive()

    def queued(self) -> None:
        """The agent queued an op: push it now (from the pusher thread)."""
        self._queued.set()

    def stop(self) -> None:
        """Stop both threads (see the module invariants for what "promptly" means)."""
        with self._gate:  # a sync in flight finishes first; none starts after this
            already = self._stop.is_set()
            self._stop.set()
        self._queued.set()
        here = threading.current_thread()
        if self._pusher.is_alive() and self._pusher is not here:
            self._pusher.join(JOIN_TIMEOUT)
        for _ in range(CANCEL_ATTEMPTS):
            if not self._poller.is_alive() or self._poller is here:
                break
            if self._waiting.is_set():
                try:
                    self._end_wait()
                except DeviceError as exc:  # offline: the poller ends with its own request
                    log.info("could not end the live pull in flight: %s", exc)
                    break
            self._poller.join(CANCEL_TIMEOUT)
        if not already:
            self._emit(LiveEventKind.STOPPED, "live sync stopped")

    # --- the two loops ----------------------------------------------------------------

    def _poll_loop(self) -> None:
        failures = 0
        must_sync = True
        while not self._stop.is_set():
            try:
                if must_sync and not self._sync_now():
                    return
                if not self._can_wait():
                    # a version-1 cloud has no live pull: sync again after ``wait``
                    self._sleep(self.wait, self._stop)
                    must_sync = True
                    continue
                self._waiting.set()
                try:
                    must_sync = self._wait_for_change(self.wait)
                finally:
                    self._waiting.clear()
                failures = 0
            except Exception as exc:
                if not self._failed(exc, failures):
                    return
                failures += 1
                must_sync = True

    def _push_loop(self) -> None:
        failures = 0
        while True:
            self._queued.wait()
            if self._stop.is_set():
                return
            self._queued.clear()
            try:
                if not self._sync_now():
                    return
                failures = 0
            except Exception as exc:
                if not self._failed(exc, failures):
                    return
                failures += 1
                self._queued.set()  # the ops are still queued: try again

    def _sync_now(self) -> bool:
        """One sync, unless stopped (then False)."""
        with self._gate:
            if self._stop.is_set():
                return False
            report = self._sync()
        self._emit(LiveEventKind.SYNCED, _describe(report), report)
        return True

    def _failed(self, exc: Exception, failures: int) -> bool:
        """Report a failed step and back off; False when the loop must end."""
        if self._stop.is_set():
            return False
        if isinstance(exc, CopyWiped):  # revoked, or the account ended
            self._stop.set()
            self._emit(LiveEventKind.STOPPED, f"live sync stopped: {exc}")
            return False
        if not isinstance(exc, DeviceError):
            log.exception("live sync step failed")
        kind = LiveEventKind.OFFLINE if isinstance(exc, Offline) else LiveEventKind.REFUSED
        pause = BACKOFF[min(failures, len(BACKOFF) - 1)]
        self._emit(kind, f"{exc} (retrying in {pause:g} s)")
        self._sleep(pause, self._stop)
        return not self._stop.is_set()

    def _emit(self, kind: LiveEventKind, message: str, report: SyncReport | None = None) -> None:
        try:
            self._on_event(LiveEvent(kind, message, report))
        except Exception:
            log.exception("live sync event handler failed")


def _describe(report: SyncReport) -> str:
    parts = []
    if report.pushed:
        parts.append(f"pushed {report.pushed} op(s)")
    if report.pulled:
        parts.append(f"applied {report.pulled} change(s)")
    if report.shredded:
        parts.append("shredded " + ", ".join(report.shredded))
    if report.acked:
        parts.append(f"acknowledged {len(report.acked)} key destruction(s)")
    return "; ".join(parts) or NOTHING_NEW
