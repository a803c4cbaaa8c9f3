"""Where a local record, episode or artifact stands with the cloud: its ``sync_state``.

Invariants:
- The values are the strings the ``sync_state`` columns of ``records``, ``episodes``
  and ``artifacts`` hold and their CHECK constraints allow (``device.schema``); a
  ``StrEnum`` member equals its string, so rows written before the enum read the same.
- ``pending``: applied here, its op queued or not yet answered; ``synced``: the cloud
  applied it or sent it; ``refused``: the cloud refused the op that made it (the
  row keeps the reason). Nothing else is a sync state.
"""

from __future__ import annotations

from enum import StrEnum


class SyncState(StrEnum):
    PENDING = "pending"
    SYNCED = "synced"
    REFUSED = "refused"
