"""The push half of a sync: queued operations out, one receipt per operation back
(``docs/protocol.md``, "The sync algorithm").

Invariants:
- An op leaves the queue only in the local transaction that stores its receipt;
  a receipt for an op the device re-sent after a crash (``duplicate``) is stored
  like any other, and no effect is re-executed.
- A queued op carries no text: the wire op is the queued JSON plus the text re-read
  from its sealed row, rendered for the protocol version it goes out in; a batch's rows
  are read set-at-a-time (``device.push_reads``).
- A batch's receipts are stored in one transaction; the plain ones set-at-a-time
  (``device.push_receipts``), leaving exactly the rows one receipt at a time leaves.
- A ``duplicate`` receipt says only that the op was applied before this delivery: for
  a record a resync kept unseen (its create op was queued; ``resync_kept``), the cloud
  is asked for the record's status before the receipt is stored, and its skeleton
  shreds it.
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
from typing import Any

from device import catalog, faults, provisional, push_reads, push_receipts, resync_marks, store
from device.errors import (
    PullRequired,
    PushDidNotSettle,
    ServerError,
    ServerRefused,
    ServiceClosed,
)
from device.sync_base import FORGOTTEN, SessionBase
from device.sync_state import SyncState
from protocol.messages import PushRequest, PushResponse, RecordState
from protocol.model import LifecycleState, RecordContent
from protocol.operations import MAX_OPS_PER_PUSH, OPERATION_ADAPTER, Receipt, ReceiptStatus
from protocol.versioned import newer_fields

# A refused forget still leaves no content anywhere: the cloud already forgot the
# record, or never held it.
_HARMLESS_FORGET_REFUSALS = {"forgotten", "unknown_record"}
_CREATING = push_receipts.CREATING
# the ops that create a record (a consolidation creates the cloud's own, on a device too);
# ``resync_marks.note_kept`` names the same kinds
_RECORD_CREATING = push_receipts.RECORD_CREATING
_FORGOTTEN_REFUSAL = "forgotten"


def code_of(receipt: Receipt) -> str | None:
    """The refusal code of a receipt (a duplicate's original one), else None."""
    if receipt.status is ReceiptStatus.REFUSED or (
        receipt.status is ReceiptStatus.DUPLICATE
        and receipt.original_status is ReceiptStatus.REFUSED
    ):
        return receipt.code.value if receipt.code is not None else None
    return None


# how many pulls one push may need when forgets keep landing between its pull and push
MAX_PULL_ROUNDS = 8


class Pushing(SessionBase):
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
            with self.db.atomic():  # plain receipts set-at-a-time (``device.push_receipts``)
                push_receipts.apply_all(
                    self.db,
                    self.report,
                    list(zip(rows, response.receipts, strict=True)),
                    forgotten,
                    self.now,
                    self._apply_receipt,
                )
            self.report.pushed += len(rows)
            # the sent ops' rows (their words among them) were deleted: truncate the WAL
            # so no older frame keeps them, whether or not the receipts shredded anything
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
        for record_id in sorted(resync_marks.kept_records(self.db, duplicated)):
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

    @staticmethod
    def _sealed_version(sealed: push_reads.SealedRows, row: Any) -> RecordContent:
        content = sealed.version(row["record_id"], push_reads.version_of(row))
        if content is None:
            raise ServerError(
                f"queued op {row['op_id']} names record {row['record_id']} v{row['version']}, "
                "which this device no longer holds"
            )
        return content

    def _push_request(self, rows: list[Any], version: int) -> PushRequest:
        sealed = push_reads.SealedRows(self.db, rows)  # one read per table for the batch
        return PushRequest(ops=[self._wire_op(sealed, row, version) for row in rows])

    def _wire_op(self, sealed: push_reads.SealedRows, row: Any, version: int) -> dict[str, Any]:
        """The wire op: the queued JSON plus the text re-read from its sealed row."""
        op = json.loads(row["op_json"])
        op.setdefault("initiated_by", "user")  # ops queued before protocol issue 3
        kind = row["kind"]
        if kind == "add_episode":
            episode = sealed.episode(row["episode_id"])
            if episode is None:
                raise ServerError(
                    f"queued op {row['op_id']} names episode {row['episode_id']}, "
                    "which this device no longer holds"
                )
            op["text"] = episode.text
        elif kind in ("remember", "correct", "revise_rule"):
            content = self._sealed_version(sealed, row)
            op["text"] = content.text
            if kind == "remember" and content.subject is not None:
                op["subject"] = content.subject
        elif kind in ("infer", "consolidate"):
            op["content"] = self._sealed_version(sealed, row).model_dump(mode="json")
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
            resync_marks.drop_kept(self.db, row["record_id"])
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
