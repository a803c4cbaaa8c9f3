"""The cloud's application core, shared by the HTTP app and the CLI.

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
  destruction a crash interrupted.
- Only sealed content carries text, sources, conversation ids, epistemic state and
  areas; plain DEKs never touch the record store; status and "as of" answers carry
  states, versions and times, never content.
- Recall runs the retrieval pipeline over the caller's whole space (``cloud.retrieval``)
  over what is indexed, and says how many live records are not indexed yet
  (``RecallAnswer.unindexed``, protocol 4 on). Indexing runs neither inside a push nor
  inside a recall: every commit that moved a space's feed owes it a catch-up
  (``cloud.indexer``), run after the commit in the background.
- Compaction (``compact``) deletes only change-feed rows that carry nothing any more,
  never a key destruction a registered, unrevoked holder has not acknowledged, and
  raises the feed floor in the same transaction; a pull whose cursor is above 0 and
  below the floor is refused ``ResyncRequired`` before anything is read or written.
- An export (``export``) is refused before any byte of the package unless the space's
  registered account key verifies the request's proof (403), its export id never
  started an export (409) and both stores answer within ``CloudConfig.export_wait``
  (503 naming the store); refusals change nothing. Its package is read from one store
  snapshot (``cloud.export``), sealed in chunks to the asking device's public key, and
  a failure after streaming began ends the stream with an error chunk, never a final
  one. Every export started is a row of the ``exports`` audit log with its outcome.
- Only a revoked device's credential, or that of any device of an ended space, confirms
  a wipe (``confirm_wipe``); a wiped device is pending for no forget.
- The end of an account (``end_space``: a deletion with strong authentication, or the
  service's shutdown) forgets everything of the space in one transaction under its lock
  (``cloud.account_end``), then destroys every key of the space; ``ensure_destroyed``
  finishes it after a crash. From then on every device call for the space raises
  ``AccountEnded`` (410) except the wipe confirmation; the operator's reads
  (``account_status``, ``pending``, ``record_status``) still answer.
- The service's closing (``cloud.closing``) is read from the store at most every few
  seconds of injected clock; once closed, ``enforce_closing`` (at start-up, on requests,
  from the CLI) ends every space, and a device whose space it has not reached yet is
  ended on the spot when it authenticates. Pushes and deletions are refused
  (``ServiceClosed``) from ``closes_at`` on.
- The consolidator's ops (``apply_system``) take exactly the push path (same space
  lock, ``decide``, effects, receipts keyed by op id, key destruction afterwards) on
  behalf of no device: they make no holdings, and their receipts name ``SYSTEM_ACTOR``.
- A push or ``apply_system`` that moved the space's change feed tells ``cloud.live``:
  on PostgreSQL a NOTIFY inside its transaction (delivered on commit to every process),
  and ``live.changed`` in this process right after the commit. Live pulls wait there;
  the vector cache drops what the space no longer indexes on every such change.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path

from nacl.public import PublicKey, SealedBox
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from cloud import closing
from cloud import push as pushes
from cloud.account_end import AccountEnd, EndReason, account_end, end_in_transaction, why
from cloud.changes import ChangeReader
from cloud.config import CloudConfig
from cloud.effects import SYSTEM_ACTOR
from cloud.embedder import default_embedder
from cloud.errors import (
    AccountEnded,
    AccountKeyMismatch,
    AlreadyExists,
    DeviceRevoked,
    EnrollmentRefused,
    ExportIdUsed,
    ExportIncomplete,
    ExportUnavailable,
    KeyStoreError,
    MalformedCursorError,
    MalformedRequest,
    NotFound,
    ResyncRequired,
    ServiceClosed,
    StrongAuthRequired,
    Unauthorized,
)
from cloud.export import PackageBuilder
from cloud.indexer import Indexer
from cloud.keystore import SqliteKeyStore, open_key_store
from cloud.live import ChangeNotifier
from cloud.retrieval import CloudRetrieval
from cloud.search import SearchIndex
from cloud.status import AsOf, as_of, record_state
from cloud.store import SqlStore, open_store
from cloud.store.base import (
    CompactionReport,
    DeviceRow,
    ServiceStateRow,
    SpaceEndRow,
    StoreSession,
)
from cloud.store.sql import SqlSession
from cloud.subset import SubsetKeeper
from cloud.subset_feed import Page, SubsetFeed
from cloud.vault import Vault
from protocol import strongauth
from protocol.errors import shown
from protocol.export.package import PackageHeader
from protocol.export.stream import PREFIX_BYTES, StreamSealer
from protocol.ids import is_id, make_id
from protocol.messages import (
    RECALL_UNINDEXED_SINCE,
    SUBSET_SINCE,
    AccountKeyRequest,
    AccountKeyResponse,
    AckRequest,
    AckResponse,
    DeleteAccountRequest,
    DeleteAccountResponse,
    DevicesResponse,
    DeviceStatus,
    EnrollRequest,
    EnrollResponse,
    ExportRequest,
    ForgetStatus,
    PendingDevice,
    PendingResponse,
    PinRequest,
    PullRequest,
    PullResponse,
    PushRequest,
    PushResponse,
    RecallAnswer,
    RecallLine,
    RecallRequest,
    RecallResponse,
    RecordState,
    ServiceMode,
    ServiceStatus,
    SubsetPolicyRequest,
    SubsetResponse,
    WipedResponse,
)
from protocol.operations import (
    AnyOperation,
    Receipt,
)
from protocol.sealing import KEY_BYTES
from protocol.strongauth import verify_export
from protocol.versioned import render_json

log = logging.getLogger("memsync.cloud")

ENROLLMENT_CODE_TTL = timedelta(hours=24)
_LOG_PER_PAGE = 100  # subset enters and leaves per pull page (an enter carries its content)
FACTS_WAIT = 5.0  # seconds a pull waits for a cold space's facts (a device gives up at 10)
_SCAN_PER_PAGE = 20_000  # feed rows a subset pull page reads at most, looking for its own
MAX_NAME_CHARS = 64
EXPORT_FIRST_WAIT = 0.5  # seconds before an export first looks at its stores again
EXPORT_MAX_STEP = 5.0  # the wait doubles up to this
PUBLIC_KEY_BYTES = 32
ACCOUNT_KEY_BYTES = 32
_N = r"(0|[1-9][0-9]{0,17})"
# c1:<seq> (protocol 1 and 2); c2:<seq>:<gen> (protocol 3: gen is the subset log's)
_CURSOR = re.compile(rf"c1:{_N}|c2:{_N}:{_N}")

__all__ = [
    "SYSTEM_ACTOR",
    "AccountEnd",
    "AsOf",
    "CloudService",
    "CompactionReport",
    "EndReason",
    "RecordState",
    "decode_cursor",
    "encode_cursor",
]


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def encode_cursor(seq: int, gen: int | None = None) -> str:
    raw = f"c1:{seq}" if gen is None else f"c2:{seq}:{gen}"
    return base64.urlsafe_b64encode(raw.encode()).decode("ascii").rstrip("=")


def _cursor_parts(cursor: str | None) -> tuple[int, int | None]:
    if cursor is None:
        return 0, None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedCursorError(f"cursor {cursor[:80]!r} was not issued by this server") from exc
    match = _CURSOR.fullmatch(raw)
    if match is None:
        raise MalformedCursorError(f"cursor {cursor[:80]!r} was not issued by this server")
    if match.group(1) is not None:
        seq, gen = int(match.group(1)), None
    else:
        seq, gen = int(match.group(2)), int(match.group(3))
    if encode_cursor(seq, gen) != cursor:
        raise MalformedCursorError(f"cursor {cursor[:80]!r} was not issued by this server")
    return seq, gen


def decode_cursor(cursor: str | None) -> int:
    """The sequence number behind a cursor this server issued; raise otherwise."""
    return _cursor_parts(cursor)[0]


def decode_subset_gen(cursor: str | None) -> int | None:
    """The subset log gen a protocol-3 cursor names (None: a cursor without one)."""
    return _cursor_parts(cursor)[1]


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
        self.closing = closing.ClosingWatch(self._read_service_state)
        self._enforcing = threading.Lock()
        self.ensure_destroyed()
        self.enforce_closing()

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

    # --- spaces and enrollment -------------------------------------------------------

    def add_user(self, name: str) -> tuple[str, str]:
        """Create a space for ``name``; return ``(space_id, one-time enrollment code)``."""
        name = name.strip()
        if not name or len(name) > MAX_NAME_CHARS:
            raise MalformedRequest(
                f"user name {name[:80]!r} must be 1 to {MAX_NAME_CHARS} characters"
            )
        if is_id("sp", name):
            raise MalformedRequest(f"user name {name!r} looks like a space id; choose another")
        now = self._clock()
        self._check_writable(now, f"creating user {name!r}")
        space_id = make_id("sp", self._random(15))
        code = self._new_code()
        with self.store.session() as s:
            if s.space_by_name(name) is not None:
                raise AlreadyExists(f"a user named {name!r} already exists")
            s.create_space(space_id, name, now)
            s.add_enrollment_code(space_id, _hash(code), now, now + ENROLLMENT_CODE_TTL)
            self.key_store.create_space_key(space_id)
        return space_id, code

    def new_enrollment_code(self, space_id: str) -> str:
        """Another one-time code for an existing space (valid 24 hours)."""
        now = self._clock()
        code = self._new_code()
        with self.store.session() as s:
            if not s.space_exists(space_id):
                raise NotFound(f"space {space_id} does not exist")
            self._check_open(s, space_id)
            s.add_enrollment_code(space_id, _hash(code), now, now + ENROLLMENT_CODE_TTL)
        return code

    def _new_code(self) -> str:
        return base64.b32encode(self._random(20)).decode("ascii").lower()

    def enroll(self, req: EnrollRequest) -> EnrollResponse:
        """Enroll a device; the answer carries the space's account key, if registered."""
        if len(req.public_key) != PUBLIC_KEY_BYTES:
            raise MalformedRequest(
                f"field 'public_key': an X25519 public key is {PUBLIC_KEY_BYTES} bytes, "
                f"got {len(req.public_key)}"
            )
        now = self._clock()
        code_hash = _hash(req.code)
        with self.store.session() as s:
            row = s.enrollment_code(code_hash)
            if row is None:
                raise EnrollmentRefused("enrollment code is unknown")
            if row.used_at is not None:
                raise EnrollmentRefused("enrollment code was already used; codes are single-use")
            if now >= row.expires_at:
                raise EnrollmentRefused(
                    f"enrollment code expired at {row.expires_at.isoformat()}; ask for a new one"
                )
            if s.space_end(row.space_id) is not None:
                raise EnrollmentRefused("enrollment code is for an account that has ended")
            device_id = make_id("dev", self._random(15))
            credential = "cred_" + base64.urlsafe_b64encode(self._random(32)).decode().rstrip("=")
            if not s.use_enrollment_code(code_hash, device_id, now):
                raise EnrollmentRefused("enrollment code was already used; codes are single-use")
            s.add_device(
                row.space_id, device_id, req.device_name, req.public_key, _hash(credential), now
            )
            account_key = s.account_key(row.space_id)
        return EnrollResponse(
            device_id=device_id,
            space_id=row.space_id,
            credential=credential,
            account_key=account_key,
        )

    def register_account_key(
        self, space_id: str, device_id: str, req: AccountKeyRequest
    ) -> AccountKeyResponse:
        """Register the account's verify key: the first sets it, the same key again is a
        no-op, a different one is refused (``AccountKeyMismatch``)."""
        if len(req.account_key) != ACCOUNT_KEY_BYTES:
            raise MalformedRequest(
                f"field 'account_key': an Ed25519 verify key is {ACCOUNT_KEY_BYTES} bytes, "
                f"got {len(req.account_key)}"
            )
        with self.store.session(space_id, lock=True) as s:
            self._enrolled(s, space_id, device_id)
            registered = s.account_key(space_id)
            if registered is None:
                s.set_account_key(space_id, req.account_key)
                registered = req.account_key
            elif registered != req.account_key:
                raise AccountKeyMismatch(
                    f"space {space_id} already has a different account key registered; "
                    "the account passphrase is not this account's (nothing was changed)"
                )
        return AccountKeyResponse(account_key=registered)

    def authenticate(self, credential: str) -> tuple[str, str]:
        """``(space_id, device_id)`` of a device credential; ``Unauthorized`` otherwise,
        ``AccountEnded`` when its space ended (once the service closed, the space is
        ended here if the closing has not reached it yet)."""
        device, end = self._device_of(credential)
        if end is None and self._mode() is ServiceMode.CLOSED:
            end = self._end_row(self.end_space(device.space_id, EndReason.SERVICE_SHUTDOWN))
        if end is not None:
            raise self._ended(end)
        if device.revoked_at is not None:
            raise DeviceRevoked(
                f"device {device.device_id} was revoked at {device.revoked_at.isoformat()}; "
                "it must wipe its copy of the memory"
            )
        return device.space_id, device.device_id

    def _device_of(self, credential: str) -> tuple[DeviceRow, SpaceEndRow | None]:
        """The device a credential belongs to, revoked or not, and the end of its space
        (None while it is open); ``Unauthorized`` if none."""
        if not credential:
            raise Unauthorized("no device credential was given")
        with self.store.session() as s:
            device = s.device_by_credential(_hash(credential))
            end = None if device is None else s.space_end(device.space_id)
        if device is None:
            raise Unauthorized("the device credential is unknown")
        return device, end

    def revoke_device(self, space_id: str, device_id: str) -> None:
        """Revoke a device: from now on its credential is refused (401 ``device_revoked``)
        and, when it next reaches the cloud, it wipes its copy of the memory."""
        with self.store.session(space_id, lock=True) as s:
            if not s.revoke_device(space_id, device_id, self._clock()):
                raise NotFound(f"no device {device_id} to revoke in space {space_id}")

    def confirm_wipe(self, credential: str) -> WipedResponse:
        """A revoked device, or a device of an ended space, confirms it wiped its copy: it
        is marked wiped (the first confirmation's time stays) and is pending for no
        forget, nor for the end of its account, from then on.

        Only such a device's credential is accepted: an unknown one is
        ``Unauthorized``; a device that is not revoked, in a space that has not ended,
        gets ``NotFound`` (it has no wipe to confirm) and nothing changes. The
        credential alone names the device and its space, so the confirmation never
        reaches another space."""
        device, end = self._device_of(credential)
        if device.revoked_at is None and end is None:
            raise NotFound(
                f"device {device.device_id} is not revoked and its account has not ended: "
                "there is no wipe to confirm (nothing was changed)"
            )
        with self.store.session(device.space_id, lock=True) as s:
            wiped_at = s.mark_wiped(device.space_id, device.device_id, self._clock())
        if wiped_at is None:  # the device row is gone, or not revoked nor ended: a store bug
            raise NotFound(f"no revoked device {device.device_id} in its space")
        return WipedResponse(device_id=device.device_id, wiped_at=wiped_at)

    def find_space(self, name_or_id: str) -> str:
        with self.store.session() as s:
            if is_id("sp", name_or_id) and s.space_exists(name_or_id):
                return name_or_id
            found = s.space_by_name(name_or_id)
        if found is None:
            raise NotFound(f"no user or space named {name_or_id!r}")
        return found

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

    # --- pull, ack, pending ---------------------------------------------------------

    def last_seq(self, space_id: str) -> int:
        """Where the space's change feed is now (a live pull waits for it to move)."""
        with self.store.session() as s:
            return s.last_seq(space_id)

    def subset_news(self, space_id: str, device_id: str, req: PullRequest) -> bool:
        """Whether enters or leaves wait for this protocol-3 pull (a policy or pin changed
        since its cursor): a live pull then answers at once instead of waiting."""
        if req.protocol_version < SUBSET_SINCE:
            return False
        gen = decode_subset_gen(req.cursor) or 0
        with self.store.session() as s:
            return bool(s.subset_log_after(space_id, device_id, gen, 1))

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
                for row in rows[: req.limit]:
                    if feed is None or feed.wanted(row):
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
        """Compact the space's change feed under the space lock: delete the rows that
        carry nothing any more (superseded states and projects, content whose keys were
        destroyed, key destructions every registered, unrevoked holder acknowledged) and
        raise the feed floor. Forget events, skeletons, pending rows and receipts are
        untouched; a pull whose cursor is below the floor is answered ``ResyncRequired``."""
        with self.store.session(space_id, lock=True) as s:
            if not s.space_exists(space_id):
                raise NotFound(f"space {space_id} does not exist")
            report = s.compact_changes(space_id)
        log.info(
            "compacted %s: %d row(s) deleted, floor %d -> %d",
            space_id,
            report.total_deleted,
            report.previous_floor,
            report.floor,
        )
        return report

    def ack(self, space_id: str, device_id: str, req: AckRequest) -> AckResponse:
        acknowledged = list(dict.fromkeys(req.event_ids))
        with self.store.session(space_id) as s:
            self._check_open(s, space_id)
            s.ack(space_id, device_id, acknowledged, self._clock())
        return AckResponse(acknowledged=acknowledged)

    def pending(self, space_id: str) -> PendingResponse:
        with self.store.session(space_id) as s:
            statuses = s.forget_statuses(space_id)
        return PendingResponse(
            forgets=[
                ForgetStatus(
                    record_id=st.record_id or None,
                    forgotten_at=st.forgotten_at,
                    pending=[PendingDevice(device_id=d, device_name=n) for d, n in st.pending],
                )
                for st in statuses
            ]
        )

    def devices(self, space_id: str) -> DevicesResponse:
        """Every device ever enrolled in the caller's space (revoked ones included)."""
        with self.store.session(space_id) as s:
            rows = s.device_statuses(space_id)
        return DevicesResponse(
            devices=[DeviceStatus.model_validate(r, from_attributes=True) for r in rows]
        )

    # --- recall ---------------------------------------------------------------------

    def recall(self, space_id: str, device_id: str, req: RecallRequest) -> RecallResponse:
        """The eight retrieval steps over the whole space, for one enrolled device."""
        with self.store.session(space_id) as s:
            device = self._enrolled(s, space_id, device_id)
        unindexed = self.search.unindexed(space_id) if req.personalized else 0
        result = self.retrieval.recall(
            space_id,
            req.query,
            now=self._clock(),
            area=req.area,
            project=req.project,
            personalized=req.personalized,
            factual=req.factual,
            consents=frozenset(req.consents),
            limit=req.limit,
        )
        lines = [
            RecallLine(
                record_id=line.record_id,
                text=line.text,
                content_type=line.content_type,
                epistemic_state=line.epistemic_state,
                confidence=line.confidence,
                conflict=line.conflict,
                outdated=line.outdated,
                current=line.current,
                line=line.line,
                score=round(line.score, 4),
                pulled_in_by=line.pulled_in_by or (line.via[0] if line.via else None),
                relation=line.via[1] if line.via else None,
            )
            for line in result.lines
        ]
        version = req.protocol_version
        answer = RecallAnswer(
            lines=lines,
            block=result.text,
            factual=result.factual,
            # an older device cannot be told; it gets the answer it always got
            unindexed=unindexed if version >= RECALL_UNINDEXED_SINCE else 0,
        )
        box = SealedBox(PublicKey(device.public_key))
        plain = render_json(answer, version).encode()
        if unindexed:  # e.g. pushed through another process, or before a restart
            self.indexer.schedule(space_id)  # after the answer: it does not compete with it
        return RecallResponse(sealed_answer=box.encrypt(plain))

    # --- the device subset -------------------------------------------------------------

    def subset(self, space_id: str, device_id: str) -> SubsetResponse:
        """The calling device's subset: policy, pins and what the cloud last chose."""
        with self.store.session(space_id, lock=True) as s:
            self._enrolled(s, space_id, device_id)
            if s.subset_state(space_id, device_id) is None:
                self.subsets.evaluate(s, space_id, device_id)
            return SubsetResponse(subset=self.subsets.view(s, space_id, device_id))

    def set_subset_policy(
        self, space_id: str, device_id: str, req: SubsetPolicyRequest
    ) -> SubsetResponse:
        """Replace the calling device's policy; the cloud chooses again at once, and the
        device hears what entered and left at its next pull."""
        with self.store.session(space_id, lock=True) as s:
            self._check_open(s, space_id)
            self._enrolled(s, space_id, device_id)
            self.subsets.set_policy(s, space_id, device_id, req.policy)
            self.subsets.evaluate(s, space_id, device_id, force=True)
            return SubsetResponse(subset=self.subsets.view(s, space_id, device_id))

    def pin(self, space_id: str, device_id: str, req: PinRequest) -> SubsetResponse:
        """Pin (or unpin) a record to the calling device; the cloud chooses again at once."""
        with self.store.session(space_id, lock=True) as s:
            self._check_open(s, space_id)
            self._enrolled(s, space_id, device_id)
            self.subsets.pin(s, space_id, device_id, req.record_id, req.pinned)
            self.subsets.evaluate(s, space_id, device_id, force=True)
            return SubsetResponse(subset=self.subsets.view(s, space_id, device_id))

    def index_catch_up(self, space_id: str) -> int:
        """Index what a space's search indexes miss, now, in this thread (0 when another
        process is indexing it)."""
        return self.search.catch_up(space_id)

    def index_pending(self) -> int:
        """Index, now and in this thread, every space a commit of this process owed an
        index catch-up (``cloud.indexer``; what the background thread would do)."""
        return self.indexer.run_pending()

    def reindex(self) -> int:
        """Index, in every open space, what the search indexes miss, including records
        whose vector another embedding model made, and spaces pushed to through other
        processes: the worker's reindex job (``memsync cloud worker``). A space another
        process is indexing right now is skipped. Returns how many records were indexed."""
        with self.store.session() as s:
            spaces = s.space_ids()
        return sum(self.search.catch_up(space_id) for space_id in spaces)

    def record_status(self, space_id: str, record_id: str) -> RecordState:
        """A live record's state (no content), or its skeleton when forgotten."""
        with self.store.session(space_id) as s:
            return record_state(s, space_id, record_id)

    def as_of(self, space_id: str, record_id: str, when: datetime) -> AsOf:
        """The version and lifecycle that were current at ``when`` (no content)."""
        with self.store.session(space_id) as s:
            return as_of(s, space_id, record_id, when)

    # --- export ---------------------------------------------------------------------

    def export(self, space_id: str, device_id: str, req: ExportRequest) -> Iterator[bytes]:
        """Start export ``req.export_id`` of the caller's whole space: the sealed stream's
        frames (``protocol.export.stream``), for the asking device only.

        Everything that can refuse runs now, before the iterator is returned, so a
        refusal is a plain error and changes nothing: the stores must answer (waiting up
        to ``export_wait``, then ``ExportUnavailable`` naming the store), the account key
        must verify the proof (``StrongAuthRequired``) and the export id must be new
        (``ExportIdUsed``). The export is then in the ``exports`` log; iterating reads the
        package from one snapshot and records how it ended (complete, failed with the
        reason, or abandoned when the iterator is closed before its end)."""
        self._await_export_stores(space_id)
        now = self._clock()
        with self.store.session(space_id, lock=True) as s:
            device = self._enrolled(s, space_id, device_id)
            account_key = s.account_key(space_id)
            if account_key is None:
                raise StrongAuthRequired(
                    f"export {req.export_id}: space {space_id} has no account key registered, "
                    "so nothing can prove the account passphrase; register it first "
                    "(nothing was exported)"
                )
            if not verify_export(
                account_key, req.proof, space_id, req.export_id, req.include_sensitive
            ):
                part = "with" if req.include_sensitive else "without"
                raise StrongAuthRequired(
                    f"export {req.export_id}: the proof does not verify against the account "
                    f"key of space {space_id} for an export {part} the sensitive classes "
                    "(wrong passphrase, or a proof made for another export); nothing was "
                    "exported"
                )
            if not s.start_export(space_id, req.export_id, device_id, now, req.include_sensitive):
                raise ExportIdUsed(
                    f"export id {req.export_id} already started an export of space "
                    f"{space_id}; an export id starts one export only (make a new id and a "
                    "new proof; nothing was exported)"
                )
        stream_key = self._random(KEY_BYTES)
        sealer = StreamSealer(stream_key, self._random(PREFIX_BYTES), req.export_id)
        header = PackageHeader(
            export_id=req.export_id,
            exported_at=now,
            space_id=space_id,
            includes_sensitive=req.include_sensitive,
        )
        sealed_key = SealedBox(PublicKey(device.public_key)).encrypt(stream_key)
        return self._export_frames(header, sealer, sealed_key)

    def package(self, header: PackageHeader) -> Iterator[str]:
        """The package text of ``header``'s space, line by line, from one snapshot held
        while it is iterated (closed with the iterator). No check, no seal, no log: the
        export route's reader, and the builder tests' and benches' way in."""

        def forgotten_now(key_ids: set[str]) -> set[str]:
            with self.store.session() as fresh:
                return fresh.forgotten_key_ids(header.space_id, key_ids)

        with self.store.snapshot() as s:
            builder = PackageBuilder(s, self.vault, header.space_id, forgotten_now=forgotten_now)
            yield from builder.lines(header)

    def _export_frames(
        self, header: PackageHeader, sealer: StreamSealer, sealed_key: bytes
    ) -> Iterator[bytes]:
        """The frames; the outcome is logged before the last frame leaves (complete, or
        failed with the reason), or as abandoned when closed before that."""
        logged = False
        try:
            yield sealer.header(sealed_key)
            try:
                for frame in sealer.seal_all(line.encode() for line in self.package(header)):
                    if sealer.closed:  # the final frame: the whole package was read
                        logged = self._finish_export(header, "complete")
                    yield frame
            except Exception as exc:  # every failure ends the stream with its reason
                reason = self._export_failure(header, exc)
                logged = self._finish_export(header, f"failed: {reason}")
                yield sealer.error(reason)
        finally:
            if not logged:  # closed before its end: the client went away
                self._finish_export(header, "abandoned")

    def _export_failure(self, header: PackageHeader, exc: Exception) -> str:
        where = f"export {header.export_id} of {header.space_id}"
        if isinstance(exc, ExportIncomplete):
            reason = str(exc)
        elif isinstance(exc, KeyStoreError | sqlite3.Error):
            reason = f"the key store {self.key_store.path} cannot be read ({exc})"
        elif isinstance(exc, DBAPIError):
            reason = f"the record store {self._store_name} cannot be read ({exc.orig})"
        else:
            log.exception("%s failed", where)
            reason = f"the export failed ({type(exc).__name__}: {exc})"
        log.error("%s stopped: %s", where, reason)
        return f"{reason}; nothing partial is kept, try the export again with a new id"

    def _finish_export(self, header: PackageHeader, outcome: str) -> bool:
        """Log how the export ended (once: a later call changes nothing); True."""
        try:
            with self.store.session() as s:
                s.finish_export(header.space_id, header.export_id, self._clock(), outcome)
        except Exception:  # the stream's end must not fail on its log line
            log.exception("export %s: its outcome %r was not logged", header.export_id, outcome)
        try:  # a forget during the export may owe the record store's WAL truncation
            self.ensure_destroyed()
        except Exception:
            log.exception("export %s: the sweep after it failed", header.export_id)
        return True

    @property
    def _store_name(self) -> str:
        """The record store's URL without its password (for errors and logs)."""
        return make_url(self.config.store_url).render_as_string(hide_password=True)

    def _export_store_problem(self, space_id: str) -> str | None:
        """Why a store the export of ``space_id`` needs cannot be read now (None: both can)."""
        try:
            with self.store.session() as s:
                s.space_exists(space_id)
        except DBAPIError as exc:
            return f"the record store {self._store_name} cannot be read ({exc.orig})"
        try:
            self.key_store.check_space(space_id)
        except KeyStoreError as exc:
            return str(exc)
        return None

    def _await_export_stores(self, space_id: str) -> None:
        """Return once both stores answer; wait (``config.sleep``) up to
        ``config.export_wait`` seconds in all, then refuse ``ExportUnavailable``."""
        waited, step = 0.0, EXPORT_FIRST_WAIT
        while True:
            problem = self._export_store_problem(space_id)
            if problem is None:
                return
            if waited >= self.config.export_wait:
                raise ExportUnavailable(
                    f"export of {space_id}: {problem}; waited {waited:g} s for it. Nothing "
                    "was exported; try again later"
                )
            pause = min(step, self.config.export_wait - waited)
            log.warning("export of %s waits %g s: %s", space_id, pause, problem)
            self.config.sleep(pause)
            waited += pause
            step = min(step * 2, EXPORT_MAX_STEP)

    # --- the end of an account ------------------------------------------------------

    def end_space(self, space_id: str, reason: EndReason) -> AccountEnd:
        """End an account: everything of the space is forgotten in one transaction under
        its lock (``cloud.account_end``), then every key of the space is destroyed. An
        ended space is answered as it is (nothing changes)."""
        now = self._clock()
        moved = False
        with self.store.session(space_id, lock=True) as s:
            if not s.space_exists(space_id):
                raise NotFound(f"space {space_id} does not exist")
            if s.space_end(space_id) is None:
                vault = self.vault.for_push()
                first = s.last_seq(space_id)
                end_in_transaction(s, vault, space_id, reason, now)
                vault.write_keys()
                moved = self._announce(s, space_id, first)
                log.warning("space %s ended (%s) at %s", space_id, reason.value, now.isoformat())
        self.search.evict(space_id)
        if moved:
            self.live.changed(space_id)  # its live pulls wake and hear 410
        self._checkpoint_owed = True  # receipts rewritten, rows deleted: truncate the WAL
        self.ensure_destroyed()
        status = self.account_status(space_id)
        assert status is not None
        return status

    def account_status(self, space_id: str) -> AccountEnd | None:
        """How an ended account stands (its keys, its devices still to wipe); None while
        the space has not ended."""
        with self.store.session() as s:
            if not s.space_exists(space_id):
                raise NotFound(f"space {space_id} does not exist")
            end = s.space_end(space_id)
            return None if end is None else account_end(s, end)

    def delete_account(
        self, space_id: str, device_id: str, req: DeleteAccountRequest
    ) -> DeleteAccountResponse:
        """The user deletes the account from a device, proving it with the account key
        (``protocol.strongauth``); without a registered key, or with a proof that does
        not verify for this space and request, ``StrongAuthRequired`` and nothing
        changes."""
        self._check_writable(self._clock(), "deleting the account")
        with self.store.session(space_id) as s:
            self._enrolled(s, space_id, device_id)
            account_key = s.account_key(space_id)
        if account_key is None:
            raise StrongAuthRequired(
                f"space {space_id} has no account key registered, so deleting the account "
                "cannot be authenticated: register an account passphrase first (nothing was "
                "changed)"
            )
        if not strongauth.verify_delete_account(account_key, req.proof, space_id, req.request_id):
            raise StrongAuthRequired(
                f"deleting the account of space {space_id} needs strong authentication: the "
                f"proof of request {req.request_id} does not verify against this account's "
                "key (nothing was changed)"
            )
        end = self.end_space(space_id, EndReason.DELETED)
        return DeleteAccountResponse(
            space_id=space_id, ended_at=end.ended_at, pending=list(end.pending)
        )

    def _destroy_ended_spaces(self) -> int:
        """Destroy every key of each ended space whose keys may remain; how many it did."""
        with self.store.session() as s:
            ended = s.ended_spaces_with_keys()
        done = 0
        for end in ended:
            try:
                self.key_store.destroy_space(end.space_id)
            except KeyStoreError as exc:  # the end stays committed; the next sweep retries
                log.error("ended space %s: %s", end.space_id, exc)
                continue
            with self.store.session() as s:
                s.mark_space_keys_destroyed(end.space_id, self._clock())
            done += 1
        return done

    def _enrolled(self, s: StoreSession, space_id: str, device_id: str) -> DeviceRow:
        """The caller's device row, once its space is known not to have ended
        (``AccountEnded``) and the device to be enrolled in it (``Unauthorized``)."""
        self._check_open(s, space_id)
        device = s.device(space_id, device_id)
        if device is None:
            raise Unauthorized(f"device {device_id} is not enrolled in this space")
        return device

    def _check_open(self, s: StoreSession, space_id: str) -> None:
        end = s.space_end(space_id)
        if end is not None:
            raise self._ended(end)

    def _ended(self, end: SpaceEndRow) -> AccountEnded:
        return AccountEnded(end.space_id, end.ended_at, why(end.reason, self.config.region))

    @staticmethod
    def _end_row(end: AccountEnd) -> SpaceEndRow:
        return SpaceEndRow(end.space_id, end.ended_at, end.reason.value, end.keys_destroyed_at)

    # --- the service's closing ------------------------------------------------------

    def _read_service_state(self) -> ServiceStateRow | None:
        with self.store.session() as s:
            return s.service_state()

    def _mode(self, now: datetime | None = None) -> ServiceMode:
        now = self._clock() if now is None else now
        return closing.mode_at(self.closing.state(now), now)

    def _check_writable(self, now: datetime, what: str) -> None:
        """``ServiceClosed`` from ``closes_at`` on: the service takes no more writes."""
        state = self.closing.state(now)
        if closing.mode_at(state, now) in (ServiceMode.EXPORT_ONLY, ServiceMode.CLOSED):
            assert state is not None
            raise ServiceClosed(closing.refusal(state, what))

    def service_status(self) -> ServiceStatus:
        """The region and where the service is in a shutdown (``GET /v1/service``)."""
        now = self._clock()
        return closing.status(self.closing.state(now), self.config.region, now)

    def announce_closing(
        self, closes_at: datetime, export_until: datetime | None = None
    ) -> ServiceStatus:
        """Put the service into closing mode: everything works until ``closes_at``, export
        stays open until ``export_until`` (default: ``closes_at``), then every account
        ends. ``ClosingRefused`` (nothing stored) for dates in the past or out of order."""
        now = self._clock()
        state = closing.announced(self.config.region, now, closes_at, export_until)
        with self.store.session() as s:
            s.put_service_state(state)
        self.closing.changed(state, now)
        log.warning(
            "the service closes at %s; export stays open until %s",
            closes_at.isoformat(),
            state.export_until.isoformat() if state.export_until else closes_at.isoformat(),
        )
        return closing.status(state, self.config.region, now)

    def cancel_closing(self) -> ServiceStatus:
        """Call off an announced closing (only before ``closes_at``)."""
        now = self._clock()
        with self.store.session() as s:
            state = closing.cancelled(s.service_state(), self.config.region, now)
            s.put_service_state(state)
        self.closing.changed(state, now)
        log.warning("the closing of the service was cancelled")
        return closing.status(state, self.config.region, now)

    def enforce_closing(self) -> list[AccountEnd]:
        """Once the service is closed (after ``export_until``), end every space that has
        not ended (reason ``service_shutdown``), exactly like a deletion. Idempotent; runs
        at start-up, on requests and from the CLI. Another thread of this process already
        at it: returns at once (its ends are not listed)."""
        now = self._clock()
        state = self.closing.state(now)
        if closing.mode_at(state, now) is not ServiceMode.CLOSED:
            return []
        if not self._enforcing.acquire(blocking=False):
            return []
        try:
            with self.store.session() as s:
                open_spaces = s.space_ids()
            ends = [self.end_space(space, EndReason.SERVICE_SHUTDOWN) for space in open_spaces]
            self.closing.enforced(state)
            return ends
        finally:
            self._enforcing.release()

    def closing_tick(self) -> None:
        """What each HTTP request runs first (in a worker thread, only when needed): read
        the stored state if the cached copy is stale, and end every account once closed."""
        now = self._clock()
        self.closing.state(now)
        if self.closing.owes_enforcement(now):
            self.enforce_closing()
