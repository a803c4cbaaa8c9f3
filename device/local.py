"""Applying one operation locally: decide, perform, queue, receipt — in ONE transaction.

Invariants:
- The decision is ``protocol.rules.decide`` on facts from this store
  (``device.facts``), the receipt is ``protocol.receipts.receipt_for`` of that
  decision, so a local receipt equals the reference ledger's for the same state.
- Accepted: every effect, the queued op (without text) and the local receipt commit
  together; refused: ``Refused`` carries the receipt and nothing was written.
- A forget checkpoints the WAL after its commit, so shredded pages leave the log.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from device import catalog, effects, search, store
from device.db import Database
from device.errors import Refused
from device.facts import facts_for
from device.views import LocalResult
from protocol.operations import AnyOperation
from protocol.receipts import receipt_for, receipt_message
from protocol.rules import Accept, ForgetRecords, decide


def apply_local(
    db: Database, op: AnyOperation, *, now: datetime, random_bytes: Callable[[int], bytes]
) -> LocalResult:
    """Apply ``op`` to this device at once and queue it; raise ``Refused`` if refused."""
    meta = store.get_meta(db)
    decision = decide(op, facts_for(db, op, meta))
    receipt = receipt_for(0, op, decision, now)
    if not isinstance(decision, Accept):
        raise Refused(decision.code.value, decision.reason, receipt=receipt)
    ctx = effects.Context(db, random_bytes, now, meta.binding_space)
    fields = effects.queue_fields(op, decision.versions)
    with db.atomic():
        for effect in decision.effects:
            effects.perform(ctx, op, effect)
        store.enqueue(
            db,
            op_id=op.op_id,
            kind=op.kind,
            record_id=fields.record_id,
            episode_id=fields.episode_id,
            artifact_id=fields.artifact_id,
            version=fields.version,
            op_json=fields.op_json,
            queued_at=ctx.at,
        )
        search.merge_if_needed(db)
        catalog.store_local_receipt(
            db,
            op_id=op.op_id,
            kind=op.kind,
            record_id=fields.record_id,
            episode_id=fields.episode_id,
            artifact_id=fields.artifact_id,
            receipt_json=receipt.model_dump_json(),
            stored_at=ctx.at,
        )
    forgot = any(isinstance(e, ForgetRecords) for e in decision.effects)
    if forgot:
        db.checkpoint()
    return LocalResult(
        record_id=receipt.record_id or "",
        op_id=op.op_id,
        forgotten_at=ctx.at if forgot else None,
        receipt=receipt,
        message=receipt_message(receipt),
        artifact_id=fields.artifact_id,
        episode_id=fields.episode_id,
    )
