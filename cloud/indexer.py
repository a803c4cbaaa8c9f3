"""The cloud's post-commit indexer: spaces are indexed after their pushes commit, never
inside a request.

Invariants:
- ``schedule`` only marks a space as owed an index catch-up and wakes the indexer; it
  reads and writes nothing, so it is safe (and cheap) right after any commit.
- Mode ``background`` (``CloudConfig.indexing``, the default): one daemon thread per
  service indexes the owed spaces one at a time (``SearchIndex.try_catch_up``). An
  in-process cloud (tests, ``make demo``) ends up indexed with no worker run by hand.
  Mode ``manual``: nothing runs by itself; ``run_pending`` (tests, the worker's
  reindex job) indexes what is owed, in the caller's thread.
- Another process indexing the same space (PostgreSQL advisory lock) is not an error:
  the space stays owed and is tried again ``retry_after`` seconds later, when it finds
  the work done. A failure is logged and retried the same way, at most
  ``MAX_ATTEMPTS`` times in a row; the next push or recall that finds the space behind
  owes it again.
- ``wait_idle`` waits on a condition (no polling): owed spaces none, runs in flight
  none. ``close`` ends the thread between spaces.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Literal

log = logging.getLogger("memsync.indexer")

IndexingMode = Literal["background", "manual"]
MAX_ATTEMPTS = 5
RETRY_AFTER = 1.0  # seconds before a space another process was indexing is tried again


class Indexer:
    """Runs ``catch_up(space_id)`` for every space a commit made owed."""

    def __init__(
        self,
        catch_up: Callable[[str], int | None],
        mode: IndexingMode = "background",
        *,
        retry_after: float = RETRY_AFTER,
    ) -> None:
        if mode not in ("background", "manual"):
            raise ValueError(f"indexing mode {mode!r} is not 'background' or 'manual'")
        self.mode: IndexingMode = mode
        self._catch_up = catch_up
        self._retry_after = retry_after
        self._cond = threading.Condition()
        self._owed: dict[str, int] = {}  # space -> failed attempts in a row (insertion order)
        self._running = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        self.indexed = 0  # records indexed by this indexer, in all

    def schedule(self, space_id: str) -> None:
        """The space changed (or a query found it behind): index it after this."""
        with self._cond:
            if self._closed:
                return
            self._owed.setdefault(space_id, 0)
            if self.mode == "background" and self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="memsync-indexer", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def owed(self) -> list[str]:
        with self._cond:
            return list(self._owed)

    def run_pending(self) -> int:
        """Index every owed space now, in this thread; return how many records were
        indexed. A space another process is indexing stays owed."""
        with self._cond:
            spaces = list(self._owed)
        total = 0
        for space_id in spaces:
            total += self._run(space_id) or 0
        return total

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until nothing is owed and nothing runs; False if ``timeout`` passed."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._owed and not self._running, timeout)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)

    # --- the background thread ------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or bool(self._owed))
                if self._closed:
                    return
                space_id = next(iter(self._owed))
            if self._run(space_id) is None:
                with self._cond:  # busy elsewhere or failed: try again a little later
                    self._cond.wait_for(lambda: self._closed, self._retry_after)

    def _run(self, space_id: str) -> int | None:
        """One catch-up of ``space_id``; None when it stays owed (busy, or it failed)."""
        with self._cond:
            if space_id not in self._owed:
                return 0
            self._running += 1
            # taken off before it runs: a commit while it runs owes the space again
            attempts = self._owed.pop(space_id)
        indexed: int | None = None
        try:
            indexed = self._catch_up(space_id)
        except Exception:
            log.exception("indexing space %s failed (attempt %d)", space_id, attempts + 1)
            attempts += 1
        finally:
            with self._cond:
                self._running -= 1
                if indexed is None and attempts < MAX_ATTEMPTS and not self._closed:
                    self._owed.setdefault(space_id, attempts)
                elif indexed is not None:
                    self.indexed += indexed
                self._cond.notify_all()
        return indexed
