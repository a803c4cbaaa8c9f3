"""One pulled page's derived work: what its changes opened, and the subject-index and
search rows written once for the whole page, at its end, inside its transaction.

Invariants:
- A ``PageWork`` lives for one page's transaction only
  (``device.sync.SyncSession._apply_page``) and is dropped with it: what it holds (the
  contents it opened, the terms it blinded) never outlives the rows written from them,
  so a record a later page or call shreds leaves no copy of its words here.
- ``finish`` runs before the cursor moves, in the same transaction: the page's derived
  rows commit with its changes or not at all.
- ``finish`` writes the rows of the records still held at the end of the page, from
  their CURRENT version: a record the page forgot or evicted gets none (its shred already
  removed what it had), one the page gave a new current version is indexed from that.
  So no derived row is written for content this device no longer holds.
- A version pulled in the page is indexed from the content it was opened to, never
  opened again; any other current version is opened from the store (a version whose key
  is gone has nothing to index, as in ``device.search.catch_up``).
- Each distinct term is blinded once per page (``device.search.Blinder``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from device import catalog, search, store
from device.db import Database
from device.sync_rows import PageRows
from protocol.errors import SealError
from protocol.model import LifecycleState, RecordContent

FORGOTTEN = LifecycleState.FORGOTTEN.value
_CHUNK = 500  # record ids per statement


@dataclass(slots=True)
class PageWork:
    """The derived work one page owes: records due for the subject index and the
    search index, and the contents the page opened, by (record, version)."""

    space: str
    rows: PageRows  # the page's plain rows, read and written set-at-a-time
    opened: dict[tuple[str, int], RecordContent] = field(default_factory=dict)
    subjects_due: dict[str, None] = field(default_factory=dict)  # ordered set
    search_due: dict[str, None] = field(default_factory=dict)

    def opened_version(self, record_id: str, version: int, content: RecordContent) -> None:
        """The page opened this version (the pulled content, checked and stored)."""
        self.opened[(record_id, version)] = content

    def subject_due(self, record_id: str) -> None:
        """The record's subject keys are written at the end of the page."""
        self.subjects_due[record_id] = None

    def index_due(self, record_id: str) -> None:
        """The record's search rows catch up at the end of the page (if stale)."""
        self.search_due[record_id] = None

    def finish(self, db: Database) -> None:
        """Write the page's subject-index and search rows, a statement per kind for the
        whole page, then merge the FTS5 segments if the page shredded anything."""
        self.rows.flush()
        blinder = search.Blinder(search.search_key(db))
        catalog.index_subjects(db, self._subject_items(db))
        search.catch_up(db, self.search_due, known=self.opened, blinder=blinder)
        search.merge_if_needed(db)

    def _subject_items(self, db: Database) -> list[tuple[str, RecordContent]]:
        items: list[tuple[str, RecordContent]] = []
        due = list(self.subjects_due)
        for start in range(0, len(due), _CHUNK):
            part = due[start : start + _CHUNK]
            rows = db.all(
                "SELECT record_id, lifecycle, current_version FROM records "
                f"WHERE record_id IN ({catalog.marks(part)})",
                part,
            )
            current = {row[0]: row for row in rows}
            for record_id in part:
                row = current.get(record_id)
                if row is None or row[1] == FORGOTTEN or row[2] is None:
                    continue  # evicted or forgotten meanwhile: its rows went with it
                content = self._content(db, record_id, int(row[2]))
                if content is not None:
                    items.append((record_id, content))
        return items

    def _content(self, db: Database, record_id: str, version: int) -> RecordContent | None:
        content = self.opened.get((record_id, version))
        if content is not None:
            return content
        row = store.version_row(db, record_id, version)
        if row is None:
            return None
        try:
            return store.open_version(db, row)
        except (LookupError, SealError):
            return None
