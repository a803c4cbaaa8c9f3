"""Who may call: a device enrolled in a space that has not ended.

Invariants:
- Every device call of a space passes ``check_open`` (``AccountEnded``, 410, once the
  space ended) and then ``enrolled`` (``Unauthorized`` for a device not enrolled in
  that space: an id from another space reads exactly like an unknown one).
- Reads only: nothing here writes, so a refusal changes nothing.
"""

from __future__ import annotations

from typing import Protocol

from cloud.account_end import AccountEnd, why
from cloud.errors import AccountEnded, Unauthorized
from cloud.store.base import DeviceRow, SpaceEndRow
from cloud.store.rooms.accounts import AccountsRoom
from cloud.store.rooms.end import EndRoom


class DoorRooms(AccountsRoom, EndRoom, Protocol):
    """What admission reads: the devices (accounts room) and the end of the space."""


class Admission:
    """The doors of one service; ``region`` names the region in an ended account's reason."""

    def __init__(self, region: str) -> None:
        self.region = region

    def enrolled(self, s: DoorRooms, space_id: str, device_id: str) -> DeviceRow:
        """The caller's device row, once its space is known not to have ended
        (``AccountEnded``) and the device to be enrolled in it (``Unauthorized``)."""
        self.check_open(s, space_id)
        device = s.device(space_id, device_id)
        if device is None:
            raise Unauthorized(f"device {device_id} is not enrolled in this space")
        return device

    def check_open(self, s: EndRoom, space_id: str) -> None:
        end = s.space_end(space_id)
        if end is not None:
            raise self.ended(end)

    def ended(self, end: SpaceEndRow) -> AccountEnded:
        return AccountEnded(end.space_id, end.ended_at, why(end.reason, self.region))


def end_row(end: AccountEnd) -> SpaceEndRow:
    return SpaceEndRow(end.space_id, end.ended_at, end.reason.value, end.keys_destroyed_at)
