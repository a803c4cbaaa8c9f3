"""What the agent asks the cloud besides a sync: the account's devices, the forgets
still pending, and this device's subset (read it, change its rules, pin a record).

Invariants:
- Each call needs an enrolled device (``NotEnrolled`` before anything is sent) and
  runs inside the wipe guard (``device.wiping``), like every call to the cloud.
- Reads write no memory; a subset answer only notes the count the cloud gave, for
  the sync status (``device.sync_status``).
- A change of the subset's rules or pins tells the live loop at once (``queued``):
  what enters and leaves arrives with the next sync, and a record that leaves is
  evicted, never forgotten.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from device.client import CloudClient
from device.enrollment import require_enrolled
from device.parts import Parts
from device.sync_status import SyncTracker
from protocol.messages import (
    DevicesResponse,
    DeviceStatus,
    ForgetStatus,
    PendingResponse,
    PinRequest,
    SubsetPolicyRequest,
    SubsetResponse,
)
from protocol.subset import SubsetPolicy, SubsetView


class Remote:
    def __init__(
        self,
        parts: Parts,
        cloud: Callable[[], CloudClient],
        revocable: Callable[[], AbstractContextManager[None]],
        status: SyncTracker,
        queued: Callable[[], None],
    ) -> None:
        self._parts = parts
        self._cloud = cloud
        self._revocable = revocable
        self._status = status
        self._queued = queued

    def devices(self) -> list[DeviceStatus]:
        require_enrolled(self._parts.db, "list the account's devices")
        with self._revocable():
            return list(self._cloud().get("/v1/devices", DevicesResponse).devices)

    def pending_forgets(self) -> list[ForgetStatus]:
        require_enrolled(self._parts.db, "ask which forgets are pending")
        with self._revocable():
            return list(self._cloud().get("/v1/forgets/pending", PendingResponse).forgets)

    def subset(self) -> SubsetView:
        require_enrolled(self._parts.db, "read its subset")
        with self._revocable():
            return self._counted(self._cloud().get("/v1/subset", SubsetResponse).subset)

    def set_subset_policy(self, policy: SubsetPolicy) -> SubsetView:
        require_enrolled(self._parts.db, "change its subset")
        with self._revocable():
            request = SubsetPolicyRequest(policy=policy)
            view = self._cloud().post("/v1/subset/policy", request, SubsetResponse).subset
        self._queued()  # a live loop's pull waits for the feed, which this did not move
        return self._counted(view)

    def pin(self, record_id: str, pinned: bool) -> SubsetView:
        require_enrolled(self._parts.db, "pin a record")
        with self._revocable():
            request = PinRequest(record_id=record_id, pinned=pinned)
            view = self._cloud().post("/v1/subset/pins", request, SubsetResponse).subset
        self._queued()  # a live loop's pull waits for the feed, which this did not move
        return self._counted(view)

    def _counted(self, view: SubsetView) -> SubsetView:
        self._status.cloud_counted(view.records, self._parts.now())
        return view
