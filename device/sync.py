"""The device side of the sync algorithm (docs/protocol.md, "The sync algorithm").

Invariants:
- An op leaves the queue only in the local transaction that stores its receipt;
  a receipt for an op the device re-sent after a crash (``duplicate``) is stored
  like any other, and no effect is re-executed.
- A pulled page is applied and the cursor moved in ONE local transaction; a change
  that does not open aborts the whole page and the cursor stays where it was.
- Content already held is never rewritten; content this device forgot is never
  stored again (skeletons and episode tombstones win over later changes).
- Key destruction shreds through ``device.shred`` and records the event id in
  ``pending_acks`` in the same transaction; the WAL is checkpointed after the commit,
  then the ack is sent; acks still pending are sent first at the next sync.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from device import shred, store
from device.client import CloudClient
from device.db import Database
from device.errors import ChangeDoesNotOpen, ServerError, ServerRefused
from device.keys import SealedKeyDoesNotOpen, load_private_key, open_item, open_sealed_key
from device.views import SyncReport
from protocol.errors import SealError
from protocol.messages import (
    MAX_PULL_PAGE,
    AckRequest,
    AckResponse,
    EpisodeChange,
    EpisodeContent,
    ErrorCode,
    KeyDestruction,
    LifecycleChange,
    PullRequest,
    PullResponse,
    PushRequest,
    PushResponse,
    RecordVersionChange,
)
from protocol.model import LifecycleState, RecordContent
from protocol.operations import MAX_OPS_PER_PUSH, OPERATION_ADAPTER, Receipt, ReceiptStatus

FORGOTTEN = LifecycleState.FORGOTTEN.value
# A refused forget still leaves no content anywhere: the cloud already forgot the
# record, or never held it.
_HARMLESS_FORGET_REFUSALS = {"forgotten", "unknown_record"}


class SyncSession:
    def __init__(self, db: Database, client: CloudClient, now: Callable[[], str]) -> None:
        self.db = db
        self.client = client
        self.now = now
        self.report = SyncReport()

    # --- the algorithm ----------------------------------------------------------------

    def run(self) -> SyncReport:
        self.send_acks()
        self.push()
        self.pull()
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
        pulled_first = False
        while True:
            rows = store.queue_batch(self.db, MAX_OPS_PER_PUSH)
            if not rows:
                return
            ops = [self._wire_op(row) for row in rows]
            try:
                response = self.client.post("/v1/push", PushRequest(ops=ops), PushResponse)
            except ServerRefused as exc:
                if exc.code == ErrorCode.PULL_REQUIRED.value and not pulled_first:
                    pulled_first = True
                    self.report.pull_required = True
                    self.pull()
                    continue
                raise
            self._check_receipts(rows, response.receipts)
            with self.db.atomic():
                for row, receipt in zip(rows, response.receipts, strict=True):
                    self._apply_receipt(row, receipt)
            self.report.pushed += len(rows)

    def _wire_op(self, row: Any) -> dict[str, Any]:
        """The wire op: the queued JSON plus the text re-read from its sealed row."""
        op = json.loads(row["op_json"])
        kind = row["kind"]
        if kind == "add_episode":
            episode = store.episode_row(self.db, row["episode_id"])
            if episode is None:
                raise ServerError(
                    f"queued op {row['op_id']} names episode {row['episode_id']}, "
                    "which this device no longer holds"
                )
            op["text"] = store.open_episode(self.db, episode).text
        elif kind == "remember":
            version = store.version_row(self.db, row["record_id"], 1)
            if version is None:
                raise ServerError(
                    f"queued op {row['op_id']} names record {row['record_id']} v1, "
                    "which this device no longer holds"
                )
            op["text"] = store.open_version(self.db, version).text
        validated = OPERATION_ADAPTER.validate_python(op)
        result: dict[str, Any] = validated.model_dump(mode="json")
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

    def _apply_receipt(self, row: Any, receipt: Receipt) -> None:
        store.store_receipt(
            self.db,
            op_id=row["op_id"],
            kind=row["kind"],
            record_id=row["record_id"],
            episode_id=row["episode_id"],
            receipt_json=receipt.model_dump_json(),
            stored_at=self.now(),
        )
        store.dequeue(self.db, row["op_id"])
        outcome = receipt.status
        if outcome is ReceiptStatus.DUPLICATE:
            self.report.duplicates += 1
            outcome = receipt.original_status or ReceiptStatus.APPLIED
        if outcome is ReceiptStatus.APPLIED:
            self.report.applied += 1
            state, reason = "synced", None
        else:
            code = receipt.code.value if receipt.code is not None else outcome.value
            reason = f"{code}: {receipt.reason or 'no reason given'}"
            self.report.refused.append((row["op_id"], code, receipt.reason or ""))
            state = "refused"
            if row["kind"] == "forget_permanently" and code in _HARMLESS_FORGET_REFUSALS:
                state, reason = "synced", None
        if row["kind"] == "add_episode":
            if store.episode_row(self.db, row["episode_id"]) is not None:
                store.set_episode_sync(self.db, row["episode_id"], state, reason)
            return
        record = store.record_row(self.db, row["record_id"])
        if record is None:
            return
        if row["kind"] == "remember" and record["lifecycle"] == FORGOTTEN:
            return  # the skeleton's own forget op decides its state
        store.set_record_state(self.db, row["record_id"], sync_state=state, refusal_reason=reason)

    # --- pull ------------------------------------------------------------------------

    def pull(self) -> None:
        while True:
            cursor = store.get_meta(self.db).pull_cursor
            page = self.client.post(
                "/v1/pull", PullRequest(cursor=cursor, limit=MAX_PULL_PAGE), PullResponse
            )
            shredded_before = len(self.report.shredded)
            with self.db.atomic():
                private_key = load_private_key(store.get_meta(self.db).private_key)
                for change in page.changes:
                    self._apply_change(change, private_key)
                store.set_cursor(self.db, page.cursor)
            self.report.pulled += len(page.changes)
            if len(self.report.shredded) > shredded_before:
                self.db.checkpoint()
            if not page.has_more:
                break
        self.send_acks()

    def _apply_change(self, change: Any, private_key: Any) -> None:
        if isinstance(change, RecordVersionChange):
            self._record_version(change, private_key)
        elif isinstance(change, EpisodeChange):
            self._episode(change, private_key)
        elif isinstance(change, LifecycleChange):
            self._lifecycle(change)
        elif isinstance(change, KeyDestruction):
            shred.shred_record(
                self.db,
                change.record_id,
                forgotten_at=change.destroyed_at.isoformat(),
                sync_state="synced",
                key_ids=change.key_ids,
                episode_ids=change.episode_ids,
            )
            store.add_pending_ack(self.db, change.event_id, change.record_id, self.now())
            self.report.shredded.append(change.record_id)

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
        if (local is not None and local["lifecycle"] == FORGOTTEN) or (
            change.lifecycle_state is LifecycleState.FORGOTTEN
        ):
            self.report.ignored += 1
            return
        what = f"record {change.record_id} v{change.version}"
        if store.version_row(self.db, change.record_id, change.version) is not None:
            store.set_record_state(
                self.db,
                change.record_id,
                lifecycle=change.lifecycle_state.value,
                current_version=change.version,
                sync_state="synced",
            )
            return
        dek = self._open_dek(private_key, change, what)
        space = self._space()
        try:
            plain = open_item(
                dek, change.sealed_content, space, "record", change.record_id, change.version
            )
            content = RecordContent.model_validate_json(plain)
        except (SealError, ValidationError) as exc:
            raise ChangeDoesNotOpen(
                f"pulled change seq {change.seq} ({what}) does not open: {exc}; "
                "the page was not applied and the cursor did not move"
            ) from exc
        self._store_key(change.key_id, dek, what)
        if local is None:
            store.insert_record(
                self.db,
                record_id=change.record_id,
                lifecycle=change.lifecycle_state.value,
                current_version=change.version,
                sync_state="synced",
            )
        else:
            store.set_record_state(
                self.db,
                change.record_id,
                lifecycle=change.lifecycle_state.value,
                current_version=change.version,
                sync_state="synced",
            )
        store.insert_version(
            self.db,
            record_id=change.record_id,
            version=change.version,
            supersedes=change.supersedes,
            epistemic_state=change.epistemic_state.value,
            recorded_at=change.recorded_at.isoformat(),
            bound_space=space,
            key_id=change.key_id,
            sealed=change.sealed_content,
        )
        store.index_words(self.db, change.record_id, content.text)

    def _episode(self, change: EpisodeChange, private_key: Any) -> None:
        if store.episode_forgotten(self.db, change.episode_id):
            self.report.ignored += 1
            return
        if store.episode_row(self.db, change.episode_id) is not None:
            store.set_episode_sync(self.db, change.episode_id, "synced", None)
            return
        what = f"episode {change.episode_id}"
        dek = self._open_dek(private_key, change, what)
        space = self._space()
        try:
            plain = open_item(dek, change.sealed_content, space, "episode", change.episode_id, 1)
            content = EpisodeContent.model_validate_json(plain)
        except (SealError, ValidationError) as exc:
            raise ChangeDoesNotOpen(
                f"pulled change seq {change.seq} ({what}) does not open: {exc}; "
                "the page was not applied and the cursor did not move"
            ) from exc
        self._store_key(change.key_id, dek, what)
        store.insert_episode(
            self.db,
            episode_id=change.episode_id,
            conversation_id=content.conversation_id,
            typed_at=change.typed_at.isoformat(),
            bound_space=space,
            key_id=change.key_id,
            sealed=change.sealed_content,
            sync_state="synced",
        )

    def _lifecycle(self, change: LifecycleChange) -> None:
        local = store.record_row(self.db, change.record_id)
        if local is None or local["lifecycle"] == FORGOTTEN:
            self.report.ignored += 1
            return
        if change.lifecycle_state is LifecycleState.FORGOTTEN:
            shred.shred_record(
                self.db, change.record_id, forgotten_at=change.at.isoformat(), sync_state="synced"
            )
            self.report.shredded.append(change.record_id)
            return
        store.set_record_state(self.db, change.record_id, lifecycle=change.lifecycle_state.value)
