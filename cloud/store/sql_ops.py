"""The operator room (``cloud.store.rooms.operator``): the list of spaces, and the
counts ``/metrics`` shows.

Invariants:
- Every answer is ids, names the operator gave (``add-user``), times, states and
  counts, never anything a device sent (no record, episode or conversation).
- Each query is one statement over indexed columns or a ``GROUP BY`` count, cheap
  enough for a scrape every few seconds: waiting work is counted on the
  ``work_items_claim`` index (state first); pending forgets count the unacknowledged
  ``forget_pending`` rows of devices that may still hold copies.
- A device's liveness column is not read here: the per-device view is
  ``device_statuses`` (the one reader, ``GET /v1/devices``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, and_, case, func, select

from cloud.store import schema as t
from cloud.store.sql_end import may_hold_copies


@dataclass(frozen=True, slots=True)
class SpaceListRow:
    space_id: str
    name: str
    created_at: datetime
    ended_at: datetime | None
    end_reason: str | None
    devices: int
    revoked: int


@dataclass(frozen=True, slots=True)
class GaugeCounts:
    pending_forgets: int  # forget events some device that may hold copies has not acked
    pending_forget_devices: int  # (event, device) pairs still unacknowledged
    work_waiting: dict[tuple[str, bool], int]  # (item kind, ready) -> waiting items


class OperatorQueries:
    """Mixed into ``SqlSession``; ``conn`` is that session's connection."""

    conn: Connection

    def space_list(self) -> list[SpaceListRow]:
        """Every space (ended ones too), oldest first, with its device counts."""
        s, d = t.spaces.c, t.devices.c
        revoked = func.coalesce(func.sum(case((d.revoked_at.is_not(None), 1), else_=0)), 0)
        rows = self.conn.execute(
            select(
                s.space_id,
                s.name,
                s.created_at,
                s.ended_at,
                s.end_reason,
                func.count(d.device_id),
                revoked,
            )
            .select_from(t.spaces.outerjoin(t.devices, d.space_id == s.space_id))
            .group_by(s.space_id, s.name, s.created_at, s.ended_at, s.end_reason)
            .order_by(s.created_at, s.space_id)
        )
        return [SpaceListRow(r[0], r[1], r[2], r[3], r[4], int(r[5]), int(r[6])) for r in rows]

    def gauge_counts(self) -> GaugeCounts:
        p, d, w = t.forget_pending.c, t.devices.c, t.work_items.c
        joined = t.forget_pending.join(
            t.devices, and_(d.space_id == p.space_id, d.device_id == p.device_id)
        )
        unacked = and_(p.acked_at.is_(None), may_hold_copies(d))
        pairs = self.conn.execute(
            select(func.count()).select_from(joined).where(unacked)
        ).scalar_one()
        distinct_events = (
            select(p.space_id, p.event_id).select_from(joined).where(unacked).distinct()
        ).subquery()
        events = self.conn.execute(select(func.count()).select_from(distinct_events)).scalar_one()
        ready = w.ready_at.is_not(None)
        waiting = self.conn.execute(
            select(w.item_kind, ready, func.count())
            .where(w.state == "waiting")
            .group_by(w.item_kind, ready)
        )
        return GaugeCounts(
            pending_forgets=int(events),
            pending_forget_devices=int(pairs),
            work_waiting={(str(r[0]), bool(r[1])): int(r[2]) for r in waiting},
        )
