"""What a run records while it happens, so its invariants can be checked afterwards.

Invariants: the trace holds only what the run itself did or saw at the moment it
happened — the operations devices queued (op ids), the receipts devices stored, what a
record's content and keys were *before* it was forgotten (captured before the forget
was made), and each device's last completed sync. Nothing in it is the cloud's word
alone; checks compare it against the cloud's and the devices' stores afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.operations import Receipt


@dataclass(frozen=True)
class IssuedOp:
    """An operation a device queued on the user's behalf."""

    op_id: str
    device: str  # "<user>/<device>"
    kind: str  # remember | correct | dont_use | forget_permanently
    record_id: str
    step: int
    text: str | None = None  # a remember's or correction's sentence


@dataclass
class ForgottenRecord:
    """A record forgotten permanently, with what must be unreadable afterwards."""

    record_id: str
    space_id: str
    device: str  # who forgot it
    step: int
    needles: dict[str, bytes] = field(default_factory=dict)  # label -> bytes to hunt for
    cloud_key_ids: set[str] = field(default_factory=set)  # wrapped keys that must go
    committed_step: int | None = None  # first step the cloud showed it forgotten
    committed_at: float | None = None  # run clock at that moment
    shredded_step: int | None = None  # step after which no device of the user held it
    shredded_at: float | None = None

    @property
    def seconds_to_shred(self) -> float | None:
        if self.committed_at is None or self.shredded_at is None:
            return None
        return max(0.0, self.shredded_at - self.committed_at)

    @property
    def steps_to_shred(self) -> int | None:
        if self.committed_step is None or self.shredded_step is None:
            return None
        return self.shredded_step - self.committed_step


@dataclass(frozen=True)
class ConcurrentEdit:
    """Two devices of one user corrected the same record while both were offline."""

    record_id: str
    space_id: str
    edits: tuple[tuple[str, str, str], ...]  # (device, op id, new text)
    step: int


@dataclass(frozen=True)
class StaleEdit:
    """An offline device's edit of a record another device had already forgotten
    (the cloud had committed the forget when the edit was made)."""

    record_id: str
    space_id: str
    device: str
    op_id: str
    step: int


@dataclass
class RunTrace:
    """Everything a run must remember for its invariant checks."""

    issued: list[IssuedOp] = field(default_factory=list)
    receipts: dict[str, tuple[str, Receipt]] = field(default_factory=dict)  # op -> device
    forgotten: dict[str, ForgottenRecord] = field(default_factory=dict)
    concurrent: list[ConcurrentEdit] = field(default_factory=list)
    stale: list[StaleEdit] = field(default_factory=list)
    last_synced: dict[str, int] = field(default_factory=dict)  # device -> step
    pending_problems: list[str] = field(default_factory=list)  # seen at sampled steps
    pending_samples: int = 0
    # syncs that ended in an error other than "offline": (step, device, the error)
    sync_errors: list[tuple[int, str, str]] = field(default_factory=list)

    def issue(self, op: IssuedOp) -> IssuedOp:
        self.issued.append(op)
        return op

    def acknowledge(self, device: str, receipt: Receipt) -> None:
        """A cloud receipt ``device`` stored for one of its operations."""
        if receipt.op_id is not None:
            self.receipts[receipt.op_id] = (device, receipt)

    def synced(self, device: str, step: int) -> None:
        """``device`` completed a sync: it should now equal the cloud's view."""
        self.last_synced[device] = step

    def wrote(self, device: str) -> None:
        """``device`` changed something locally: it no longer "synced last"."""
        self.last_synced.pop(device, None)
