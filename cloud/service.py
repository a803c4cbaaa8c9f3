"""The cloud's application core, shared by the HTTP app and the CLI: a facade.

``CloudService`` builds the service's parts once and hands each call to the module of
its concern: ``cloud.accounts`` (users, enrollment, credentials, revocation, wipes),
``cloud.feed`` (where the feed stands, acks, the forget status, compaction),
``cloud.recall``, ``cloud.subset_service`` (a device's subset, policy and pins),
``cloud.index_admin``, ``cloud.status`` (state and "as of" reads),
``cloud.export_service``, ``cloud.ending`` (the end of an account) and
``cloud.closing`` (the service's shutdown); ``cloud.admission`` is the door every
device call passes. Push and pull run here.

Invariants:
- Every method is scoped to the caller's space; an id from another space is
  indistinguishable from one that does not exist.
- A push is one transaction: receipts are stored with their effects, a replayed
  ``op_id`` gets ``duplicate`` and never a second effect, and a device with
  unacknowledged key destructions gets ``PullRequired`` with nothing applied.
- Every op is decided by ``protocol.rules.decide`` over facts read from the store
  (``cloud.facts``), its effects are performed (``cloud.effects``) and its receipt
  (``protocol.receipts``) stored, all in the push's one transaction.
- A push's new data keys are written to the key store in one transaction just before
  the push commits (never after); its vault and the DEKs it holds end with the call.
- Forgetting commits the skeletons and key-destruction events first, then destroys
  the keys; ``ensure_destroyed`` (run at start-up and after every push) finishes any
  destruction a crash interrupted, and then every key of each ended space.
- Only sealed content carries text, sources, conversation ids, epistemic state and
  areas; plain DEKs never touch the record store; status and "as of" answers carry
  states, versions and times, never content.
- Indexing runs neither inside a push nor inside a recall: every commit that moved a
  space's feed owes it a catch-up (``cloud.indexer``), run after the commit in the
  background.
- A pull whose cursor is above 0 and below the feed floor is refused
  ``ResyncRequired`` before anything is read or written (``cloud.feed`` compacts).
- The consolidator's ops (``apply_system``) take exactly the push path (same space
  lock, ``decide``, effects, receipts keyed by op id, key destruction afterwards) on
  behalf of no device: they make no holdings, and their receipts name ``SYSTEM_ACTOR``.
- A push or ``apply_system`` that moved the space's change feed tells ``cloud.live``:
  on PostgreSQL a NOTIFY inside its transaction (delivered on commit to every process),
  and ``live.changed`` in this process right after the commit. Live pulls wait there;
  the vector cache drops what the space no longer indexes on every such change.
- Once the service is closed, every device call for an ended space raises
  ``AccountEnded`` (410) except the wipe confirmation; pushes and deletions are
  refused (``ServiceClosed``) from ``closes_at`` on (``cloud.closing``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path

from nacl.public import PublicKey, SealedBox

from cloud import closing
from cloud import push as pushes
from cloud.account_end import AccountEnd, EndReason
from cloud.account_key import change_account_key
from cloud.accounts import Accounts
from cloud.admission import Admission
from cloud.changes import ChangeReader
from cloud.config import CloudConfig
from cloud.cursors import cursor_parts as _cursor_parts
from cloud.cursors import decode_cursor, decode_subset_gen, encode_cursor
from cloud.effects import SYSTEM_ACTOR
from cloud.embedder import default_embedder
from cloud.ending import Ending
from cloud.errors import (
    KeyStoreError,
    MalformedCursorError,
    ResyncRequired,
)
from cloud.export_service import Exports
from cloud.feed import Feed
from cloud.index_admin import IndexAdmin
from cloud.indexer import Indexer
from cloud.keystore import SqliteKeyStore, open_key_store
from cloud.live import ChangeNotifier
from cloud.recall import Recall
from cloud.retrieval import CloudRetrieval
from cloud.search import SearchIndex
from cloud.status import AsOf, as_of, record_state
from cloud.store import SqlStore, open_store
from cloud.store.base import CompactionReport, DeviceRow, StoreSession
from cloud.store.sql import SqlSession
from cloud.subset import SubsetKeeper
from cloud.subset_feed import Page, SubsetFeed
from cloud.subset_service import Subsets
from cloud.vault import Vault
from protocol.errors import shown
from protocol.export.package import PackageHeader
from protocol.messages import (
    SUBSET_SINCE,
    AccountKeyChangeRequest,
    AccountKeyRequest,
    AccountKeyResponse,
    AckRequest,
    AckResponse,
    DeleteAccountRequest,
    DeleteAccountResponse,
    DevicesResponse,
    EnrollRequest,
    EnrollResponse,
    ExportRequest,
    PendingResponse,
    PinRequest,
    PullRequest,
    PullResponse,
    PushRequest,
    PushResponse,
    RecallRequest,
    RecallResponse,
    RecordState,
    ServiceStatus,
    SubsetPolicyRequest,
    SubsetResponse,
    WipedResponse,
)
from protocol.operations import (
    AnyOperation,
    Receipt,
)

log = logging.getLogger("memsync.cloud")

_LOG_PER_PAGE = 100  # subset enters and leaves per pull page (an enter carries its content)
FACTS_WAIT = 5.0  # seconds a pull waits for a cold space's facts (a device gives up at 10)
_SCAN_PER_PAGE = 20_000  # feed rows a subset pull page reads at most, looking for its own

__all__ = [
    "SYSTEM_ACTOR",
    "AccountEnd",
    "AsOf",
    "CloudService",
    "CompactionReport",
    "EndReason",
    "RecordState",
    "decode_cursor",
    "decode_subset_gen",
    "encode_cursor",
]


class CloudService:
    """The cloud: spaces, devices, push, pull, acknowledgements and forget status."""

    def __init__(self, config: CloudConfig) -> None:
        self.config = config
        self._clock = config.clock
        self._random = config.random_bytes
        if config.store_url.startswith("sqlite:"):
            store_path = config.store_url.removeprefix("sqlite:///")
            if Path(store_path).resolve() == Path(config.key_store_path).resolve():
                raise KeyStoreError(
                    f"the key store {config.key_store_path} must be a different file from the "
                    "record store"
                )
        self.store: SqlStore = open_store(config.store_url, config.clock)
        try:
            self.key_store: SqliteKeyStore = open_key_store(
                Path(config.key_store_path), config.random_bytes, config.clock, config.master_key
            )
        except BaseException:
            self.store.close()
            raise
        self.vault = Vault(self.key_store, config.random_bytes)
        self._checkpoint_owed = False
        self.search = SearchIndex(self.store, self.vault, config.embedder or default_embedder)
        self.retrieval = CloudRetrieval(self.store, self.vault, self.search)
        self.indexer = Indexer(self.search.try_catch_up, config.indexing)
        self.subsets = SubsetKeeper(self.vault, config.clock)
        postgres = self.store.dialect == "postgresql"
        self.live = ChangeNotifier(listen_url=config.store_url if postgres else None)
        self.live.on_change(self.search.drop_unindexed)
        self.search.on_cache = self.live.ensure_listening
        # the modules of one concern each, over the same parts
        self.admission = Admission(config.region)
        self.service_closing = closing.Closing(
            self.store, config.clock, config.region, self.end_space
        )
        self.closing = self.service_closing.watch
        check_writable = self.service_closing.check_writable
        self.ending = Ending(
            self.store,
            self._current_key_store,
            self.vault,
            self.search,
            self.live,
            config.clock,
            self.admission,
            announce=self._announce,
            check_writable=check_writable,
            sweep=self._sweep_after_end,
        )
        self.accounts = Accounts(
            self.store,
            self._current_key_store,
            config.clock,
            config.random_bytes,
            self.admission,
            check_writable=check_writable,
            mode=self.service_closing.mode,
            end_space=self.end_space,
        )
        self.feed = Feed(self.store, config.clock, self.admission)
        self.recaller = Recall(
            self.store, self.search, self.retrieval, self.indexer, config.clock, self.admission
        )
        self.subset_doors = Subsets(self.store, self.subsets, self.admission)
        self.index_admin = IndexAdmin(self.store, self.search, self.indexer)
        self.exports = Exports(
            config,
            self.store,
            self._current_key_store,
            self.vault,
            self.admission,
            sweep=self.ensure_destroyed,
        )
        self.ensure_destroyed()
        self.enforce_closing()

    def _current_key_store(self) -> SqliteKeyStore:
        return self.key_store  # the parts read it at each call: it may be reopened

    @property
    def key_store_path(self) -> Path:
        return self.key_store.path

    def close(self) -> None:
        self.search.close()  # a catch-up under way stops after its chunk ...
        self.indexer.close()  # ... and the indexer's thread ends
        self.live.close()
        self.search.evict()
        self.key_store.close()
        self.store.close()

    # --- accounts (cloud.accounts) ---------------------------------------------------

    def add_user(self, name: str) -> tuple[str, str]:
        """Create a space for ``name``; return ``(space_id, one-time enrollment code)``."""
        return self.accounts.add_user(name)

    def new_enrollment_code(self, space_id: str) -> str:
        """Another one-time code for an existing space (valid 24 hours)."""
        return self.accounts.new_enrollment_code(space_id)

    def enroll(self, req: EnrollRequest) -> EnrollResponse:
        return self.accounts.enroll(req)

    def register_account_key(
        self, space_id: str, device_id: str, req: AccountKeyRequest
    ) -> AccountKeyResponse:
        return self.accounts.register_account_key(space_id, device_id, req)

    def change_account_key(
        self, space_id: str, device_id: str, req: AccountKeyChangeRequest
    ) -> AccountKeyResponse:
        """The user changed the account passphrase (``cloud.account_key``)."""
        return change_account_key(self.store, self._enrolled, space_id, device_id, req)

    def authenticate(self, credential: str) -> tuple[str, str]:
        """``(space_id, device_id)`` of a device credential (``cloud.accounts``)."""
        return self.accounts.authenticate(credential)

    def revoke_device(self, space_id: str, device_id: str) -> None:
        self.accounts.revoke_device(space_id, device_id)

    def confirm_wipe(self, credential: str) -> WipedResponse:
        return self.accounts.confirm_wipe(credential)

    def find_space(self, name_or_id: str) -> str:
        return self.accounts.find_space(name_or_id)

    def devices(self, space_id: str) -> DevicesResponse:
        """Every device ever enrolled in the caller's space (revoked ones included)."""
        return self.accounts.devices(space_id)

    # --- push ------------------------------------------------------------------------

    def push(self, space_id: str, device_id: str, req: PushRequest) -> PushResponse:
        """Apply one device's ops set-at-a-time, one receipt each (``cloud.push``)."""
        return pushes.push(self, space_id, device_id, req)

    def apply_system(
        self,
        space_id: str,
        ops: Sequence[AnyOperation] | Callable[[StoreSession], Sequence[AnyOperation]],
        then: Callable[[StoreSession, list[Receipt]], None] | None = None,
    ) -> list[Receipt]:
        """Decide and apply the consolidator's ``ops`` exactly as a push would, in one
        transaction under the space lock, on behalf of no device (``cloud.push``).

        ``ops`` may be a function of the session: it is called under the lock, so what
        it read still holds when its ops are decided. A replayed op id gets
        ``duplicate`` and changes nothing. ``then(session, receipts)`` runs inside the
        same transaction after the ops (the consolidator completes its work items
        there, so an item is done exactly when its records are written). Keys of
        anything forgotten are destroyed after commit."""
        return pushes.apply_system(self, space_id, ops, then)

    @staticmethod
    def _announce(s: SqlSession, space_id: str, first: int) -> bool:
        """Inside the transaction: did it move the space's change feed past ``first``?
        If so, NOTIFY the other processes (PostgreSQL; delivered only on commit)."""
        moved = s.last_seq(space_id) != first
        if moved:
            s.notify_changed(space_id)
        return moved

    def ensure_destroyed(self) -> int:
        """Destroy the keys of every committed forget whose keys may remain, then every
        key of each ended space whose keys may remain. Idempotent.

        Runs at start-up and after every push; returns how many forget events and
        ended spaces it finished now. A key-store failure is logged and left for the
        next sweep (the forget or end is committed and the content is already withheld
        from pulls).
        """
        with self.store.session() as s:
            events = s.undestroyed_forget_events()
        finished = 0
        for ev in events:
            try:
                self.key_store.destroy(k.key_id for k in ev.keys)
            except KeyStoreError as exc:  # the forget stays committed; the next sweep retries
                log.error("forget event %d of %s: %s", ev.event_id, ev.space_id, exc)
                continue
            with self.store.session() as s:
                s.mark_keys_destroyed(ev.space_id, ev.event_id, self._clock())
            finished += 1
        finished += self._destroy_ended_spaces()
        if finished or self._checkpoint_owed:
            # the forgotten index rows are deleted (zeroed in the file); truncate the
            # SQLite WAL so no old copy of their pages stays there (retried while busy)
            self._checkpoint_owed = not self.store.checkpoint()
            if self._checkpoint_owed:
                log.warning("record store: the WAL could not be truncated after a forget")
        return finished

    # --- the feed outside a page (cloud.feed) ---------------------------------------

    def last_seq(self, space_id: str) -> int:
        """Where the space's change feed is now (a live pull waits for it to move)."""
        return self.feed.last_seq(space_id)

    def subset_news(self, space_id: str, device_id: str, req: PullRequest) -> bool:
        return self.feed.subset_news(space_id, device_id, req)

    def pull(self, space_id: str, device_id: str, req: PullRequest) -> PullResponse:
        after, gen = _cursor_parts(req.cursor)
        now = self._clock()
        subset = req.protocol_version >= SUBSET_SINCE
        if subset:
            # read-only: a snapshot blocks no writer while a big space is read
            if not self.subsets.facts.warm(self.store.snapshot, space_id, FACTS_WAIT):
                # this process is still reading the space's facts (a big space, once):
                # answer "more to come" at the same place rather than keep the device
                # waiting past its timeout; its next pull finds them read
                with self.store.session(space_id, lock=False) as s:
                    self._enrolled(s, space_id, device_id)
                    self._check_cursor(s, space_id, req.cursor, after)
                return PullResponse(
                    changes=[], cursor=encode_cursor(after, gen or 0), has_more=True
                )
            # the page reads no change past the position the choice saw: a commit in
            # between is read after the next pull's choice, never skipped as "not kept"
            upto = self._choose_subset(space_id, device_id, req, after, gen)
        else:
            upto = sys.maxsize  # a mirror reads as far as the feed goes
        with self.store.session(space_id, lock=False) as s:
            device = self._enrolled(s, space_id, device_id)
            floor = self._check_cursor(s, space_id, req.cursor, after)
            reader = ChangeReader(s, self.vault, space_id, SealedBox(PublicKey(device.public_key)))
            page = Page()
            feed: SubsetFeed | None = None
            last_gen = gen or 0
            if subset:
                self.subsets.facts.refresh(s, space_id)
                feed = SubsetFeed(s, reader, self.subsets, space_id, device_id)
                entries = s.subset_log_after(space_id, device_id, last_gen, _LOG_PER_PAGE + 1)
                feed.log(page, entries[:_LOG_PER_PAGE], after)
                if entries:
                    last_gen = entries[:_LOG_PER_PAGE][-1].gen
                if len(entries) > _LOG_PER_PAGE:
                    # the rest of the log first: no feed row before every enter is out
                    s.add_holdings(space_id, device_id, page.held)
                    s.touch_device(space_id, device_id, now)
                    return PullResponse(
                        changes=page.changes,
                        cursor=encode_cursor(after, last_gen),
                        has_more=True,
                    )
            last, has_more = after, False
            scanned = 0
            while True:
                rows = s.changes_after(space_id, last, req.limit + 1)
                capped = bool(rows) and rows[-1].seq > upto
                if capped:
                    rows = [row for row in rows if row.seq <= upto]
                has_more = capped or len(rows) > req.limit
                chunk = rows[: req.limit]
                wanted = chunk if feed is None else feed.wanted_rows(chunk)
                reader.load(wanted)  # the chunk's items, a statement per kind
                sent = {row.seq for row in wanted}
                for row in chunk:
                    if row.seq in sent:
                        page.add(reader.read(row))
                    last = row.seq
                    if len(page.changes) >= req.limit:
                        break
                scanned += min(len(rows), req.limit)
                has_more = has_more or (bool(rows) and last != rows[-1].seq)
                # a subset page reads on past what the device does not keep, so a pull
                # is not a round trip per page of other records' rows
                if feed is None or capped or not has_more or len(page.changes) >= req.limit:
                    break
                if scanned >= _SCAN_PER_PAGE:
                    break
            s.add_holdings(space_id, device_id, page.held)
            s.touch_device(space_id, device_id, now)
        if not has_more:
            # every row up to the floor that compaction left was in this answer: the
            # cursor moves past the compacted tail, so the next pull stays incremental
            last = max(last, floor)
        cursor = encode_cursor(last, last_gen) if subset else encode_cursor(last)
        return PullResponse(changes=page.changes, cursor=cursor, has_more=has_more)

    @staticmethod
    def _check_cursor(s: StoreSession, space_id: str, cursor: str | None, after: int) -> int:
        """The space's feed floor, once the cursor is known good (else raise)."""
        if after > s.last_seq(space_id):
            raise MalformedCursorError(
                f"cursor {shown(cursor)} points past the end of this space's changes; "
                "it was not issued by this server"
            )
        floor = s.feed_floor(space_id)
        if 0 < after < floor:
            assert cursor is not None
            raise ResyncRequired(cursor, after, floor)
        return floor

    def _choose_subset(
        self, space_id: str, device_id: str, req: PullRequest, after: int, gen: int | None
    ) -> int:
        """Before a protocol-3 pull reads: confirm the log the cursor names, note the
        running use counts it reports, choose again if due. A replay writes nothing.
        Returns the feed position the standing choice covers."""
        with self.store.session(space_id, lock=True) as s:
            self._enrolled(s, space_id, device_id)
            self._check_cursor(s, space_id, req.cursor, after)
            if gen is not None:
                self.subsets.confirm(s, space_id, device_id, gen)
            if req.used:
                known = {u.record_id for u in req.used if s.record(space_id, u.record_id)}
                self.subsets.record_uses(
                    s,
                    space_id,
                    device_id,
                    [
                        (u.record_id, u.uses, u.last_used_at)
                        for u in req.used
                        if u.record_id in known
                    ],
                )
            return self.subsets.evaluate(s, space_id, device_id).as_of

    def compact(self, space_id: str) -> CompactionReport:
        return self.feed.compact(space_id)

    def ack(self, space_id: str, device_id: str, req: AckRequest) -> AckResponse:
        return self.feed.ack(space_id, device_id, req)

    def pending(self, space_id: str) -> PendingResponse:
        return self.feed.pending(space_id)

    # --- recall, the subset, the indexes, state reads ------------------------------------

    def recall(self, space_id: str, device_id: str, req: RecallRequest) -> RecallResponse:
        """The eight retrieval steps over the whole space, for one enrolled device."""
        return self.recaller.recall(space_id, device_id, req)

    def subset(self, space_id: str, device_id: str) -> SubsetResponse:
        return self.subset_doors.subset(space_id, device_id)

    def set_subset_policy(
        self, space_id: str, device_id: str, req: SubsetPolicyRequest
    ) -> SubsetResponse:
        return self.subset_doors.set_policy(space_id, device_id, req)

    def pin(self, space_id: str, device_id: str, req: PinRequest) -> SubsetResponse:
        return self.subset_doors.pin(space_id, device_id, req)

    def index_catch_up(self, space_id: str) -> int:
        return self.index_admin.catch_up(space_id)

    def index_pending(self) -> int:
        return self.index_admin.run_pending()

    def reindex(self) -> int:
        return self.index_admin.reindex()

    def record_status(self, space_id: str, record_id: str) -> RecordState:
        """A live record's state (no content), or its skeleton when forgotten."""
        with self.store.session(space_id) as s:
            return record_state(s, space_id, record_id)

    def as_of(self, space_id: str, record_id: str, when: datetime) -> AsOf:
        """The version and lifecycle that were current at ``when`` (no content)."""
        with self.store.session(space_id) as s:
            return as_of(s, space_id, record_id, when)

    # --- export (cloud.export_service) ----------------------------------------------

    def export(self, space_id: str, device_id: str, req: ExportRequest) -> Iterator[bytes]:
        """Start export ``req.export_id``: the sealed stream's frames, for the asking
        device only; every refusal is raised before the iterator is returned."""
        return self.exports.export(space_id, device_id, req)

    def package(self, header: PackageHeader) -> Iterator[str]:
        return self.exports.package(header)

    # --- the end of an account (cloud.ending) ----------------------------------------

    def end_space(self, space_id: str, reason: EndReason) -> AccountEnd:
        return self.ending.end_space(space_id, reason)

    def account_status(self, space_id: str) -> AccountEnd | None:
        return self.ending.account_status(space_id)

    def delete_account(
        self, space_id: str, device_id: str, req: DeleteAccountRequest
    ) -> DeleteAccountResponse:
        return self.ending.delete_account(space_id, device_id, req)

    def _sweep_after_end(self) -> None:
        self._checkpoint_owed = True  # receipts rewritten, rows deleted: truncate the WAL
        self.ensure_destroyed()

    def _destroy_ended_spaces(self) -> int:
        return self.ending.destroy_ended_spaces()

    # --- the doors every device call passes (cloud.admission) -----------------------

    def _enrolled(self, s: StoreSession, space_id: str, device_id: str) -> DeviceRow:
        return self.admission.enrolled(s, space_id, device_id)

    def _check_open(self, s: StoreSession, space_id: str) -> None:
        self.admission.check_open(s, space_id)

    # --- the service's closing (cloud.closing) --------------------------------------

    def _check_writable(self, now: datetime, what: str) -> None:
        self.service_closing.check_writable(now, what)

    def service_status(self) -> ServiceStatus:
        return self.service_closing.status()

    def announce_closing(
        self, closes_at: datetime, export_until: datetime | None = None
    ) -> ServiceStatus:
        return self.service_closing.announce(closes_at, export_until)

    def cancel_closing(self) -> ServiceStatus:
        return self.service_closing.cancel()

    def enforce_closing(self) -> list[AccountEnd]:
        return self.service_closing.enforce()

    def closing_tick(self) -> None:
        self.service_closing.tick()
