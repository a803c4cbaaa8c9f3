"""The lineage room of the record store: what was derived from what, and which records
share a subject or a history: indexes of ids and keyed hashes, never content.

Implemented by ``cloud/store/sql_lineage.py`` ``LineageQueries``;
``cloud.store.base.StoreSession`` is every room at once.

Invariants:
- Every method names the space it reads or writes (except where it says so).
- A forget drops the rows of everything it forgot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from cloud.store.base import DerivationRow


class LineageRoom(Protocol):
    """What was derived from what, and which records share a subject or a history."""

    def add_derivations(self, space_id: str, rows: Iterable[DerivationRow]) -> None: ...
    def derivations_from(self, space_id: str, parent_ids: Iterable[str]) -> list[DerivationRow]: ...
    def parents_of(self, space_id: str, child_kind: str, child_id: str) -> list[str]: ...
    def parents_of_many(
        self, space_id: str, child_kind: str, child_ids: Iterable[str]
    ) -> dict[str, list[str]]:
        """Each child's ``parents_of``, in the same order; a child with none is absent."""
        ...

    def drop_derivations(
        self, space_id: str, record_ids: Iterable[str], artifact_ids: Iterable[str]
    ) -> None: ...
    def set_subject_tokens(self, space_id: str, record_id: str, tokens: Iterable[str]) -> None: ...
    def records_with_subjects(self, space_id: str, tokens: Sequence[str]) -> list[str]: ...
    def drop_subject_tokens(self, space_id: str, record_ids: Iterable[str]) -> None: ...
    def add_history_tokens(self, space_id: str, record_id: str, tokens: Iterable[str]) -> None: ...
    def records_with_history(self, space_id: str, tokens: Sequence[str]) -> list[str]: ...
    def has_history(self, space_id: str, record_id: str) -> bool: ...
    def episode_seq(self, space_id: str, episode_id: str) -> int | None: ...
    def drop_history_tokens(self, space_id: str, record_ids: Iterable[str]) -> None: ...
