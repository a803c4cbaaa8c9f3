"""The operator room of the record store: the list of spaces (``memsync cloud users``)
and the counts behind the ``/metrics`` gauges.

Implemented by ``cloud/store/sql_ops.py`` ``OperatorQueries``;
``cloud.store.base.StoreSession`` is every room at once.

Invariants:
- These are the only reads across spaces besides the work queue's and the keys room's
  sweeps; they answer ids, names the operator gave, times, states and counts, never
  anything a device sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from cloud.store.sql_ops import GaugeCounts, SpaceListRow


class OperatorRoom(Protocol):
    """The operator's reads."""

    def space_list(self) -> list[SpaceListRow]: ...
    def gauge_counts(self) -> GaugeCounts: ...
