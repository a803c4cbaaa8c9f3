"""The end of an account: the user deletes it, or the service shuts down (for its
region). All of its memory becomes unreadable the way a permanent forget makes one
record unreadable: by destroying keys.

Invariants:
- ``end_in_transaction`` runs inside ONE record-store transaction under the space lock
  (``CloudService.end_space``): every live record, every episode and every artifact
  goes through the forget cascade (``cloud.effects.Forgetting`` with ``all_episodes``)
  on behalf of no device, so the skeletons, the ``key_destruction`` rows, the forget
  events with their pending holders, and the dropped search, subject-index and
  derivation rows and consolidator work are exactly a forget's. In the same
  transaction the space's plain leftovers go (project names and the feed rows naming
  them, enrollment codes, conversation tokens), every stored receipt's reason is
  replaced (a refusal's reason may quote what the user typed), the space is marked
  ended and its name becomes its id (the user's name is personal data).
- After commit, the forget events' data keys are destroyed, then every key of the space
  left in the key store (space key, and with it the subject-index key derived from it,
  search key, any data key); ``keys_destroyed_at`` is set only once the key store has
  done it, and ``CloudService.ensure_destroyed`` finishes an end a crash interrupted.
- What stays: the space row (id, when, why), skeletons (ids, states, times), the
  change feed's ids, receipts without reasons, device rows. The pending list names
  every device that has not confirmed it wiped its copy (a revoked device too, until
  it confirms).
- Ending an ended space changes nothing: the existing end is answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from cloud.effects import EffectWriter, Forgetting
from cloud.store.base import SpaceEndRow, StoreSession
from cloud.store.rooms.end import EndRoom
from cloud.vault import Vault
from protocol.messages import PendingDevice
from protocol.operations import Receipt
from protocol.rules import ForgetRecords

# what a receipt's reason becomes when its account ends
REDACTED_REASON = "removed when the account ended (a reason may quote the user's words)"


class EndReason(StrEnum):
    DELETED = "deleted"  # the user deleted the account (strong authentication)
    SERVICE_SHUTDOWN = "service_shutdown"  # the service shut down (or left the region)


def why(reason: str, region: str) -> str:
    """The reason of an end, in words (for errors, the CLI and logs)."""
    if reason == EndReason.DELETED:
        return "its user deleted the account"
    return f"the memsync service shut down for region {region!r}"


@dataclass(frozen=True, kw_only=True)
class AccountEnd:
    """An ended account: when and why, when its keys were destroyed (None: not yet),
    and the devices that have not confirmed they wiped their copy."""

    space_id: str
    ended_at: datetime
    reason: EndReason
    keys_destroyed_at: datetime | None
    pending: tuple[PendingDevice, ...]


def account_end(s: EndRoom, end: SpaceEndRow) -> AccountEnd:
    return AccountEnd(
        space_id=end.space_id,
        ended_at=end.ended_at,
        reason=EndReason(end.reason),
        keys_destroyed_at=end.keys_destroyed_at,
        pending=tuple(
            PendingDevice(device_id=d.device_id, device_name=d.name)
            for d in s.pending_devices(end.space_id)
        ),
    )


def end_in_transaction(
    s: StoreSession, vault: Vault, space_id: str, reason: EndReason, now: datetime
) -> None:
    """Forget everything of the space and mark it ended (call under the space lock, in
    the transaction that commits it; the keys are destroyed after commit)."""
    records = tuple(r.record_id for r in s.live_records(space_id))
    artifact_rows = s.artifacts(space_id, s.artifact_ids(space_id))
    gone = s.forgotten_key_ids(space_id, (a.key_id for a in artifact_rows.values()))
    artifacts = tuple(a for a, row in sorted(artifact_rows.items()) if row.key_id not in gone)
    writer = EffectWriter(s, vault, space_id, None, now)
    Forgetting(writer).forget(ForgetRecords(records, artifacts, all_episodes=True))
    writer.finish()
    s.drop_plain_leftovers(space_id)
    for op_id, raw in s.receipts_of(space_id):
        receipt = Receipt.model_validate_json(raw)
        if receipt.reason is not None and receipt.reason != REDACTED_REASON:
            redacted = receipt.model_copy(update={"reason": REDACTED_REASON})
            s.replace_receipt(space_id, op_id, redacted.model_dump_json())
    s.mark_space_ended(space_id, now, reason.value)
