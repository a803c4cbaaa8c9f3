"""The keys room of the record store: destroyed keys: one forget event per forgotten
record, every key it destroys, and the devices still to acknowledge it.

Implemented by ``cloud/store/sql_keys.py`` ``KeyQueries``;
``cloud.store.base.StoreSession`` is every room at once.

Invariants:
- Every method names the space it reads or writes (except where it says so).
- An event's keys are marked destroyed only after the key store destroyed them.
- Ids and times only, never content.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime

    from cloud.store.base import ForgetEventRow, ForgetKey, ForgetStatusRow


class KeysRoom(Protocol):
    """Destroyed keys."""

    def add_forget_event(
        self,
        space_id: str,
        event_id: int,
        record_id: str,
        at: datetime,
        keys: Iterable[ForgetKey],
        pending_devices: Iterable[str],
    ) -> None: ...
    def forget_event(self, space_id: str, event_id: int) -> ForgetEventRow | None: ...
    def forget_events(self, space_id: str, event_ids: Iterable[int]) -> dict[int, ForgetEventRow]:
        """``forget_event`` for many events at once; the missing ones absent."""
        ...

    def forgotten_episode_ids(self, space_id: str, episode_ids: Iterable[str]) -> set[str]: ...
    def forgotten_key_ids(self, space_id: str, key_ids: Iterable[str]) -> set[str]: ...
    def undestroyed_forget_events(self) -> list[ForgetEventRow]: ...
    def mark_keys_destroyed(self, space_id: str, event_id: int, at: datetime) -> None: ...
    def unacked_events(self, space_id: str, device_id: str) -> list[int]: ...
    def ack(
        self, space_id: str, device_id: str, event_ids: Iterable[int], at: datetime
    ) -> None: ...
    def forget_statuses(self, space_id: str) -> list[ForgetStatusRow]: ...
