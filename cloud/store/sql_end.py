"""The end room (``cloud.store.rooms.end``): the end of an account and the service's
closing.

Invariants:
- An ended space keeps its row (id, ``ended_at``, ``end_reason``, ``keys_destroyed_at``)
  and its name becomes its id: the user's name is personal data, and it is free again.
- Nothing here touches sealed content: the end of an account makes content unreadable
  by destroying keys (``cloud.account_end``); these queries only delete the plain rows
  that would still say something (project names, enrollment codes, conversation
  tokens) and rewrite receipts' reasons, which may quote what the user typed.
- ``service_state`` has one row (id 1) or none; no other table mentions it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, delete, insert, or_, select, update

from cloud.store import schema as t
from cloud.store.base import PendingDeviceRow, ServiceStateRow, SpaceEndRow

_s = t.spaces.c
_ROW = 1  # the id of service_state's one row


def may_hold_copies(d: Any) -> ColumnElement[bool]:
    """A device (``t.devices.c``) still counts as holding what it pulled: it never
    confirmed a wipe, or it confirmed one only after it was revoked. A revoked
    device's word is not evidence (whoever holds a stolen phone can send it), so only a
    confirmation made while the device was trusted (a device of an ended space wiping
    before any revocation) takes it off a pending list."""
    return or_(
        d.wiped_at.is_(None),
        and_(d.revoked_at.is_not(None), d.wiped_at >= d.revoked_at),
    )


class EndQueries:
    """Mixed into ``SqlSession``; ``conn`` is that session's connection."""

    conn: Connection

    # --- the end of an account ------------------------------------------------------

    def space_end(self, space_id: str) -> SpaceEndRow | None:
        """When and why the space ended; None while it is open (or does not exist)."""
        row = self.conn.execute(
            select(_s.ended_at, _s.end_reason, _s.keys_destroyed_at).where(
                _s.space_id == space_id, _s.ended_at.is_not(None)
            )
        ).first()
        return None if row is None else SpaceEndRow(space_id, row[0], row[1], row[2])

    def mark_space_ended(self, space_id: str, at: datetime, reason: str) -> None:
        """The space ended: ``ended_at``, ``end_reason``, and its name becomes its id."""
        self.conn.execute(
            update(t.spaces)
            .where(_s.space_id == space_id, _s.ended_at.is_(None))
            .values(ended_at=at, end_reason=reason, name=space_id)
        )

    def ended_spaces_with_keys(self) -> list[SpaceEndRow]:
        """Ended spaces whose own keys the key store may still hold, oldest end first."""
        rows = self.conn.execute(
            select(_s.space_id, _s.ended_at, _s.end_reason)
            .where(_s.ended_at.is_not(None), _s.keys_destroyed_at.is_(None))
            .order_by(_s.ended_at, _s.space_id)
        )
        return [SpaceEndRow(r[0], r[1], r[2], None) for r in rows]

    def mark_space_keys_destroyed(self, space_id: str, at: datetime) -> None:
        self.conn.execute(
            update(t.spaces)
            .where(
                _s.space_id == space_id,
                _s.ended_at.is_not(None),
                _s.keys_destroyed_at.is_(None),
            )
            .values(keys_destroyed_at=at)
        )

    def artifact_ids(self, space_id: str) -> list[str]:
        """Every artifact of the space (forgotten ones too), in id order."""
        c = t.artifacts.c
        rows = self.conn.execute(
            select(c.artifact_id).where(c.space_id == space_id).order_by(c.artifact_id)
        )
        return [r[0] for r in rows]

    def drop_plain_leftovers(self, space_id: str) -> None:
        """Delete the rows of an ending space that still say something in the clear or
        could still be used: its projects (their names) and the feed rows naming them,
        its enrollment codes, and its conversation tokens (ended conversations, the episodes
        of each)."""
        ch = t.changes.c
        self.conn.execute(delete(t.projects).where(t.projects.c.space_id == space_id))
        self.conn.execute(delete(t.changes).where(ch.space_id == space_id, ch.kind == "project"))
        self.conn.execute(
            delete(t.enrollment_codes).where(t.enrollment_codes.c.space_id == space_id)
        )
        self.conn.execute(
            delete(t.ended_conversations).where(t.ended_conversations.c.space_id == space_id)
        )
        self.conn.execute(
            delete(t.conversation_episodes).where(t.conversation_episodes.c.space_id == space_id)
        )

    def pending_devices(self, space_id: str) -> list[PendingDeviceRow]:
        """The space's devices that may still hold copies (``may_hold_copies``: no
        wipe confirmed, or confirmed only after a revocation), in enrollment order."""
        c = t.devices.c
        rows = self.conn.execute(
            select(c.device_id, c.name)
            .where(c.space_id == space_id, may_hold_copies(c))
            .order_by(c.enrolled_at, c.device_id)
        )
        return [PendingDeviceRow(r[0], r[1]) for r in rows]

    # --- the service's closing --------------------------------------------------------

    def service_state(self) -> ServiceStateRow | None:
        c = t.service_state.c
        row = self.conn.execute(
            select(c.region, c.announced_at, c.closes_at, c.export_until).where(c.id == _ROW)
        ).first()
        return None if row is None else ServiceStateRow(row[0], row[1], row[2], row[3])

    def put_service_state(self, state: ServiceStateRow) -> None:
        """Write the one ``service_state`` row (insert or replace its values)."""
        c = t.service_state.c
        values = {
            "region": state.region,
            "announced_at": state.announced_at,
            "closes_at": state.closes_at,
            "export_until": state.export_until,
        }
        done = self.conn.execute(update(t.service_state).where(c.id == _ROW).values(**values))
        if done.rowcount == 0:
            self.conn.execute(insert(t.service_state).values(id=_ROW, **values))
