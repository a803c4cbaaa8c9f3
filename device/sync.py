"""The device side of the sync algorithm (docs/protocol.md, "The sync algorithm"): acks,
push, the pull loop, and resync, composed in ``SyncSession``.

The session is three parts of one concern each: ``device.sync_push`` (queued operations
out, receipts back), ``device.sync_apply`` (one pulled change applied, one ``match``
over the change kinds) and this module (the order of a sync, pages and their
transactions, resync); ``device.sync_base`` holds what they share and shredding on the
cloud's word.

Invariants:
- A sync sends the acks still pending, pushes, lets deferred evictions go, then pulls.
- A pulled page is applied and the cursor moved in ONE local transaction; a change
  that does not open aborts the whole page and the cursor stays where it was.
- Key destruction shreds and records the event id in ``pending_acks`` in the page's
  transaction; the WAL is checkpointed after the commit, then the ack is sent; acks
  still pending are sent first at the next sync.
- ``resync_required`` (the cursor is below the cloud's compacted feed floor) rebuilds
  the subset from the start of the feed behind a persisted marker; one final local
  transaction shreds every synced item the cloud did not send, moves the cursor and
  clears the marker. Queued ops and the pending items they name are never touched by
  it; a crash mid-resync restarts it from scratch.
"""

from __future__ import annotations

from device import faults, resync_marks, store
from device import subset as subset_of
from device.errors import ResyncRequired, ServerError
from device.keys import load_private_key
from device.pull_ahead import PagesAhead
from device.sync_apply import RECORD_CHANGES, Applying, refuse_unknown_change, sent_items
from device.sync_base import FORGOTTEN
from device.sync_page import PageWork
from device.sync_push import MAX_PULL_ROUNDS, Pushing, code_of
from device.sync_rows import PageRows
from device.views import SyncReport
from protocol.messages import (
    MAX_PULL_PAGE,
    SUBSET_SINCE,
    AckRequest,
    AckResponse,
    PullRequest,
    PullResponse,
)

__all__ = ["MAX_PULL_ROUNDS", "SyncSession", "code_of", "refuse_unknown_change"]

# the (kind, id) of every item a page carries (what a resync notes as seen)
_sent_items = sent_items
# how often a resync starts over when compaction overtakes it, before giving up
_RESYNC_ATTEMPTS = 3


class SyncSession(Pushing, Applying):
    # --- the algorithm ----------------------------------------------------------------

    def run(self) -> SyncReport:
        self.send_acks()
        self.push()
        self.evict_deferred()
        self.pull()
        self.report.closing = self.client.closing
        return self.report

    # --- acks ------------------------------------------------------------------------

    def send_acks(self) -> None:
        pending = store.pending_acks(self.db)
        for start in range(0, len(pending), MAX_PULL_PAGE):
            chunk = pending[start : start + MAX_PULL_PAGE]
            self.client.post("/v1/ack", AckRequest(event_ids=chunk), AckResponse)
            with self.db.atomic():
                store.drop_acks(self.db, chunk)
            self.report.acked.extend(chunk)

    # --- the subset ---------------------------------------------------------------------

    def evict_deferred(self) -> None:
        """Records that left the subset while an operation on them was queued leave now
        that the queue was sent."""
        with self.db.atomic():
            done = subset_of.evict_deferred(self.db)
        if done:
            self.report.left.extend(done)
            self.db.checkpoint()

    def pull(self) -> None:
        if store.get_meta(self.db).resync_started_at is not None:
            self.resync()  # a resync a crash interrupted starts again from scratch
            return
        try:
            page = self._pull_page(store.get_meta(self.db).pull_cursor)
        except ResyncRequired:
            self.resync()
            return
        with PagesAhead(self._next_page) as ahead:
            while True:
                faults.reached("pull_answered")
                ahead.after(page)  # the next page is read while this one is applied
                self._apply_page(page, resyncing=False)
                if not page.has_more:
                    break
                try:
                    page = ahead.take()
                except ResyncRequired:
                    break
        if page.has_more:  # the cloud answered resync_required for the page after it
            self.resync()
            return
        self.send_acks()

    def _pull_page(self, cursor: str | None) -> PullResponse:
        uses = subset_of.unreported(self.db)

        def request(version: int) -> PullRequest:
            self._reported = uses if version >= SUBSET_SINCE else []
            return PullRequest(cursor=cursor, limit=MAX_PULL_PAGE, used=self._reported)

        return self.client.post("/v1/pull", request, PullResponse)

    def _next_page(self, cursor: str) -> PullResponse:
        """The page after ``cursor``, fetched ahead (``device.pull_ahead``) on another
        thread: it reads nothing local, and reports no uses (the sync's first request
        reported them; uses made since go with the next sync)."""
        return self.client.post(
            "/v1/pull", PullRequest(cursor=cursor, limit=MAX_PULL_PAGE, used=[]), PullResponse
        )

    def _apply_page(self, page: PullResponse, *, resyncing: bool) -> None:
        """Apply one page and move the cursor (a resync notes what it saw instead) in
        one local transaction; the page's derived rows (subject index, search rows and
        vectors, embedded in one batch) are written once at its end, in the same
        transaction (``device.sync_page``); checkpoint the WAL after it if anything was
        shredded."""
        shredded_before = len(self.report.shredded) + len(self.report.left)
        with self.db.atomic():
            subset_of.mark_reported(self.db, self._reported)
            self._reported = []
            meta = store.get_meta(self.db)
            private_key = load_private_key(meta.private_key)
            work = self._page = PageWork(space=self._space(), rows=PageRows(self.db))
            try:
                work.rows.load(page.changes)
                for change in page.changes:
                    self._apply_change(change, private_key)
                for record_id in (
                    c.record_id for c in page.changes if isinstance(c, RECORD_CHANGES)
                ):
                    work.index_due(record_id)
                work.finish(self.db)
            finally:
                self._page = None  # what the page opened goes with it, whatever happened
            if resyncing:
                resync_marks.note_seen(self.db, sent_items(page))
            else:
                store.set_cursor(self.db, page.cursor)
        self.report.pulled += len(page.changes)
        if len(self.report.shredded) + len(self.report.left) > shredded_before:
            self.db.checkpoint()

    # --- resync ----------------------------------------------------------------------

    def resync(self) -> None:
        """Rebuild this device's subset from the start of the cloud's feed.

        The marker is committed first; pages are applied as usual (held content is not
        rewritten, forgotten content is not stored again) and what they carried is
        noted; then ONE transaction shreds every synced record, episode and artifact the
        cloud did not send, moves the cursor and clears the marker. Queued operations
        and the pending items they name are untouched (the push sends them). A crash
        anywhere leaves the marker set, and the next sync starts again from scratch.
        """
        self.report.resynced = True
        for _attempt in range(_RESYNC_ATTEMPTS):
            with self.db.atomic():
                resync_marks.begin_resync(self.db, self.now())
            try:
                cursor = self._resync_pages()
            except ResyncRequired:
                # compaction moved the floor past this resync's own cursor: start over
                continue
            faults.reached("resync_pulled")
            self._finish_resync(cursor)
            self.send_acks()
            return
        raise ServerError(
            f"the cloud answered resync_required {_RESYNC_ATTEMPTS} times during a resync "
            "from the start of its feed; the resync will start again at the next sync"
        )

    def _resync_pages(self) -> str:
        page = self._pull_page(None)
        with PagesAhead(self._next_page) as ahead:
            while True:
                faults.reached("pull_answered")
                ahead.after(page)
                self._apply_page(page, resyncing=True)
                if not page.has_more:
                    return page.cursor
                page = ahead.take()

    def _finish_resync(self, cursor: str) -> None:
        at = self.now()
        with self.db.atomic():
            unseen = resync_marks.unseen_synced(self.db)
            self._shred(artifact_ids=unseen.artifact_ids, at=at)
            for record_id in unseen.record_ids:
                if (row := store.record_row(self.db, record_id)) and row["lifecycle"] != FORGOTTEN:
                    self._shred_closure(record_id, at)
            self._shred(episode_ids=unseen.episode_ids, at=at)
            resync_marks.note_kept(self.db)
            resync_marks.finish_resync(self.db, cursor)
        self.report.resync_removed = [
            *unseen.record_ids,
            *unseen.episode_ids,
            *unseen.artifact_ids,
        ]
        if self.report.resync_removed:
            self.db.checkpoint()
