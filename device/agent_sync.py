"""``DeviceAgent``'s sync, as delegations: manual and live sync (``device.syncing``,
``device.live``), watching changes and the sync status (``device.watching``), and the
cloud's other answers: devices, pending forgets, the subset (``device.remote``).

Invariants: syncs are serialised by the agent's sync lock (manual, live, account
deletion); a sync or a live loop needs a credential and is refused in temporary mode;
at most one live loop runs, and every live thread shares the one client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Unpack

from device import syncing, views, watching
from device.agent_core import AgentCore
from device.changes import ChangeFeed, RecordEvent, Subscription
from device.errors import InvalidOperation
from device.live import LiveSync
from device.query_watch import QueryWatch
from device.recalling import Question, Scope
from device.sync_status import SyncStatus
from device.syncing import LiveOptions
from protocol.messages import DeviceStatus, ForgetStatus
from protocol.subset import SubsetPolicy, SubsetView


class SyncFacade(AgentCore):
    """The sync of ``DeviceAgent`` (see ``device.agent``)."""

    # --- sync (``device.syncing``, ``device.live``) --------------------------------------

    def sync(self) -> views.SyncReport:
        """Acks left over, then push (pull first on 409), then pull and ack."""
        self._writable("syncing")
        self._needs_credential("enroll it with a code first")
        return syncing.sync(
            self._parts,
            cloud=self._cloud,
            revocable=self._revocable,
            lock=self._sync_lock,
            status=self._status,
        )

    def rebuild_vectors(self, limit: int | None = None, batch: int = 64) -> int:
        """Re-embed vectors another model made, at most ``limit``; how many."""
        return syncing.rebuild_vectors(self._parts, limit, batch)

    def start_live(self, **options: Unpack[LiveOptions]) -> LiveSync:
        """Sync now, then whenever the cloud's space changes or an op is queued."""
        self._needs_credential("enroll it before live sync")
        if self._live is not None and self._live.running:
            raise InvalidOperation(f"device {self.device_name!r} is already in live sync")
        client = self._cloud()  # made here, once: the live threads share it
        live = syncing.live_sync(self._parts, client, self.sync, self._revocable, **options)
        self._live = live
        live.start()
        return live

    def stop_live(self) -> None:
        """Stop live sync (no-op when it is not running)."""
        live, self._live = self._live, None
        if live is not None:
            live.stop()

    @contextmanager
    def live(self, **options: Unpack[LiveOptions]) -> Iterator[LiveSync]:
        """Live sync for the duration of a ``with`` block."""
        started = self.start_live(**options)
        try:
            yield started
        finally:
            self.stop_live()

    # --- watching changes and the sync status (``device.watching``) ----------------------

    def watch(self, callback: Callable[[RecordEvent], None]) -> Subscription:
        """``callback`` with each record event once its transaction committed."""
        return watching.watch(self._changes, callback)

    def changes(self) -> ChangeFeed:
        """The iterator form of ``watch``."""
        return ChangeFeed(self._changes)

    def watch_query(
        self,
        query: str,
        callback: Callable[[list[views.RecallHit]], None],
        limit: int = 5,
        **scope: Unpack[Scope],
    ) -> QueryWatch:
        """``recall`` now, and again whenever its answer changes (``query_watch``)."""
        question = Question.of(query, limit, **scope)
        return watching.watch_query(self._changes, self._recaller, question, callback)

    def sync_status(self, *, ask_cloud: bool = False) -> SyncStatus:
        """Where this device stands (``ask_cloud``: the cloud's count first)."""
        live = self._live is not None and self._live.running
        ask = self.subset if ask_cloud else None
        return watching.sync_status(self._db, self._status, live=live, ask_cloud=ask)

    # --- the cloud's other answers: devices, pending forgets, the subset (``remote``) ----

    def devices(self) -> list[DeviceStatus]:
        """Every device of this account as the cloud knows it (``GET /v1/devices``)."""
        return self._remote.devices()

    def pending_forgets(self) -> list[ForgetStatus]:
        """Forgets some device of this account has not confirmed yet."""
        return self._remote.pending_forgets()

    def subset(self) -> SubsetView:
        """This device's subset as the cloud chose it (``GET /v1/subset``)."""
        return self._remote.subset()

    def set_subset_policy(self, policy: SubsetPolicy) -> SubsetView:
        """Replace this device's subset rules and budget (effective at the next sync)."""
        return self._remote.set_subset_policy(policy)

    def pin(self, record_id: str, pinned: bool = True) -> SubsetView:
        """Keep a record on this device whatever the rules say (within the budget)."""
        return self._remote.pin(record_id, pinned)

    def unpin(self, record_id: str) -> SubsetView:
        return self.pin(record_id, pinned=False)
