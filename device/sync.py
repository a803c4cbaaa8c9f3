"""The device side of the sync algorithm (docs/protocol.md, "The sync algorithm").

Invariants:
- An op leaves the queue only in the local transaction that stores its receipt;
  a receipt for an op the device re-sent after a crash (``duplicate``) is stored
  like any other, and no effect is re-executed.
- A pulled page is applied and the cursor moved in ONE local transaction; a change
  that does not open aborts the whole page and the cursor stays where it was.
- Content already held is never rewritten; content this device forgot is never
  stored again (skeletons and episode/artifact tombstones win over later changes).
- A pulled ``record_state`` is the server's word on the record's whole state and
  overwrites the local one (lifecycle, current version, usage, flags).
- Key destruction shreds through ``device.shred`` (the record, its episodes, the
  artifacts named and everything this device derived from it) and records the event id in
  ``pending_acks`` in the same transaction; the WAL is checkpointed after the commit,
  then the ack is sent; acks still pending are sent first at the next sync.
- ``resync_required`` (the cursor is below the cloud's compacted feed floor) rebuilds
  the subset from the start of the feed behind a persisted marker; one final local
  transaction shreds every synced item the cloud did not send, moves the cursor and
  clears the marker. Queued ops and the pending items they name are never touched by
  it; a crash mid-resync restarts it from scratch.
- Nothing is shredded by inference; only on the cloud's own word: a key-destruction
  event, a pulled ``permanently_forgotten`` state, a ``forgotten`` refusal, a resync
  that no longer sends a synced item, or the cloud's record status. A ``duplicate``
  receipt says only that the op was applied before this delivery: for a record a
  resync kept unseen (its create op was queued; ``resync_kept``), the cloud is asked
  for the record's status before the receipt is stored, and its skeleton shreds it.
- A push answered ``pull_required`` pulls and pushes again while each pull
  acknowledges something new, at most ``MAX_PULL_ROUNDS`` times in one push; a pull
  that acknowledged nothing new, or the bound, ends the sync with an error that says
  which (the ops stay queued).
- A refusal ``forgotten`` is the cloud's word that the record is permanently
  forgotten: the record is shredded here at once (its key-destruction event may have
  been compacted away before this device heard it).
- A push the cloud refuses with 503 ``service_closed`` (the service closed; only
  export and reads stay open) changes nothing here: the ops stay queued, the report
  says why (``push_held``), and the pull goes on.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any, Never, NoReturn

from pydantic import ValidationError

from device import candidates, catalog, effects, faults, provisional, search, shred, store
from device import subset as subset_of
from device.client import CloudClient
from device.db import Database
from device.errors import (
    ChangeDoesNotOpen,
    PullRequired,
    PushDidNotSettle,
    ResyncRequired,
    ServerError,
    ServerRefused,
    ServiceClosed,
    UnknownChangeKind,
)
from device.facts import current_content, episode_facts
from device.keys import (
    SealedItem,
    SealedKeyDoesNotOpen,
    load_private_key,
    open_item,
    open_sealed_key,
)
from device.sync_state import SyncState
from device.views import SyncReport
from protocol.errors import SealError
from protocol.messages import (
    MAX_PULL_PAGE,
    SUBSET_SINCE,
    AckRequest,
    AckResponse,
    AnyChange,
    ArtifactChange,
    EpisodeChange,
    EpisodeContent,
    KeyDestruction,
    ProjectChange,
    PullRequest,
    PullResponse,
    PushRequest,
    PushResponse,
    RecordState,
    RecordStateChange,
    RecordUse,
    RecordVersionChange,
    SubsetChange,
)
from protocol.model import ArtifactContent, LifecycleState, RecordContent
from protocol.operations import MAX_OPS_PER_PUSH, OPERATION_ADAPTER, Receipt, ReceiptStatus
from protocol.rules import derivation_closure
from protocol.sentences import normalise, split_sentences
from protocol.versioned import newer_fields

FORGOTTEN = LifecycleState.FORGOTTEN.value
# A refused forget still leaves no content anywhere: the cloud already forgot the
# record, or never held it.
_HARMLESS_FORGET_REFUSALS = {"forgotten", "unknown_record"}
_CREATING = {"remember", "infer"}
# the ops that create a record (a consolidation creates the cloud's own, on a device too);
# ``store.note_kept`` names the same kinds
_RECORD_CREATING = _CREATING | {"consolidate"}
_FORGOTTEN_REFUSAL = "forgotten"


def code_of(receipt: Receipt) -> str | None:
    """The refusal code of a receipt (a duplicate's original one), else None."""
    if receipt.status is ReceiptStatus.REFUSED or (
        receipt.status is ReceiptStatus.DUPLICATE
        and receipt.original_status is ReceiptStatus.REFUSED
    ):
        return receipt.code.value if receipt.code is not None else None
    return None


_RECORD_CHANGES = (RecordVersionChange, RecordStateChange)
# how often a resync starts over when compaction overtakes it, before giving up
_RESYNC_ATTEMPTS = 3
# how many pulls one push may need when forgets keep landing between its pull and push
MAX_PULL_ROUNDS = 8


def _sent_items(page: PullResponse) -> list[tuple[str, str]]:
    """The (kind, id) of every record, episode and artifact a page carries."""
    items: list[tuple[str, str]] = []
    for change in page.changes:
        match change:
            case RecordVersionChange() | RecordStateChange():
                items.append(("record", change.record_id))
            case EpisodeChange():
                items.append(("episode", change.episode_id))
            case ArtifactChange():
                items.append(("artifact", change.artifact_id))
            case ProjectChange() | KeyDestruction() | SubsetChange():
                pass  # names no item this device holds for the resync to keep
            case _:
                refuse_unknown_change(change)
    return items


def refuse_unknown_change(change: Never) -> NoReturn:
    """The ``case _`` of every interpreter of pulled changes: unreachable for the type
    checker (each kind has its case), and at run time a change no case matched refuses
    the whole page, so the cursor never moves past a change this device did not apply."""
    raise UnknownChangeKind(
        getattr(change, "kind", type(change).__name__), getattr(change, "seq", None)
    )


def _no_randomness(n: int) -> bytes:
    raise RuntimeError("pulled content arrives sealed; the device makes no key for it")


class SyncSession:
    def __init__(
        self,
        db: Database,
        client: CloudClient,
        now: Callable[[], str],
        random_bytes: Callable[[int], bytes] = _no_randomness,
    ) -> None:
        self.db = db
        self.client = client
        self.now = now
        # fresh data keys for this device's own versions the cloud numbers otherwise
        self.random_bytes = random_bytes
        self.report = SyncReport()
        self._reported: list[RecordUse] = []  # uses the pull in flight reports

    # --- the algorithm ----------------------------------------------------------------

    def run(self) -> SyncReport:
        self.send_acks()
        self.push()
        self.evict_deferred()
        self.pull()
        self.report.closing = self.client.closing
        return self.report

    # --- acks ------------------------------------------------------------------------

    def send_acks(self) -> None:
        pending = store.pending_acks(self.db)
        for start in range(0, len(pending), MAX_PULL_PAGE):
            chunk = pending[start : start + MAX_PULL_PAGE]
            self.client.post("/v1/ack", AckRequest(event_ids=chunk), AckResponse)
            with self.db.atomic():
                store.drop_acks(self.db, chunk)
            self.report.acked.extend(chunk)

    # --- push ------------------------------------------------------------------------

    def push(self) -> None:
        pulls = 0
        while True:
            rows = store.queue_batch(self.db, MAX_OPS_PER_PUSH)
            if not rows:
                return
            # the ops are raw JSON, so they are built for the version they go out in
            request = functools.partial(self._push_request, rows)
            try:
                response = self.client.post("/v1/push", request, PushResponse)
            except PullRequired as exc:
                self._pull_before_push(exc, pulls)
                pulls += 1
                continue
            except ServiceClosed as exc:
                self.report.push_held = exc.message  # the queue stays; pulls go on
                return
            self._check_receipts(rows, response.receipts)
            faults.reached("push_answered")  # a test may kill the process right here
            forgotten = self._ask_about_kept(rows, response.receipts)
            shredded_before = self._shred_count()
            with self.db.atomic():
                for row, receipt in zip(rows, response.receipts, strict=True):
                    self._apply_receipt(row, receipt, forgotten)
            self.report.pushed += len(rows)
            if self._shred_count() > shredded_before:
                self.db.checkpoint()

    def _pull_before_push(self, refusal: ServerRefused, pulls: int) -> None:
        """The cloud holds key destructions this device has not acknowledged: pull (which
        shreds and acknowledges them) so the push can go again. A forget landing
        elsewhere between that pull and the push asks for another round; each round must
        acknowledge something new, and there are at most ``MAX_PULL_ROUNDS``."""
        if pulls >= MAX_PULL_ROUNDS:
            raise PushDidNotSettle(
                f"the cloud asked for a pull before this push {pulls + 1} times in one sync "
                f"(the bound is MAX_PULL_ROUNDS={MAX_PULL_ROUNDS}); each pull acknowledged "
                "new forgets made elsewhere meanwhile. Nothing was lost: the ops stay "
                "queued and the next sync sends them",
                status=refusal.status,
            )
        before = self._progress()
        self.report.pull_required = True
        self.report.pulls_before_push += 1
        self.pull()
        if pulls and self._progress() == before:
            raise PushDidNotSettle(
                f"the cloud asked again for a pull before this push (round {pulls + 1}), but "
                f"the pull brought nothing new to acknowledge: {refusal.message}. Nothing "
                "was lost: the ops stay queued and the next sync sends them",
                status=refusal.status,
            )

    def _ask_about_kept(self, rows: list[Any], receipts: list[Receipt]) -> set[str]:
        """The records, among those a resync kept unseen, whose create op the cloud just
        answered ``duplicate`` and which its record status says are forgotten. Asked
        before the receipts' transaction (no local lock is held across the network);
        a duplicate alone never means forgotten."""
        duplicated = [
            row["record_id"]
            for row, receipt in zip(rows, receipts, strict=True)
            if receipt.status is ReceiptStatus.DUPLICATE
            and receipt.original_status in (None, ReceiptStatus.APPLIED, ReceiptStatus.CONFLICT)
            and row["kind"] in _RECORD_CREATING
            and row["record_id"]
        ]
        forgotten: set[str] = set()
        for record_id in sorted(store.kept_records(self.db, duplicated)):
            try:
                state = self.client.get(f"/v1/records/{record_id}", RecordState)
            except ServerRefused as exc:
                if exc.status == 404:  # unknown there: nothing to shred on its word
                    continue
                raise
            if state.lifecycle_state is LifecycleState.FORGOTTEN:
                forgotten.add(record_id)
        return forgotten

    def _progress(self) -> tuple[int, bool, int]:
        """What a pull before a push can newly do: acknowledge, resync, shred."""
        return len(self.report.acked), self.report.resynced, self._shred_count()

    def _shred_count(self) -> int:
        return len(self.report.shredded) + len(self.report.resync_removed)

    def _sealed_version(self, row: Any) -> RecordContent:
        version = store.version_row(self.db, row["record_id"], int(row["version"] or 1))
        if version is None:
            raise ServerError(
                f"queued op {row['op_id']} names record {row['record_id']} v{row['version']}, "
                "which this device no longer holds"
            )
        return store.open_version(self.db, version)

    def _push_request(self, rows: list[Any], version: int) -> PushRequest:
        return PushRequest(ops=[self._wire_op(row, version) for row in rows])

    def _wire_op(self, row: Any, version: int) -> dict[str, Any]:
        """The wire op: the queued JSON plus the text re-read from its sealed row."""
        op = json.loads(row["op_json"])
        op.setdefault("initiated_by", "user")  # ops queued before protocol issue 3
        kind = row["kind"]
        if kind == "add_episode":
            episode = store.episode_row(self.db, row["episode_id"])
            if episode is None:
                raise ServerError(
                    f"queued op {row['op_id']} names episode {row['episode_id']}, "
                    "which this device no longer holds"
                )
            op["text"] = store.open_episode(self.db, episode).text
        elif kind in ("remember", "correct", "revise_rule"):
            content = self._sealed_version(row)
            op["text"] = content.text
            if kind == "remember" and content.subject is not None:
                op["subject"] = content.subject
        elif kind in ("infer", "consolidate"):
            op["content"] = self._sealed_version(row).model_dump(mode="json")
        elif kind == "add_artifact":
            artifact = catalog.artifact_row(self.db, row["artifact_id"])
            if artifact is None:
                raise ServerError(
                    f"queued op {row['op_id']} names artifact {row['artifact_id']}, "
                    "which this device no longer holds"
                )
            op["payload"] = catalog.open_artifact(self.db, artifact).payload
        validated = OPERATION_ADAPTER.validate_python(op)
        result: dict[str, Any] = validated.model_dump(mode="json")
        for name in newer_fields(type(validated), version):
            result.pop(name, None)  # e.g. a correction's base_version: an older cloud lacks it
        return result

    @staticmethod
    def _check_receipts(rows: list[Any], receipts: list[Receipt]) -> None:
        if len(receipts) != len(rows):
            raise ServerError(
                f"push of {len(rows)} ops answered {len(receipts)} receipts; nothing was stored"
            )
        for position, (row, receipt) in enumerate(zip(rows, receipts, strict=True)):
            if receipt.index != position or (
                receipt.op_id is not None and receipt.op_id != row["op_id"]
            ):
                raise ServerError(
                    f"receipt {position} is for op {receipt.op_id} (index {receipt.index}), "
                    f"expected op {row['op_id']}; nothing was stored"
                )

    def _apply_receipt(self, row: Any, receipt: Receipt, forgotten: set[str]) -> None:
        """Store one receipt and apply it; ``forgotten`` names the records the cloud's
        record status said are forgotten (``_ask_about_kept``)."""
        store.store_receipt(
            self.db,
            op_id=row["op_id"],
            kind=row["kind"],
            record_id=row["record_id"],
            episode_id=row["episode_id"],
            receipt_json=receipt.model_dump_json(),
            stored_at=self.now(),
        )
        outcome = receipt.status
        if outcome is ReceiptStatus.DUPLICATE:
            self.report.duplicates += 1
            outcome = receipt.original_status or ReceiptStatus.APPLIED
        if outcome is ReceiptStatus.CONFLICT and receipt.effect is not None:
            # applied, and flagged: it raced a change made elsewhere; both are kept
            self.report.conflicts.append((row["op_id"], receipt.reason or ""))
            outcome = ReceiptStatus.APPLIED
        if outcome is ReceiptStatus.APPLIED and row["record_id"] and len(receipt.versions) > 1:
            local = provisional.queued_version(self.db, row["op_id"])
            if local is not None:  # the cloud may have numbered this device's version otherwise
                provisional.file_as(
                    self.db,
                    row["record_id"],
                    local,
                    receipt.versions[-1],
                    receipt.versions[0],
                    self.random_bytes,
                )
        store.dequeue(self.db, row["op_id"])
        kind = row["kind"]
        if kind in _RECORD_CREATING:
            store.drop_kept(self.db, row["record_id"])
            if row["record_id"] in forgotten:
                # the cloud's own word: its status for the record is a skeleton
                self._shred_on_status(row["record_id"])
                return
        if outcome is ReceiptStatus.APPLIED:
            self.report.applied += 1
            state, reason = SyncState.SYNCED, None
        else:
            code = receipt.code.value if receipt.code is not None else outcome.value
            reason = f"{code}: {receipt.reason or 'no reason given'}"
            self.report.refused.append((row["op_id"], code, receipt.reason or ""))
            state = SyncState.REFUSED
            if kind == "forget_permanently" and code in _HARMLESS_FORGET_REFUSALS:
                state, reason = SyncState.SYNCED, None
        if kind == "add_episode":
            if store.episode_row(self.db, row["episode_id"]) is not None:
                store.set_episode_sync(self.db, row["episode_id"], state, reason)
            return
        if kind == "add_artifact":
            if catalog.artifact_row(self.db, row["artifact_id"]) is not None:
                catalog.set_artifact_sync(self.db, row["artifact_id"], state, reason)
            return
        record = store.record_row(self.db, row["record_id"]) if row["record_id"] else None
        if record is None:
            return
        if code_of(receipt) == _FORGOTTEN_REFUSAL and record["lifecycle"] != FORGOTTEN:
            # the cloud forgot it: shred it now (its key destruction may be compacted)
            self._shred_closure(row["record_id"], self.now())
            return
        if kind in _CREATING:
            if record["lifecycle"] != FORGOTTEN:  # the skeleton's own forget op decides
                store.set_record_state(
                    self.db, row["record_id"], sync_state=state, refusal_reason=reason
                )
        elif kind == "forget_permanently":
            store.set_record_state(
                self.db, row["record_id"], sync_state=state, refusal_reason=reason
            )
        elif state is SyncState.REFUSED:
            # The local effect stands until the server's record_state says otherwise.
            store.note_refusal(self.db, row["record_id"], f"{kind} {reason}")

    # --- the subset ---------------------------------------------------------------------

    def evict_deferred(self) -> None:
        """Records that left the subset while an operation on them was queued leave now
        that the queue was sent."""
        with self.db.atomic():
            done = subset_of.evict_deferred(self.db)
        if done:
            self.report.left.extend(done)
            self.db.checkpoint()

    def _subset_change(self, change: SubsetChange) -> None:
        at = change.at.isoformat()
        if change.entered:
            subset_of.entered(self.db, change.record_id, change.reason or "chosen", at)
            self.report.entered.append(change.record_id)
        elif subset_of.leave(
            self.db, change.record_id, change.episode_ids, change.artifact_ids, at
        ):
            self.report.left.append(change.record_id)
        elif change.record_id in subset_of.deferred(self.db):
            self.report.left_later.append(change.record_id)

    # --- pull ------------------------------------------------------------------------

    def pull(self) -> None:
        if store.get_meta(self.db).resync_started_at is not None:
            self.resync()  # a resync a crash interrupted starts again from scratch
            return
        while True:
            cursor = store.get_meta(self.db).pull_cursor
            try:
                page = self._pull_page(cursor)
            except ResyncRequired:
                self.resync()
                return
            faults.reached("pull_answered")
            self._apply_page(page, resyncing=False)
            if not page.has_more:
                break
        self.send_acks()

    def _pull_page(self, cursor: str | None) -> PullResponse:
        uses = subset_of.unreported(self.db)

        def request(version: int) -> PullRequest:
            self._reported = uses if version >= SUBSET_SINCE else []
            return PullRequest(cursor=cursor, limit=MAX_PULL_PAGE, used=self._reported)

        return self.client.post("/v1/pull", request, PullResponse)

    def _apply_page(self, page: PullResponse, *, resyncing: bool) -> None:
        """Apply one page and move the cursor (a resync notes what it saw instead) in
        one local transaction; checkpoint the WAL after it if anything was shredded."""
        shredded_before = len(self.report.shredded) + len(self.report.left)
        with self.db.atomic():
            subset_of.mark_reported(self.db, self._reported)
            self._reported = []
            private_key = load_private_key(store.get_meta(self.db).private_key)
            for change in page.changes:
                self._apply_change(change, private_key)
            # index the current versions this page brought, embedded in one batch
            search.catch_up(
                self.db,
                {c.record_id for c in page.changes if isinstance(c, _RECORD_CHANGES)},
            )
            search.merge_if_needed(self.db)
            if resyncing:
                store.note_seen(self.db, _sent_items(page))
            else:
                store.set_cursor(self.db, page.cursor)
        self.report.pulled += len(page.changes)
        if len(self.report.shredded) + len(self.report.left) > shredded_before:
            self.db.checkpoint()

    # --- resync ----------------------------------------------------------------------

    def resync(self) -> None:
        """Rebuild this device's subset from the start of the cloud's feed.

        The marker is committed first; pages are applied as usual (held content is not
        rewritten, forgotten content is not stored again) and what they carried is
        noted; then ONE transaction shreds every synced record, episode and artifact the
        cloud did not send, moves the cursor and clears the marker. Queued operations
        and the pending items they name are untouched (the push sends them). A crash
        anywhere leaves the marker set, and the next sync starts again from scratch.
        """
        self.report.resynced = True
        for _attempt in range(_RESYNC_ATTEMPTS):
            with self.db.atomic():
                store.begin_resync(self.db, self.now())
            try:
                cursor = self._resync_pages()
            except ResyncRequired:
                # compaction moved the floor past this resync's own cursor: start over
                continue
            faults.reached("resync_pulled")
            self._finish_resync(cursor)
            self.send_acks()
            return
        raise ServerError(
            f"the cloud answered resync_required {_RESYNC_ATTEMPTS} times during a resync "
            "from the start of its feed; the resync will start again at the next sync"
        )

    def _resync_pages(self) -> str:
        cursor: str | None = None
        while True:
            page = self._pull_page(cursor)
            faults.reached("pull_answered")
            self._apply_page(page, resyncing=True)
            cursor = page.cursor
            if not page.has_more:
                return cursor

    def _finish_resync(self, cursor: str) -> None:
        at = self.now()
        with self.db.atomic():
            unseen = store.unseen_synced(self.db)
            self._shred(artifact_ids=unseen.artifact_ids, at=at)
            for record_id in unseen.record_ids:
                if (row := store.record_row(self.db, record_id)) and row["lifecycle"] != FORGOTTEN:
                    self._shred_closure(record_id, at)
            self._shred(episode_ids=unseen.episode_ids, at=at)
            store.note_kept(self.db)
            store.finish_resync(self.db, cursor)
        self.report.resync_removed = [
            *unseen.record_ids,
            *unseen.episode_ids,
            *unseen.artifact_ids,
        ]
        if self.report.resync_removed:
            self.db.checkpoint()

    def _apply_change(self, change: AnyChange, private_key: Any) -> None:
        match change:
            case RecordVersionChange():
                self._record_version(change, private_key)
            case RecordStateChange():
                self._record_state(change)
            case EpisodeChange():
                self._episode(change, private_key)
            case ArtifactChange():
                self._artifact(change, private_key)
            case ProjectChange():
                catalog.set_project(self.db, change.project, change.open, change.at.isoformat())
            case KeyDestruction():
                self._key_destruction(change)
            case SubsetChange():
                self._subset_change(change)
            case _:
                refuse_unknown_change(change)

    def _context(self) -> effects.Context:
        return effects.Context(
            self.db, _no_randomness, datetime.fromisoformat(self.now()), self._space()
        )

    def _space(self) -> str:
        space = store.get_meta(self.db).space_id
        if space is None:
            raise ServerError("pulled changes before enrollment; this device has no space")
        return space

    def _open_dek(self, private_key: Any, change: Any, what: str) -> bytes:
        try:
            return open_sealed_key(private_key, change.sealed_key)
        except SealedKeyDoesNotOpen as exc:
            raise ChangeDoesNotOpen(
                f"pulled change seq {change.seq} ({what}): {exc}; the page was not applied "
                "and the cursor did not move"
            ) from exc

    def _open(
        self, private_key: Any, change: Any, what: str, kind: str, item_id: str, version: int
    ) -> tuple[bytes, bytes]:
        """The DEK and the opened plaintext of a pulled sealed item."""
        dek = self._open_dek(private_key, change, what)
        try:
            plain = open_item(dek, change.sealed_content, self._space(), kind, item_id, version)
        except SealError as exc:
            raise ChangeDoesNotOpen(
                f"pulled change seq {change.seq} ({what}) does not open: {exc}; "
                "the page was not applied and the cursor did not move"
            ) from exc
        return dek, plain

    @staticmethod
    def _parse(change: Any, what: str, parse: Callable[[bytes], Any], plain: bytes) -> Any:
        try:
            return parse(plain)
        except ValidationError as exc:
            raise ChangeDoesNotOpen(
                f"pulled change seq {change.seq} ({what}) does not open: {exc}; "
                "the page was not applied and the cursor did not move"
            ) from exc

    def _store_key(self, key_id: str, dek: bytes, what: str) -> None:
        held = store.get_key(self.db, key_id)
        if held is None:
            store.put_key(self.db, key_id, dek, "cloud")
        elif held != dek:
            raise ChangeDoesNotOpen(
                f"{what}: key {key_id} is already held with different bytes; "
                "the page was not applied"
            )

    def _record_version(self, change: RecordVersionChange, private_key: Any) -> None:
        local = store.record_row(self.db, change.record_id)
        if local is not None and local["lifecycle"] == FORGOTTEN:
            self.report.ignored += 1
            return
        what = f"record {change.record_id} v{change.version}"
        held = store.version_row(self.db, change.record_id, change.version)
        if held is not None and provisional.is_provisional(
            self.db, change.record_id, change.version
        ):
            # this device's own, not yet numbered by the cloud: the cloud's version wins
            # the number, and this device's words move to the next free one
            provisional.move_aside(self.db, change.record_id, change.version, self.random_bytes)
            held = None
        if held is not None:
            store.set_record_state(self.db, change.record_id, sync_state=SyncState.SYNCED)
            return
        dek, plain = self._open(
            private_key, change, what, "record", change.record_id, change.version
        )
        content = self._parse(change, what, RecordContent.model_validate_json, plain)
        self._store_key(change.key_id, dek, what)
        if local is None:
            # Its state follows as a record_state change; until then it is not used.
            store.insert_record(
                self.db,
                record_id=change.record_id,
                lifecycle=LifecycleState.CANDIDATE.value,
                current_version=change.version,
                sync_state=SyncState.SYNCED,
            )
        effects.write_version(
            self._context(),
            change.record_id,
            change.version,
            change.supersedes,
            content,
            sealed=SealedItem(change.key_id, dek, change.sealed_content),
            recorded_at=change.recorded_at.isoformat(),
        )
        if local is None:
            catalog.index_subject(self.db, change.record_id, content)
        if content.background:
            self._resolve_candidates(change.record_id, content)

    def _resolve_candidates(self, record_id: str, content: RecordContent) -> None:
        """The cloud consolidated this device's candidate: note which record it became
        (the candidate whose sentence is the record's text, in its source episode)."""
        wanted = normalise(content.text)
        for episode_id in content.source_episode_ids:
            facts = episode_facts(self.db, episode_id)
            if facts is None:
                continue
            for index, sentence in enumerate(split_sentences(facts.text)):
                if normalise(sentence) == wanted:
                    candidates.resolve(self.db, [(episode_id, index)], record_id)

    def _record_state(self, change: RecordStateChange) -> None:
        local = store.record_row(self.db, change.record_id)
        if local is not None and local["lifecycle"] == FORGOTTEN:
            self.report.ignored += 1
            return
        if change.lifecycle_state is LifecycleState.FORGOTTEN:
            self._shred_closure(change.record_id, change.at.isoformat())
            return
        if local is None:
            store.insert_record(
                self.db,
                record_id=change.record_id,
                lifecycle=change.lifecycle_state.value,
                current_version=change.current_version,
                sync_state=SyncState.SYNCED,
            )
        else:
            store.set_record_state(
                self.db,
                change.record_id,
                lifecycle=change.lifecycle_state.value,
                sync_state=SyncState.SYNCED,
            )
            store.set_current_version(self.db, change.record_id, change.current_version)
        usage = change.usage_restriction
        store.set_usage(
            self.db,
            change.record_id,
            usage.area.value if usage and usage.area else None,
            usage.project if usage else None,
        )
        store.set_superseded_by(self.db, change.record_id, change.superseded_by_record)
        store.set_conflicts(self.db, change.record_id, change.conflicts_with)
        catalog.log_event(
            self.db,
            change.record_id,
            change.at.isoformat(),
            change.lifecycle_state.value,
            change.current_version,
        )
        content = current_content(self.db, store.record_row(self.db, change.record_id))
        if content is not None:
            catalog.index_subject(self.db, change.record_id, content)

    def _episode(self, change: EpisodeChange, private_key: Any) -> None:
        if store.episode_forgotten(self.db, change.episode_id):
            self.report.ignored += 1
            return
        if store.episode_row(self.db, change.episode_id) is not None:
            store.set_episode_sync(self.db, change.episode_id, SyncState.SYNCED, None)
            return
        what = f"episode {change.episode_id}"
        dek, plain = self._open(private_key, change, what, "episode", change.episode_id, 1)
        content = self._parse(change, what, EpisodeContent.model_validate_json, plain)
        self._store_key(change.key_id, dek, what)
        store.insert_episode(
            self.db,
            episode_id=change.episode_id,
            conversation_id=content.conversation_id,
            typed_at=change.typed_at.isoformat(),
            bound_space=self._space(),
            key_id=change.key_id,
            sealed=change.sealed_content,
            sync_state=SyncState.SYNCED,
        )

    def _artifact(self, change: ArtifactChange, private_key: Any) -> None:
        gone_parent = any(
            (row := store.record_row(self.db, parent)) is not None and row["lifecycle"] == FORGOTTEN
            for parent in change.derived_from
        )
        if catalog.artifact_forgotten(self.db, change.artifact_id) or gone_parent:
            self.report.ignored += 1
            return
        if catalog.artifact_row(self.db, change.artifact_id) is not None:
            catalog.set_artifact_sync(self.db, change.artifact_id, SyncState.SYNCED, None)
            return
        what = f"artifact {change.artifact_id}"
        dek, plain = self._open(private_key, change, what, "artifact", change.artifact_id, 1)
        content = self._parse(change, what, ArtifactContent.model_validate_json, plain)
        self._store_key(change.key_id, dek, what)
        catalog.insert_artifact(
            self.db,
            artifact_id=change.artifact_id,
            kind=content.kind.value,
            created_at=change.created_at.isoformat(),
            bound_space=self._space(),
            key_id=change.key_id,
            sealed=change.sealed_content,
            sync_state=SyncState.SYNCED,
        )
        catalog.add_derivations(self.db, "artifact", change.artifact_id, change.derived_from)

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

    def _key_destruction(self, change: KeyDestruction) -> None:
        at = change.destroyed_at.isoformat()
        if change.record_id is None:
            # episodes that belonged to no record: forgetting all memory
            self._shred(episode_ids=tuple(change.episode_ids), at=at)
        else:
            self._shred_closure(
                change.record_id, at, change.key_ids, change.episode_ids, change.artifact_ids
            )
        store.add_pending_ack(self.db, change.event_id, change.record_id or "", self.now())
