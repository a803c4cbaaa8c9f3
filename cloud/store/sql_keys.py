"""The keys room (``cloud.store.rooms.keys``): forget events, every key each destroys, and
the devices still to acknowledge them.

Invariants:
- A forget event names every key it destroys; its keys are marked destroyed only after
  the key store destroyed them (``CloudService.ensure_destroyed``).
- A device is pending for an event until it acknowledges it; a device that may no
  longer hold copies (``may_hold_copies``) is not listed as pending.
- These tables hold ids and times only, never content.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import (
    Connection,
    and_,
    insert,
    select,
    update,
)

from cloud.store import schema as t
from cloud.store import statements as q
from cloud.store import statements_pull as qp
from cloud.store.base import (
    ForgetEventRow,
    ForgetKey,
    ForgetStatusRow,
)
from cloud.store.sql_end import may_hold_copies
from cloud.store.sql_lineage import chunks

_chunks = chunks


class KeyQueries:
    """Mixed into ``SqlSession``; ``conn`` is that session's connection."""

    conn: Connection

    def add_forget_event(
        self,
        space_id: str,
        event_id: int,
        record_id: str,
        at: datetime,
        keys: Iterable[ForgetKey],
        pending_devices: Iterable[str],
    ) -> None:
        self.conn.execute(
            insert(t.forget_events).values(
                space_id=space_id, event_id=event_id, record_id=record_id, forgotten_at=at
            )
        )
        key_rows = [
            {
                "space_id": space_id,
                "event_id": event_id,
                "key_id": k.key_id,
                "episode_id": k.episode_id,
                "artifact_id": k.artifact_id,
            }
            for k in keys
        ]
        if key_rows:
            self.conn.execute(insert(t.forget_keys), key_rows)
        pending_rows = [
            {"space_id": space_id, "event_id": event_id, "device_id": d}
            for d in sorted(set(pending_devices))
        ]
        if pending_rows:
            self.conn.execute(insert(t.forget_pending), pending_rows)

    def _keys_of(self, space_id: str, event_id: int) -> tuple[ForgetKey, ...]:
        c = t.forget_keys.c
        rows = self.conn.execute(
            select(c.key_id, c.episode_id, c.artifact_id)
            .where(c.space_id == space_id, c.event_id == event_id)
            .order_by(c.key_id)
        )
        return tuple(ForgetKey(r[0], r[1], r[2]) for r in rows)

    def forget_event(self, space_id: str, event_id: int) -> ForgetEventRow | None:
        c = t.forget_events.c
        row = self.conn.execute(
            select(c.record_id, c.forgotten_at).where(
                c.space_id == space_id, c.event_id == event_id
            )
        ).first()
        if row is None:
            return None
        return ForgetEventRow(space_id, event_id, row[0], row[1], self._keys_of(space_id, event_id))

    def forget_events(self, space_id: str, event_ids: Iterable[int]) -> dict[int, ForgetEventRow]:
        """``forget_event`` for many events at once (two IN-list statements a chunk);
        the missing ones are absent."""
        out: dict[int, ForgetEventRow] = {}
        for chunk in _chunks(sorted(set(event_ids))):
            keys: dict[int, list[ForgetKey]] = {}
            params = {"sp": space_id, "ids": chunk}
            for k in self.conn.execute(qp.FORGET_EVENT_KEYS, params):
                keys.setdefault(int(k[0]), []).append(ForgetKey(k[1], k[2], k[3]))
            for e in self.conn.execute(qp.FORGET_EVENTS, params):
                event_id = int(e[0])
                out[event_id] = ForgetEventRow(
                    space_id, event_id, e[1], e[2], tuple(keys.get(event_id, ()))
                )
        return out

    def forgotten_key_ids(self, space_id: str, key_ids: Iterable[str]) -> set[str]:
        found: set[str] = set()
        for chunk in _chunks(sorted(set(key_ids))):
            rows = self.conn.execute(q.FORGOTTEN_KEY_IDS, {"sp": space_id, "ids": chunk})
            found.update(r[0] for r in rows)
        return found

    def forgotten_episode_ids(self, space_id: str, episode_ids: Iterable[str]) -> set[str]:
        """The episodes among ``episode_ids`` whose key a forget event names."""
        c = t.forget_keys.c
        found: set[str] = set()
        for chunk in _chunks(sorted(set(episode_ids))):
            rows = self.conn.execute(
                select(c.episode_id)
                .where(c.space_id == space_id, c.episode_id.in_(chunk))
                .distinct()
            )
            found.update(r[0] for r in rows)
        return found

    def undestroyed_forget_events(self) -> list[ForgetEventRow]:
        c = t.forget_events.c
        rows = self.conn.execute(
            select(c.space_id, c.event_id, c.record_id, c.forgotten_at)
            .where(c.keys_destroyed_at.is_(None))
            .order_by(c.space_id, c.event_id)
        ).all()
        return [
            ForgetEventRow(r[0], int(r[1]), r[2], r[3], self._keys_of(r[0], int(r[1])))
            for r in rows
        ]

    def mark_keys_destroyed(self, space_id: str, event_id: int, at: datetime) -> None:
        c = t.forget_events.c
        self.conn.execute(
            update(t.forget_events)
            .where(c.space_id == space_id, c.event_id == event_id, c.keys_destroyed_at.is_(None))
            .values(keys_destroyed_at=at)
        )

    def unacked_events(self, space_id: str, device_id: str) -> list[int]:
        c = t.forget_pending.c
        rows = self.conn.execute(
            select(c.event_id)
            .where(c.space_id == space_id, c.device_id == device_id, c.acked_at.is_(None))
            .order_by(c.event_id)
        )
        return [int(r[0]) for r in rows]

    def ack(self, space_id: str, device_id: str, event_ids: Iterable[int], at: datetime) -> None:
        c = t.forget_pending.c
        for chunk in _chunks(sorted(set(event_ids))):
            self.conn.execute(
                update(t.forget_pending)
                .where(
                    c.space_id == space_id,
                    c.device_id == device_id,
                    c.event_id.in_(chunk),
                    c.acked_at.is_(None),
                )
                .values(acked_at=at)
            )

    def forget_statuses(self, space_id: str) -> list[ForgetStatusRow]:
        e, p, d = t.forget_events.c, t.forget_pending.c, t.devices.c
        events = self.conn.execute(
            select(e.event_id, e.record_id, e.forgotten_at)
            .where(e.space_id == space_id)
            .order_by(e.event_id)
        ).all()
        pending_rows = self.conn.execute(
            select(p.event_id, p.device_id, d.name)
            .select_from(
                t.forget_pending.join(
                    t.devices, and_(d.space_id == p.space_id, d.device_id == p.device_id)
                )
            )
            .where(p.space_id == space_id, p.acked_at.is_(None), may_hold_copies(d))
            .order_by(p.event_id, p.device_id)
        ).all()
        by_event: dict[int, list[tuple[str, str]]] = {}
        for event_id, device_id, name in pending_rows:
            by_event.setdefault(int(event_id), []).append((device_id, name))
        return [
            ForgetStatusRow(r[1], int(r[0]), r[2], tuple(by_event.get(int(r[0]), ())))
            for r in events
        ]
