"""The device subset as a device asks about it: its view, its policy, its pins.

Invariants:
- Only an enrolled device of an open space reads or changes its own subset; a policy
  or a pin is written under the space lock and the cloud chooses again at once
  (``cloud.subset.SubsetKeeper.evaluate``, forced), in the same transaction, so the
  device hears what entered and left at its next pull.
- Reading the subset writes only a first choice, for a device never chosen for.
"""

from __future__ import annotations

from cloud.admission import Admission
from cloud.store import SqlStore
from cloud.subset import SubsetKeeper
from protocol.messages import PinRequest, SubsetPolicyRequest, SubsetResponse


class Subsets:
    """The subset doors of one service."""

    def __init__(self, store: SqlStore, keeper: SubsetKeeper, admission: Admission) -> None:
        self.store = store
        self.keeper = keeper
        self._admission = admission

    def subset(self, space_id: str, device_id: str) -> SubsetResponse:
        """The calling device's subset: policy, pins and what the cloud last chose."""
        with self.store.session(space_id, lock=True) as s:
            self._admission.enrolled(s, space_id, device_id)
            if s.subset_state(space_id, device_id) is None:
                self.keeper.evaluate(s, space_id, device_id)
            return SubsetResponse(subset=self.keeper.view(s, space_id, device_id))

    def set_policy(self, space_id: str, device_id: str, req: SubsetPolicyRequest) -> SubsetResponse:
        """Replace the calling device's policy; the cloud chooses again at once, and the
        device hears what entered and left at its next pull."""
        with self.store.session(space_id, lock=True) as s:
            self._admission.check_open(s, space_id)
            self._admission.enrolled(s, space_id, device_id)
            self.keeper.set_policy(s, space_id, device_id, req.policy)
            self.keeper.evaluate(s, space_id, device_id, force=True)
            return SubsetResponse(subset=self.keeper.view(s, space_id, device_id))

    def pin(self, space_id: str, device_id: str, req: PinRequest) -> SubsetResponse:
        """Pin (or unpin) a record to the calling device; the cloud chooses again at once."""
        with self.store.session(space_id, lock=True) as s:
            self._admission.check_open(s, space_id)
            self._admission.enrolled(s, space_id, device_id)
            self.keeper.pin(s, space_id, device_id, req.record_id, req.pinned)
            self.keeper.evaluate(s, space_id, device_id, force=True)
            return SubsetResponse(subset=self.keeper.view(s, space_id, device_id))
