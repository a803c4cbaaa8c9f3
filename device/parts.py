"""The agent's parts that every concern module is handed: the database, the clock and
the randomness.

Invariants:
- Time comes only from the injected clock and is always timezone-aware UTC: a naive
  datetime from the clock is refused (``utc_now``), never guessed.
- Ids and keys come only from the injected randomness (``new_id``); nothing here draws
  from the system.
- The parts are handed explicitly to the module functions of ``device/`` that the
  agent's methods delegate to; none of those modules holds the agent itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypedDict

import httpx

from device.db import Database
from protocol.ids import make_id
from protocol.version import VersionRange

Clock = Callable[[], datetime]
RandomBytes = Callable[[int], bytes]


class Injected(TypedDict, total=False):
    """What a caller injects into a ``DeviceAgent`` (each optional): the transport of its
    one cloud client, the clock, the randomness, and the protocol versions it speaks."""

    transport: httpx.BaseTransport | None  # None: real HTTP
    clock: Clock | None  # None: the system clock, in UTC
    random_bytes: RandomBytes | None  # None: ``secrets.token_bytes``
    protocol_versions: VersionRange | None  # None: every version this code speaks


def system_clock() -> datetime:
    return datetime.now(UTC)


def utc_now(clock: Clock) -> datetime:
    """The clock's time in UTC; a naive datetime is an error, not a guess."""
    now = clock()
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"the injected clock returned a naive datetime {now!r}")
    return now.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Parts:
    db: Database
    now: Callable[[], datetime]  # timezone-aware UTC (``utc_now`` of the agent's clock)
    random: RandomBytes
    # embedding models this process found every vector current for (``rebuild_vectors``):
    # every later write indexes in its own transaction, so the scan need not run again
    vectors_current: set[str] = field(default_factory=set, compare=False)

    def iso(self) -> str:
        """Now, as the ISO string the store keeps."""
        return self.now().isoformat()

    def new_id(self, prefix: str) -> str:
        return make_id(prefix, self.random(16))
