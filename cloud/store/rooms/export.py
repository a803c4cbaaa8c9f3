"""The export room of the record store: an export's reads (keyset pages in id order,
read from one snapshot) and the ``exports`` audit log.

Implemented by ``cloud/store/sql_export.py`` ``ExportQueries``;
``cloud.store.base.StoreSession`` is every room at once.

Invariants:
- Every method names the space it reads or writes (except where it says so).
- An export id starts one export only; its outcome is written once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime

    from cloud.store.base import DeviceHistoryRow, EpisodeRow, ExportRow, RecordRow, VersionRow


class ExportRoom(Protocol):
    """An export's reads (keyset pages in id order, read from one snapshot) and the"""

    def records_page(
        self, space_id: str, after: str | None, limit: int, *, forgotten: bool | None = None
    ) -> list[RecordRow]: ...
    def versions_of(
        self, space_id: str, record_ids: Iterable[str]
    ) -> dict[str, list[VersionRow]]: ...
    def episodes_page(self, space_id: str, after: str | None, limit: int) -> list[EpisodeRow]: ...
    def device_history(self, space_id: str) -> list[DeviceHistoryRow]: ...
    def start_export(
        self,
        space_id: str,
        export_id: str,
        device_id: str,
        at: datetime,
        include_sensitive: bool,
    ) -> bool: ...
    def finish_export(self, space_id: str, export_id: str, at: datetime, outcome: str) -> None: ...
    def export(self, space_id: str, export_id: str) -> ExportRow | None: ...
