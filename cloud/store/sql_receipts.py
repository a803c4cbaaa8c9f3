"""The receipts room (``cloud.store.rooms.receipts``): one receipt per ``(space, op_id)``.

Invariants:
- A receipt is stored in the transaction of the op's effects and never a second time
  for the same op id (an op is applied at most once).
- Only the end of an account rewrites receipts (``replace_receipt``: their reasons may
  quote what the user typed); nothing deletes one.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Connection,
    select,
    update,
)

from cloud.store import schema as t
from cloud.store import statements as q


class ReceiptQueries:
    """Mixed into ``SqlSession``; ``conn`` is that session's connection."""

    conn: Connection

    def receipt(self, space_id: str, op_id: str) -> str | None:
        return self.conn.execute(q.RECEIPT, {"sp": space_id, "op_id": op_id}).scalar_one_or_none()

    def put_receipt(
        self, space_id: str, op_id: str, device_id: str, receipt_json: str, at: datetime
    ) -> None:
        self.conn.execute(
            q.PUT_RECEIPT,
            {
                "space_id": space_id,
                "op_id": op_id,
                "device_id": device_id,
                "receipt": receipt_json,
                "stored_at": at,
            },
        )

    def receipts_of(self, space_id: str) -> list[tuple[str, str]]:
        """``(op_id, receipt JSON)`` of every receipt stored for the space."""
        c = t.applied_ops.c
        rows = self.conn.execute(
            select(c.op_id, c.receipt).where(c.space_id == space_id).order_by(c.op_id)
        )
        return [(r[0], r[1]) for r in rows]

    def replace_receipt(self, space_id: str, op_id: str, receipt_json: str) -> None:
        c = t.applied_ops.c
        self.conn.execute(
            update(t.applied_ops)
            .where(c.space_id == space_id, c.op_id == op_id)
            .values(receipt=receipt_json)
        )
