"""How a worker process is asked to stop: SIGTERM or SIGINT.

Invariants:
- From the moment ``StopSignals`` is made (the first thing ``memsync cloud worker``
  does), a stop is never fatal: the two signals get a handler that does nothing but let
  Python write the signal number to a socket (``signal.set_wakeup_fd``), whatever
  thread the kernel delivers them to (native thread pools exist from import time, so
  blocking them per thread cannot work).
- A stop asked for while the worker still loads stays in the socket until the worker
  looks (``pending``, ``wait``): it ends the worker before its first claim.
- The handler takes no lock and touches no object, so it cannot deadlock a thread it
  interrupts; the waiting happens in ``wait``, a plain blocking read.
- Made in the main thread (Python's rule for handlers); ``close`` puts back what was.
"""

from __future__ import annotations

import signal
import socket
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_STOP_NUMBERS = frozenset(int(s) for s in STOP_SIGNALS)  # as the wakeup socket carries them


def _noted(_signum: int, _frame: FrameType | None) -> None:
    """Nothing: the signal's number is already in the wakeup socket."""


class StopSignals:
    """SIGTERM and SIGINT, kept as data until the worker takes them."""

    def __init__(self) -> None:
        self._read, self._write = socket.socketpair()
        self._write.setblocking(False)  # set_wakeup_fd's requirement
        self._previous_fd = signal.set_wakeup_fd(self._write.fileno())
        self._previous: dict[int, Any] = {int(s): signal.signal(s, _noted) for s in STOP_SIGNALS}
        self._taken: str | None = None

    def pending(self) -> bool:
        """A stop was asked for (and is still there to take)."""
        return self._taken is not None or self._take(block=False)

    def wait(self) -> str:
        """Block until SIGTERM or SIGINT (at once if one is pending); its name."""
        while self._taken is None:
            self._take(block=True)
        return self._taken

    def _take(self, *, block: bool) -> bool:
        self._read.setblocking(block)
        try:
            data = self._read.recv(64)
        except BlockingIOError:
            return False
        stops = [signal.Signals(b).name for b in data if b in _STOP_NUMBERS]
        if stops:
            self._taken = stops[0]
        return bool(stops)

    def close(self) -> None:
        """Put back the handlers and the wakeup descriptor there were before."""
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        signal.set_wakeup_fd(self._previous_fd)
        self._read.close()
        self._write.close()
