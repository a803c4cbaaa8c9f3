"""Running the search indexes' catch-up on demand: one space now, what this process
owes, or every open space (the worker's reindex job).

Invariants:
- Indexing is derived data only: it reads sealed content with its keys and writes the
  search room's rows, never a record, a version or the feed.
- A space another process is indexing right now is skipped (0), never indexed twice at
  once (``cloud.search.SearchIndex.catch_up``).
"""

from __future__ import annotations

from cloud.indexer import Indexer
from cloud.search import SearchIndex
from cloud.store import SqlStore


class IndexAdmin:
    """The index catch-ups of one service."""

    def __init__(self, store: SqlStore, search: SearchIndex, indexer: Indexer) -> None:
        self.store = store
        self.search = search
        self.indexer = indexer

    def catch_up(self, space_id: str) -> int:
        """Index what a space's search indexes miss, now, in this thread (0 when another
        process is indexing it)."""
        return self.search.catch_up(space_id)

    def run_pending(self) -> int:
        """Index, now and in this thread, every space a commit of this process owed an
        index catch-up (``cloud.indexer``; what the background thread would do)."""
        return self.indexer.run_pending()

    def reindex(self) -> int:
        """Index, in every open space, what the search indexes miss, including records
        whose vector another embedding model made, and spaces pushed to through other
        processes: the worker's reindex job (``memsync cloud worker``). A space another
        process is indexing right now is skipped. Returns how many records were indexed."""
        with self.store.session() as s:
            spaces = s.space_ids()
        return sum(self.search.catch_up(space_id) for space_id in spaces)
