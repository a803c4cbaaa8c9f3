"""The search room of the record store: the retrieval indexes: blinded lexical terms and
sealed vectors, derived data that can always be rebuilt.

Implemented by ``cloud/store/search.py`` ``SearchQueries``;
``cloud.store.base.StoreSession`` is every room at once.

Invariants:
- Every method names the space it reads or writes (except where it says so).
- A hit is only a proposal: the caller re-checks it against the records room.
- A forget drops the record's rows (``purge``: at once, zeroed on disk).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from cloud.store.base import VersionRow
    from cloud.store.search import IndexRow, SealedVector


class SearchRoom(Protocol):
    """The retrieval indexes."""

    def search_generation(self, space_id: str) -> int: ...
    def stale_for_search(self, space_id: str, model_id: str) -> list[tuple[str, int]]: ...
    def count_stale_for_search(self, space_id: str, model_id: str) -> int: ...
    def index_records(self, space_id: str, rows: Sequence[IndexRow]) -> None: ...
    def drop_search(self, space_id: str, record_ids: Iterable[str], *, purge: bool) -> None: ...
    def lexical_matches(
        self, space_id: str, terms: Sequence[str], limit: int
    ) -> dict[str, float]: ...
    def records_with_term(self, space_id: str, term: str, limit: int) -> list[str]: ...
    def records_with_terms(
        self, space_id: str, terms: Iterable[str], limit: int
    ) -> dict[str, list[str]]: ...
    def vector_listing(self, space_id: str, model_id: str) -> list[tuple[str, int]]: ...
    def sealed_vectors(
        self, space_id: str, model_id: str, record_ids: Iterable[str]
    ) -> list[SealedVector]: ...
    def superseded_by_records(
        self, space_id: str, record_ids: Iterable[str]
    ) -> dict[str, list[str]]: ...
    def versions_at(self, space_id: str, wanted: Mapping[str, int]) -> dict[str, VersionRow]: ...
