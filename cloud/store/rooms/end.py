"""The end room of the record store: the end of an account and the service's closing.

Implemented by ``cloud/store/sql_end.py`` ``EndQueries``;
``cloud.store.base.StoreSession`` is every room at once.

Invariants:
- Every method names the space it reads or writes (except where it says so).
- An ended space keeps its row; its plain leftovers are deleted, never sealed content.
- ``service_state`` is one row or none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from datetime import datetime

    from cloud.store.base import PendingDeviceRow, ServiceStateRow, SpaceEndRow


class EndRoom(Protocol):
    """The end of an account and the service's closing."""

    def space_end(self, space_id: str) -> SpaceEndRow | None: ...
    def mark_space_ended(self, space_id: str, at: datetime, reason: str) -> None: ...
    def ended_spaces_with_keys(self) -> list[SpaceEndRow]: ...
    def mark_space_keys_destroyed(self, space_id: str, at: datetime) -> None: ...
    def artifact_ids(self, space_id: str) -> list[str]: ...
    def drop_plain_leftovers(self, space_id: str) -> None: ...
    def pending_devices(self, space_id: str) -> list[PendingDeviceRow]: ...
    def service_state(self) -> ServiceStateRow | None: ...
    def put_service_state(self, state: ServiceStateRow) -> None: ...
