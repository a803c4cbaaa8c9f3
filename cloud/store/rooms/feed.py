"""The feed room of the record store: the space's order and its change feed: sequence
numbers, feed rows, compaction, and which device holds what.

Implemented by ``cloud/store/sql_feed.py`` ``FeedQueries``;
``cloud.store.base.StoreSession`` is every room at once.

Invariants:
- Every method names the space it reads or writes (except where it says so).
- ``allocate_seq`` runs only under the space lock; a seq is never given twice.
- Compaction deletes only rows that carry nothing any more and raises the floor in
  the same transaction.
- ``notify_changed`` speaks only if the transaction commits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable

    from cloud.store.base import ChangeRow, CompactionReport


class FeedRoom(Protocol):
    """The space's order and its change feed."""

    def allocate_seq(self, space_id: str) -> int: ...
    def last_seq(self, space_id: str) -> int: ...
    def add_change(self, space_id: str, row: ChangeRow) -> None: ...
    def changes_after(self, space_id: str, seq: int, limit: int) -> list[ChangeRow]: ...
    def feed_floor(self, space_id: str) -> int: ...
    def compact_changes(self, space_id: str) -> CompactionReport: ...
    def add_holdings(
        self, space_id: str, device_id: str, items: Iterable[tuple[str, str]]
    ) -> None: ...
    def holders(self, space_id: str, items: Iterable[tuple[str, str]]) -> set[str]: ...
    def notify_changed(self, space_id: str) -> None:
        """Tell every process the space's feed moved, once this transaction commits."""
        ...
