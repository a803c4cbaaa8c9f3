"""What every part of a sync session shares: the store, the wire, the clock, the report,
and shredding on the cloud's word (``docs/protocol.md``, "The sync algorithm").

Invariants:
- Nothing is shredded by inference; only on the cloud's own word (a key-destruction
  event, a pulled ``permanently_forgotten`` state, a ``forgotten`` refusal, a resync
  that no longer sends a synced item, the cloud's record status), and always through
  ``device.shred.destroy``: the skeletons it leaves are ``synced`` (the cloud already
  holds the forget).
- A shred takes the record and everything this device derived from it
  (``protocol.rules.derivation_closure`` over the local edges), plus what the cloud
  named (keys, episodes, artifacts).
- The session's parts (``device.sync_push``, ``device.sync_apply``, ``device.sync``)
  hold no state of their own beyond what is here: one report per session.
"""

from __future__ import annotations

from collections.abc import Callable

from device import catalog, shred, store
from device.client import CloudClient
from device.db import Database
from device.errors import ServerError
from device.sync_page import PageWork
from device.sync_state import SyncState
from device.views import SyncReport
from protocol.messages import RecordUse
from protocol.model import LifecycleState
from protocol.rules import derivation_closure

FORGOTTEN = LifecycleState.FORGOTTEN.value


def no_randomness(n: int) -> bytes:
    raise RuntimeError("pulled content arrives sealed; the device makes no key for it")


class SessionBase:
    def __init__(
        self,
        db: Database,
        client: CloudClient,
        now: Callable[[], str],
        random_bytes: Callable[[int], bytes] = no_randomness,
    ) -> None:
        self.db = db
        self.client = client
        self.now = now
        # fresh data keys for this device's own versions the cloud numbers otherwise
        self.random_bytes = random_bytes
        self.report = SyncReport()
        self._reported: list[RecordUse] = []  # uses the pull in flight reports
        self._page: PageWork | None = None  # the pulled page being applied

    def pull(self) -> None:
        """Pull pages until the cursor is at the end (``device.sync.SyncSession``)."""
        raise NotImplementedError

    def _space(self) -> str:
        space = store.get_meta(self.db).space_id
        if space is None:
            raise ServerError("pulled changes before enrollment; this device has no space")
        return space

    def _shred_count(self) -> int:
        return len(self.report.shredded) + len(self.report.resync_removed)

    def _shred_closure(
        self,
        record_id: str,
        at: str,
        key_ids: list[str] | None = None,
        episode_ids: list[str] | None = None,
        artifact_ids: list[str] | None = None,
    ) -> None:
        """Shred the record, what the server named, and all this device derived from it."""
        records, artifacts = derivation_closure([record_id], catalog.children(self.db))
        self._shred(
            record_ids=records,
            artifact_ids=(*artifacts, *(artifact_ids or ())),
            episode_ids=tuple(episode_ids or ()),
            key_ids=tuple(key_ids or ()),
            at=at,
        )
        self.report.shredded.append(record_id)

    def _shred(
        self,
        *,
        at: str,
        record_ids: tuple[str, ...] = (),
        artifact_ids: tuple[str, ...] = (),
        episode_ids: tuple[str, ...] = (),
        key_ids: tuple[str, ...] = (),
    ) -> None:
        """What the cloud's word forgets goes through ``shred.destroy``; the skeletons it
        leaves are ``synced`` (the cloud already holds the forget)."""
        target = shred.Forget(
            record_ids=record_ids,
            artifact_ids=artifact_ids,
            episode_ids=episode_ids,
            key_ids=key_ids,
            at=at,
            sync_state=SyncState.SYNCED,
        )
        shred.destroy(self.db, target)

    def _shred_on_status(self, record_id: str) -> None:
        """The cloud's record status said forgotten (its key destruction was compacted
        away before this device heard it): shred the record and what came from it."""
        row = store.record_row(self.db, record_id)
        if row is not None and row["lifecycle"] != FORGOTTEN:
            self._shred_closure(record_id, self.now())
        self.report.resync_removed.append(record_id)
