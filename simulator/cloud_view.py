"""The cloud's view of a space, read through the operator handle for the checks.

Invariants: reads only (the record store through its engine and sessions, content
opened with the cloud's own vault exactly as the cloud would open it); a version whose
key is forgotten or destroyed reads as ``None``, never as an error.

``StepReads`` are the reads a run makes between steps (pending lists, lifecycles of
forgotten records, last sequence numbers). On a SQLite record store they are remembered
together with SQLite's ``data_version`` read on a read-only connection of their own,
which changes whenever any other connection (any cloud process, the operator) commits
a change; a remembered read is used only while it is unchanged, so it is the answer a
fresh read would give. On another store every read is fresh.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field

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


# --- reads between steps, remembered while the record store is unchanged -------------


@dataclass
class _Remembered:
    mark: int | None = None
    forgets: dict[str, tuple[dict[str, set[str]], set[str]]] = field(default_factory=dict)
    lifecycles: dict[str, dict[str, str | None]] = field(default_factory=dict)
    last_seq: dict[str, int] = field(default_factory=dict)


class _StoreMark:
    """SQLite's ``data_version`` of a record store, on a read-only connection."""

    def __init__(self, store_url: str) -> None:
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        prefix = "sqlite:///"
        if store_url.startswith(prefix):
            path = store_url[len(prefix) :]
            self._conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)

    def now(self) -> int | None:
        """The store's change mark now; None: it cannot tell (not SQLite)."""
        if self._conn is None:
            return None
        with self._lock:
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0])


_marks: weakref.WeakKeyDictionary[CloudService, tuple[_StoreMark, _Remembered]] = (
    weakref.WeakKeyDictionary()
)


class StepReads:
    """The cloud reads a run makes between steps, remembered while the store is as it
    was (SQLite) and fresh otherwise."""

    def __init__(self, operator: CloudService) -> None:
        self.view = CloudView(operator)
        entry = _marks.get(operator)
        if entry is None:
            entry = _marks[operator] = (_StoreMark(operator.config.store_url), _Remembered())
        self._mark = entry[0]
        self._remembered = entry[1]

    def _now(self) -> _Remembered:
        mark = self._mark.now()
        if mark is None or mark != self._remembered.mark:
            self._remembered.mark = mark
            self._remembered.forgets.clear()
            self._remembered.lifecycles.clear()
            self._remembered.last_seq.clear()
        return self._remembered

    def forgets(self, space_id: str) -> tuple[dict[str, set[str]], set[str]]:
        """``CloudView.forgets``: the pending devices and the forgotten records."""
        remembered = self._now()
        found = remembered.forgets.get(space_id)
        if found is None or remembered.mark is None:
            found = remembered.forgets[space_id] = self.view.forgets(space_id)
        return found

    def lifecycles(self, space_id: str, record_ids: Iterable[str]) -> dict[str, str]:
        """``CloudView.lifecycles``."""
        remembered = self._now()
        known = remembered.lifecycles.setdefault(space_id, {})
        wanted = set(record_ids)
        missing = wanted - set(known) if remembered.mark is not None else wanted
        if missing:
            found = self.view.lifecycles(space_id, missing)
            known.update({rid: found.get(rid) for rid in missing})
        return {rid: lifecycle for rid in wanted if (lifecycle := known.get(rid)) is not None}

    def last_seqs(self, space_ids: Iterable[str]) -> dict[str, int]:
        """The last sequence number of each space's feed."""
        remembered = self._now()
        wanted = list(dict.fromkeys(space_ids))
        missing = [s for s in wanted if s not in remembered.last_seq or remembered.mark is None]
        if missing:
            with self.view.operator.store.session() as s:
                for space_id in missing:
                    remembered.last_seq[space_id] = s.last_seq(space_id)
        return {space_id: remembered.last_seq[space_id] for space_id in wanted}
