"""The change feed outside a pull page: where it stands (a live pull waits for it to
move), whether subset news waits, acknowledgements of key destructions, the forget
status, and compaction.

Invariants:
- Compaction (``compact``) deletes only change-feed rows that carry nothing any more,
  never a key destruction a registered, unrevoked holder has not acknowledged, and
  raises the feed floor in the same transaction, under the space lock.
- An acknowledgement names events of the caller's own space only, and counts once
  however often it is repeated; a space that ended takes none (``AccountEnded``).
- ``pending`` answers ids, names and times, never content.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from cloud.admission import Admission
from cloud.cursors import decode_subset_gen
from cloud.errors import NotFound
from cloud.store import SqlStore
from cloud.store.base import CompactionReport
from protocol.messages import (
    SUBSET_SINCE,
    AckRequest,
    AckResponse,
    ForgetStatus,
    PendingDevice,
    PendingResponse,
    PullRequest,
)

log = logging.getLogger("memsync.cloud")


class Feed:
    """The feed's own reads and upkeep, for one service."""

    def __init__(
        self, store: SqlStore, clock: Callable[[], datetime], admission: Admission
    ) -> None:
        self.store = store
        self._clock = clock
        self._admission = admission

    def last_seq(self, space_id: str) -> int:
        """Where the space's change feed is now (a live pull waits for it to move)."""
        with self.store.session() as s:
            return s.last_seq(space_id)

    def subset_news(self, space_id: str, device_id: str, req: PullRequest) -> bool:
        """Whether enters or leaves wait for this protocol-3 pull (a policy or pin changed
        since its cursor): a live pull then answers at once instead of waiting."""
        if req.protocol_version < SUBSET_SINCE:
            return False
        gen = decode_subset_gen(req.cursor) or 0
        with self.store.session() as s:
            return bool(s.subset_log_after(space_id, device_id, gen, 1))

    def compact(self, space_id: str) -> CompactionReport:
        """Compact the space's change feed under the space lock: delete the rows that
        carry nothing any more (superseded states and projects, content whose keys were
        destroyed, key destructions every registered, unrevoked holder acknowledged) and
        raise the feed floor. Forget events, skeletons, pending rows and receipts are
        untouched; a pull whose cursor is below the floor is answered ``ResyncRequired``."""
        with self.store.session(space_id, lock=True) as s:
            if not s.space_exists(space_id):
                raise NotFound(f"space {space_id} does not exist")
            report = s.compact_changes(space_id)
        log.info(
            "compacted %s: %d row(s) deleted, floor %d -> %d",
            space_id,
            report.total_deleted,
            report.previous_floor,
            report.floor,
        )
        return report

    def ack(self, space_id: str, device_id: str, req: AckRequest) -> AckResponse:
        acknowledged = list(dict.fromkeys(req.event_ids))
        with self.store.session(space_id) as s:
            self._admission.check_open(s, space_id)
            s.ack(space_id, device_id, acknowledged, self._clock())
        return AckResponse(acknowledged=acknowledged)

    def pending(self, space_id: str) -> PendingResponse:
        with self.store.session(space_id) as s:
            statuses = s.forget_statuses(space_id)
        return PendingResponse(
            forgets=[
                ForgetStatus(
                    record_id=st.record_id or None,
                    forgotten_at=st.forgotten_at,
                    pending=[PendingDevice(device_id=d, device_name=n) for d, n in st.pending],
                )
                for st in statuses
            ]
        )
