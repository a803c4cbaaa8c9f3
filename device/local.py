"""Applying one operation locally: decide, perform, queue, receipt — in ONE transaction.

Invariants:
- The decision is ``protocol.rules.decide`` on facts from this store
  (``device.facts``), the receipt is ``protocol.receipts.receipt_for`` of that
  decision, so a local receipt equals the reference ledger's for the same state.
- Accepted: every effect, the queued op (without text) and the local receipt commit
  together; refused: ``Refused`` carries the receipt and nothing was written.
- A forget checkpoints the WAL after its commit, so shredded pages leave the log.
- An op on something the user keeps only on this device (a device-only sensitive
  class: ``device.candidates``) is applied and receipted but never queued, and what it
  creates is marked device-only, so no push can ever carry it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from device import candidates, catalog, effects, search, store
from device.db import Database
from device.errors import Refused
from device.facts import facts_for
from device.views import LocalResult
from protocol.operations import (
    AddEpisode,
    AnyOperation,
    Consolidate,
    EndSession,
    ForgetArea,
    Infer,
    MarkCandidate,
    Remember,
    SetProject,
)
from protocol.receipts import receipt_for, receipt_message
from protocol.rules import Accept, CreateRecord, ForgetRecords, decide, episodes_named


def device_only(db: Database, op: AnyOperation) -> bool:
    """Whether ``op`` touches something kept only on this device (never pushed)."""
    if isinstance(op, EndSession | ForgetArea | SetProject):
        return False
    kept = candidates.device_only_classes(db)
    if not kept:
        # nothing is ever marked device-only before a class is kept (and a class, once
        # kept, stays kept), so most ops need no further lookup
        return False
    if isinstance(op, MarkCandidate) and op.sensitivity in kept:
        return True
    if isinstance(op, Remember) and op.sensitivity in kept:
        return True
    if isinstance(op, Infer | Consolidate) and op.content.sensitivity in kept:
        return True
    record_id = getattr(op, "record_id", None)
    if isinstance(record_id, str) and candidates.record_device_only(db, record_id):
        return True
    if isinstance(op, AddEpisode):
        return False  # the caller decides an episode's class before it is logged
    return any(candidates.episode_device_only(db, e) for e in episodes_named(op))


def apply_local(
    db: Database,
    op: AnyOperation,
    *,
    now: datetime,
    random_bytes: Callable[[int], bytes],
    keep_on_device: bool | None = None,
) -> LocalResult:
    """Apply ``op`` to this device at once and queue it (unless it is device-only:
    ``keep_on_device``, or decided by :func:`device_only`); raise ``Refused`` if refused."""
    meta = store.get_meta(db)
    decision = decide(op, facts_for(db, op, meta))
    receipt = receipt_for(0, op, decision, now)
    if not isinstance(decision, Accept):
        raise Refused(decision.code.value, decision.reason, receipt=receipt)
    ctx = effects.Context(db, random_bytes, now, meta.binding_space)
    fields = effects.queue_fields(op, decision.versions)
    local_only = device_only(db, op) if keep_on_device is None else keep_on_device
    with db.atomic():
        for effect in decision.effects:
            effects.perform(ctx, op, effect)
        if local_only:
            if isinstance(op, AddEpisode):
                candidates.mark_episode_device_only(db, op.episode_id)
            for effect in decision.effects:
                if isinstance(effect, CreateRecord):
                    candidates.mark_record_device_only(db, effect.record_id)
        else:
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
