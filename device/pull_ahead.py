"""The next pulled page fetched while this one is applied (issue 21): the cloud reads
and seals page N+1 while the device opens and stores page N, so a long pull costs about
the slower side's time instead of the sum of both.

Invariants:
- At most one request is in flight, and the wire client is used by one thread at a
  time: the fetch runs on this module's one worker thread, and the session touches the
  client again only after ``take`` returned or ``close`` waited for the fetch.
- The page fetched ahead is the request the loop would have sent next (the cursor the
  page in hand returned); pages are still applied in order, each in its own local
  transaction, and the fetch ahead starts only after the page in hand passed its fault
  point (``pull_answered``), so a kill there sends nothing more than before.
- A failure of the fetch ahead (``ResyncRequired``, ``Offline``, a refusal) is raised by
  ``take``, where the loop would have met it. A failure while applying leaves ``close``
  to wait for the fetch in flight and drop its answer: the cloud then served a page this
  device did not apply, exactly as after a crash past a pull's answer, and the next sync
  asks again from the cursor that committed.
- Nothing is fetched ahead of a page that says it is the last (a one-change sync never
  starts the thread).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from protocol.messages import PullResponse


class PagesAhead:
    """Fetches the page after the one in hand, on one worker thread."""

    def __init__(self, fetch: Callable[[str], PullResponse]) -> None:
        self._fetch = fetch  # the page after a cursor
        self._pool: ThreadPoolExecutor | None = None
        self._ahead: Future[PullResponse] | None = None

    def after(self, page: PullResponse) -> None:
        """Start fetching the page after ``page``, if it says there is one."""
        if self._ahead is not None:
            raise RuntimeError("a page is already being fetched ahead; take it first")
        if not page.has_more:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memsync-pull")
        self._ahead = self._pool.submit(self._fetch, page.cursor)

    def take(self) -> PullResponse:
        """The page fetched ahead (its fetch's error, if it failed)."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            raise RuntimeError("no page is being fetched ahead")
        return ahead.result()

    def close(self) -> None:
        """Wait for a fetch still in flight and drop its answer."""
        self._ahead = None
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> PagesAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
