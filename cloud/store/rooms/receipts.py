"""The receipts room of the record store: one receipt per ``(space, op_id)``: how an op
is applied at most once.

Implemented by ``cloud/store/sql_receipts.py`` ``ReceiptQueries``;
``cloud.store.base.StoreSession`` is every room at once.

Invariants:
- Every method names the space it reads or writes (except where it says so).
- A receipt is stored with its op's effects; only the end of an account rewrites one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from datetime import datetime


class ReceiptsRoom(Protocol):
    """One receipt per ``(space, op_id)``: how an op is applied at most once."""

    def receipt(self, space_id: str, op_id: str) -> str | None: ...
    def put_receipt(
        self, space_id: str, op_id: str, device_id: str, receipt_json: str, at: datetime
    ) -> None: ...
    def receipts_of(self, space_id: str) -> list[tuple[str, str]]: ...
    def replace_receipt(self, space_id: str, op_id: str, receipt_json: str) -> None: ...
