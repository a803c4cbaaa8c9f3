"""The work room of the record store: the consolidator's work queue: items, leases,
ended conversations and which episode belongs to which conversation.

Implemented by ``cloud/store/sql_work.py`` ``WorkQueries``;
``cloud.store.base.StoreSession`` is every room at once.

Invariants:
- Every method names the space it reads or writes (except where it says so).
- A live lease is never handed to a second claimer.
- ``done`` and ``dropped`` are final.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from datetime import datetime

    from cloud.store.base import WorkItemRow


WORK_KINDS = ("candidate", "behaviour", "external")


class WorkRoom(Protocol):
    """The consolidator's work queue."""

    def space_ids(self) -> list[str]: ...
    def candidate_exists(self, space_id: str, episode_id: str, sentence: int) -> bool: ...
    def add_work_item(
        self,
        space_id: str,
        episode_id: str,
        sentence: int | None,
        item_kind: str,
        conversation_token: str,
        at: datetime,
        device_hint: bytes | None = None,
    ) -> bool: ...
    def work_item_hint(self, space_id: str, episode_id: str, sentence: int) -> bytes | None: ...
    def conversation_ended(self, space_id: str, conversation_token: str) -> bool: ...
    def end_conversation(self, space_id: str, conversation_token: str, at: datetime) -> int: ...
    def resolve_work(
        self, space_id: str, refs: Iterable[tuple[str, int]], record_id: str
    ) -> int: ...
    def complete_work(
        self,
        space_id: str,
        keys: Iterable[tuple[str, int | None]],
        *,
        record_id: str | None = None,
        dropped: bool = False,
    ) -> int: ...
    def release_work(
        self, owner: str, space_id: str, keys: Iterable[tuple[str, int | None]]
    ) -> int: ...
    def drop_work_for_episodes(self, space_id: str, episode_ids: Iterable[str]) -> int: ...
    def claim_work(
        self,
        owner: str,
        now: datetime,
        lease_seconds: float,
        limit: int,
        kinds: Sequence[str] = WORK_KINDS,
        waiting_since: datetime | None = None,
    ) -> list[WorkItemRow]: ...
    def work_item(
        self, space_id: str, episode_id: str, sentence: int | None
    ) -> WorkItemRow | None: ...
    def work_items(
        self,
        space_id: str,
        item_kind: str,
        states: Sequence[str] = ("waiting", "done"),
        limit: int = 1000,
    ) -> list[WorkItemRow]: ...
    def add_conversation_episode(
        self, space_id: str, conversation_token: str, episode_id: str, typed_at: datetime
    ) -> None: ...
    def conversation_episodes(
        self, space_id: str, conversation_token: str, before: datetime, limit: int
    ) -> list[str]: ...
    def drop_conversation_episodes(self, space_id: str, episode_ids: Iterable[str]) -> None: ...
