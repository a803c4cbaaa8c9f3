"""Applying a push, and the consolidator's ops, set-at-a-time (issue 21).

Invariants:
- A push is one transaction under the space's lock: every op is decided in order by
  ``protocol.rules.decide`` alone, over facts (``cloud.facts``) that include every
  earlier op's effects of the same push; its effects are performed
  (``cloud.effects``) and its receipt stored. The rules stay pure and per op; only
  the reads and writes around them are batched (``cloud.store.sql_batch``): the
  receipts, records and episodes the push names are read with one IN-list each (the
  ended state of the conversations it names too, at the first one asked), the
  rows it writes are held and written with one executemany per table, sequence
  numbers come from memory and the counter is written once.
- Applied set-at-a-time, a push answers the same receipts and leaves the same stored
  state as its ops pushed one per request (``tests/cloud/test_push_batch.py``).
- A replayed ``op_id`` gets ``duplicate`` and never a second effect, within one push
  too; a device with unacknowledged key destructions gets ``PullRequired`` with
  nothing applied.
- The held rows are written before the push's new data keys are stored and before it
  commits; keys of anything forgotten are destroyed after the commit
  (``CloudService.ensure_destroyed``).
- The consolidator's ops (``apply_system``) take exactly this path on behalf of no
  device; what its ``ops`` function reads and its ``then`` callback run on the store
  session itself, with every held row written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, cast

from pydantic import ValidationError

from cloud.consolidator.tokens import conversation_token
from cloud.effects import SYSTEM_ACTOR, EffectWriter
from cloud.errors import NotFound, PullRequired
from cloud.facts import FactsReader
from cloud.store.base import StoreSession
from cloud.store.sql import SqlSession
from cloud.store.sql_batch import BatchSession
from cloud.validation import describe
from cloud.vault import Vault
from protocol.errors import FieldNotInVersion
from protocol.ids import is_id
from protocol.messages import PushRequest, PushResponse
from protocol.operations import (
    OPERATION_ADAPTER,
    AnyOperation,
    Receipt,
    ReceiptStatus,
    RefusalCode,
)
from protocol.receipts import duplicate_of, receipt_for
from protocol.rules import Accept, decide
from protocol.version import PROTOCOL_VERSION
from protocol.versioned import introduced_in, newer_fields

if TYPE_CHECKING:
    from cloud.indexer import Indexer
    from cloud.live import ChangeNotifier
    from cloud.search import SearchIndex
    from cloud.store import SqlStore
    from cloud.store.base import DeviceRow


class Pushing(Protocol):
    """What a push needs of the service that hands it over
    (``cloud.service.CloudService`` is one; this module never imports it): its store,
    vault, clock and doors, and what runs after a commit."""

    store: SqlStore
    vault: Vault
    live: ChangeNotifier
    indexer: Indexer
    search: SearchIndex

    def _clock(self) -> datetime: ...
    def _check_writable(self, now: datetime, what: str) -> None: ...
    def _check_open(self, s: StoreSession, space_id: str) -> None: ...
    def _enrolled(self, s: StoreSession, space_id: str, device_id: str) -> DeviceRow: ...
    def _announce(self, s: SqlSession, space_id: str, first: int) -> bool: ...
    def ensure_destroyed(self) -> int: ...


def push(service: Pushing, space_id: str, device_id: str, req: PushRequest) -> PushResponse:
    """``CloudService.push``: one device's batch of ops, one receipt each."""
    now = service._clock()
    service._check_writable(now, "a push")
    with service.store.session(space_id, lock=True) as s:
        service._enrolled(s, space_id, device_id)
        unacked = s.unacked_events(space_id, device_id)
        if unacked:
            raise PullRequired(device_id, unacked)
        vault = service.vault.for_push()  # this push's keys and DEKs, dropped with it
        first = s.last_seq(space_id)
        receipts = apply_ops(s, vault, space_id, device_id, req.ops, now, req.protocol_version)
        s.touch_device(space_id, device_id, now)
        vault.write_keys()  # the keys are stored before the records naming them commit
        moved = service._announce(s, space_id, first)
    _after_commit(service, space_id, moved)
    return PushResponse(receipts=receipts)


def apply_system(
    service: Pushing,
    space_id: str,
    ops: Sequence[AnyOperation] | Callable[[StoreSession], Sequence[AnyOperation]],
    then: Callable[[StoreSession, list[Receipt]], None] | None = None,
) -> list[Receipt]:
    """``CloudService.apply_system``: the consolidator's ops, as a push on behalf of
    no device (see there)."""
    now = service._clock()
    with service.store.session(space_id, lock=True) as s:
        if not s.space_exists(space_id):
            raise NotFound(f"space {space_id} does not exist")
        service._check_open(s, space_id)
        vault = service.vault.for_push()
        first = s.last_seq(space_id)
        planned = ops(s) if callable(ops) else ops
        raws = [op.model_dump(mode="json") for op in planned]
        receipts = apply_ops(s, vault, space_id, None, raws, now)
        if then is not None:
            then(s, receipts)
        vault.write_keys()
        moved = service._announce(s, space_id, first)
    _after_commit(service, space_id, moved)
    return receipts


def _after_commit(service: Pushing, space_id: str, moved: bool) -> None:
    if moved:
        service.live.changed(space_id)  # wake this process's live pulls at once
        service.indexer.schedule(space_id)  # committed: index it after this, not in here
    # committed: now destroy the keys of anything forgotten (and of earlier crashes),
    # and drop forgotten vectors from this process's cache
    service.ensure_destroyed()
    service.search.prune(space_id)


def apply_ops(
    s: SqlSession,
    vault: Vault,
    space_id: str,
    device_id: str | None,
    raws: Sequence[dict[str, object]],
    now: datetime,
    version: int = PROTOCOL_VERSION,
) -> list[Receipt]:
    """Decide and apply ``raws`` in order inside ``s``'s transaction; every row they
    make is in ``s`` when this returns."""
    batch = BatchSession(s, space_id)
    op_ids, record_ids, episode_ids, conversations = _named(raws)
    batch.prefetch(
        op_ids,
        record_ids,
        episode_ids,
        lambda: [conversation_token(vault, space_id, c) for c in conversations],
    )
    view = cast(StoreSession, batch)
    try:
        receipts = [
            _apply(view, vault, space_id, device_id, index, raw, now, version)
            for index, raw in enumerate(raws)
        ]
        batch.flush()
    finally:
        batch.opened_episodes.clear()  # no plain text outlives the push
    return receipts


def _named(
    raws: Sequence[dict[str, object]],
) -> tuple[list[str], list[str], list[str], list[str]]:
    """The op ids, record ids, episode ids and conversation ids the ops name (read
    ahead in one go)."""
    op_ids: list[str] = []
    record_ids: list[str] = []
    episode_ids: list[str] = []
    conversations: list[str] = []
    for raw in raws:
        op_id = raw.get("op_id")
        if isinstance(op_id, str) and is_id("op", op_id):
            op_ids.append(op_id)
        record_id = raw.get("record_id")
        if isinstance(record_id, str):
            record_ids.append(record_id)
        episode_id = raw.get("episode_id")
        if isinstance(episode_id, str):
            episode_ids.append(episode_id)
        sources = raw.get("source_episode_ids")
        if isinstance(sources, list):
            episode_ids += [e for e in sources if isinstance(e, str)]
        conversation_id = raw.get("conversation_id")
        if isinstance(conversation_id, str):
            conversations.append(conversation_id)
    return op_ids, record_ids, episode_ids, conversations


def _apply(
    s: StoreSession,
    vault: Vault,
    space_id: str,
    device_id: str | None,
    index: int,
    raw: dict[str, object],
    now: datetime,
    version: int,
) -> Receipt:
    raw_op_id = raw.get("op_id")
    op_id = raw_op_id if isinstance(raw_op_id, str) and is_id("op", raw_op_id) else None
    if op_id is not None:
        stored = s.receipt(space_id, op_id)
        if stored is not None:
            return duplicate_of(Receipt.model_validate_json(stored), index)
    try:
        op = OPERATION_ADAPTER.validate_python(raw)
        newer = [name for name in newer_fields(type(op), version) if name in raw]
        if newer:
            raise FieldNotInVersion(
                type(op).__name__, newer[0], introduced_in(type(op), newer[0]), version
            )
    except (ValidationError, FieldNotInVersion) as exc:
        shown = op_id or (repr(raw_op_id)[:80] if raw_op_id is not None else "without op_id")
        why = describe(exc) if isinstance(exc, ValidationError) else str(exc)
        receipt = Receipt(
            index=index,
            op_id=op_id,
            status=ReceiptStatus.REFUSED,
            code=RefusalCode.MALFORMED,
            reason=f"op {index} ({shown}) is malformed: {why}",
        )
        if op_id is not None:
            s.put_receipt(
                space_id, op_id, device_id or SYSTEM_ACTOR, receipt.model_dump_json(), now
            )
        return receipt
    decision = decide(op, FactsReader(s, vault, space_id, device_id or SYSTEM_ACTOR).facts(op))
    if isinstance(decision, Accept):
        writer = EffectWriter(s, vault, space_id, device_id, now)
        for effect in decision.effects:
            writer.perform(op, effect)
        writer.finish()
    receipt = receipt_for(index, op, decision, now)
    s.put_receipt(space_id, op.op_id, device_id or SYSTEM_ACTOR, receipt.model_dump_json(), now)
    return receipt
