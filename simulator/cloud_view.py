"""The cloud's view of a space, read through the operator handle for the checks.

Invariants: reads only (the record store through its engine and sessions, content
opened with the cloud's own vault exactly as the cloud would open it); a version whose
key is forgotten or destroyed reads as ``None``, never as an error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select

from cloud.service import CloudService
from cloud.store import schema as t
from protocol.model import LifecycleState, RecordContent
from protocol.operations import Receipt

FORGOTTEN = LifecycleState.FORGOTTEN.value


@dataclass(frozen=True)
class CloudRecord:
    record_id: str
    lifecycle: str
    current_version: int
    superseded_by: str | None
    conflicts_with: tuple[str, ...]  # as stored
    live_conflicts: tuple[str, ...] = ()  # those not forgotten

    @property
    def forgotten(self) -> bool:
        return self.lifecycle == FORGOTTEN


class CloudView:
    """Reads one cloud's stores for the simulator's checks."""

    def __init__(self, operator: CloudService) -> None:
        self.operator = operator

    def records(self, space_id: str) -> dict[str, CloudRecord]:
        c = t.records.c
        with self.operator.store.engine.connect() as conn:
            rows = conn.execute(
                select(c.record_id, c.lifecycle, c.current_version, c.superseded_by, c.conflicts)
                .where(c.space_id == space_id)
                .order_by(c.record_id)
            ).all()
        forgotten = {r[0] for r in rows if r[1] == FORGOTTEN}
        return {
            r[0]: CloudRecord(
                r[0],
                r[1],
                int(r[2]),
                r[3],
                tuple(sorted(json.loads(r[4]))) if r[4] else (),
                # a forgotten record no longer disagrees (as devices and recall read it)
                tuple(sorted(set(json.loads(r[4])) - forgotten)) if r[4] else (),
            )
            for r in rows
        }

    def lifecycles(self, space_id: str, record_ids: Iterable[str]) -> dict[str, str]:
        """record id -> its lifecycle in the cloud, for those of ``record_ids`` it has."""
        wanted = sorted(set(record_ids))
        if not wanted:
            return {}
        c = t.records.c
        with self.operator.store.engine.connect() as conn:
            rows = conn.execute(
                select(c.record_id, c.lifecycle).where(
                    c.space_id == space_id, c.record_id.in_(wanted)
                )
            ).all()
        return {r[0]: r[1] for r in rows}

    def version_texts(self, space_id: str, record_id: str) -> list[tuple[int, str | None]]:
        """Every version of the record in server order, opened (None: key gone)."""
        out: list[tuple[int, str | None]] = []
        with self.operator.store.session(space_id) as s:
            for row in s.versions(space_id, record_id):
                content = self.operator.vault.open(
                    s,
                    space_id,
                    "record",
                    record_id,
                    row.version,
                    row.key_id,
                    row.sealed_content,
                    RecordContent,
                )
                out.append((row.version, None if content is None else content.text))
        return out

    def version_key_ids(self, space_id: str, record_id: str) -> list[str]:
        with self.operator.store.session(space_id) as s:
            return [row.key_id for row in s.versions(space_id, record_id)]

    def receipt(self, space_id: str, op_id: str) -> Receipt | None:
        with self.operator.store.session(space_id) as s:
            raw = s.receipt(space_id, op_id)
        return None if raw is None else Receipt.model_validate_json(raw)

    def receipts(self, space_id: str) -> dict[str, Receipt]:
        """Every receipt the cloud stored for the space, by op id."""
        c = t.applied_ops.c
        with self.operator.store.engine.connect() as conn:
            rows = conn.execute(
                select(c.op_id, c.receipt).where(c.space_id == space_id).order_by(c.op_id)
            ).all()
        return {r[0]: Receipt.model_validate_json(r[1]) for r in rows}

    def pending_devices(self, space_id: str) -> dict[str, set[str]]:
        """record id -> device ids the cloud still waits for (forgets with any pending)."""
        return self.forgets(space_id)[0]

    def forgets(self, space_id: str) -> tuple[dict[str, set[str]], set[str]]:
        """From one read of the cloud's pending list: ``pending_devices`` and
        ``forgotten_record_ids``."""
        pending: dict[str, set[str]] = {}
        forgotten: set[str] = set()
        for forget in self.operator.pending(space_id).forgets:
            if not forget.record_id:
                continue
            forgotten.add(forget.record_id)
            if forget.pending:
                pending.setdefault(forget.record_id, set()).update(
                    p.device_id for p in forget.pending
                )
        return pending, forgotten

    def subset(self, space_id: str, device_id: str) -> set[str] | None:
        """The records the cloud chose for (or saw written by) the device; None when it
        has no subset (a protocol-1/2 device mirrors the whole space)."""
        with self.operator.store.session(space_id) as s:
            if s.subset_state(space_id, device_id) is None:
                return None
            return set(s.subset_members(space_id, device_id))

    def forgotten_record_ids(self, space_id: str) -> set[str]:
        return {f.record_id for f in self.operator.pending(space_id).forgets if f.record_id}
