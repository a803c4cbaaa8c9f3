"""Clocks for simulated fleets: one fleet clock, and each device's possibly skewed view.

Invariants:
- Every clock returns an aware UTC ``datetime``; none reads the system time unless it
  is the default ``system_clock``.
- A ``SkewedClock`` is always its base clock plus a fixed offset, so moving the fleet
  clock moves every device's clock with it and the skew between them never drifts.
- Skew is a device-side matter only: the cloud keeps its own clock (``CloudConfig``),
  and the server's order never depends on what any device's clock says.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from simulator.errors import FaultSpecError

Clock = Callable[[], datetime]

#: The instant a ``FleetClock`` starts at unless told otherwise.
FLEET_EPOCH = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def system_clock() -> datetime:
    """The real time, as an aware UTC timestamp."""
    return datetime.now(UTC)


def _aware(when: datetime, what: str) -> datetime:
    if when.tzinfo is None or when.utcoffset() is None:
        raise FaultSpecError(f"{what} must be an aware datetime, got the naive {when!r}")
    return when.astimezone(UTC)


class FleetClock:
    """A simulated clock: starts at ``start`` and moves ``tick`` per reading (zero keeps
    it still); ``advance`` and ``set`` move it explicitly."""

    def __init__(self, start: datetime = FLEET_EPOCH, *, tick: timedelta = timedelta(0)) -> None:
        if tick < timedelta(0):
            raise FaultSpecError(f"a fleet clock never runs backwards; tick {tick} is negative")
        self._now = _aware(start, "the fleet clock's start")
        self.tick = tick

    def __call__(self) -> datetime:
        current = self._now
        self._now += self.tick
        return current

    def peek(self) -> datetime:
        """The current reading, without moving the clock."""
        return self._now

    def advance(self, by: timedelta) -> datetime:
        if by < timedelta(0):
            raise FaultSpecError(f"a fleet clock never runs backwards; cannot advance by {by}")
        self._now += by
        return self._now

    def set(self, when: datetime) -> None:
        when = _aware(when, "the fleet clock's new time")
        if when < self._now:
            raise FaultSpecError(
                f"a fleet clock never runs backwards: it reads {self._now.isoformat()}, "
                f"cannot set it to {when.isoformat()}"
            )
        self._now = when


class SkewedClock:
    """A device's clock: its base clock (the fleet's) plus a fixed ``skew``, which may be
    negative (the device is behind) or positive (ahead)."""

    def __init__(self, base: Clock, skew: timedelta) -> None:
        self.base = base
        self.skew = skew

    def __call__(self) -> datetime:
        return _aware(self.base(), "the base clock's reading") + self.skew

    def __repr__(self) -> str:
        return f"SkewedClock(skew={self.skew})"
