"""What the agent returns to its callers: plain, frozen values.

Invariants: a skeleton view never carries text; a recall hit is always an active,
non-refused record whose line is labelled by ``protocol.presentation.present``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.model import LifecycleState


@dataclass(frozen=True, slots=True)
class LocalResult:
    """A local operation applied at once and queued for the cloud (sync_state pending)."""

    record_id: str
    op_id: str
    sync_state: str = "pending"
    forgotten_at: str | None = None


@dataclass(frozen=True, slots=True)
class RecallHit:
    record_id: str
    text: str
    epistemic_state: str
    line: str
    score: int


@dataclass(frozen=True, slots=True)
class RecordView:
    record_id: str
    lifecycle: str
    sync_state: str
    version: int | None = None
    text: str | None = None
    epistemic_state: str | None = None
    recorded_at: str | None = None
    refusal_reason: str | None = None
    forgotten_at: str | None = None

    @property
    def lifecycle_state(self) -> LifecycleState:
        return LifecycleState(self.lifecycle)

    @property
    def is_skeleton(self) -> bool:
        return self.lifecycle_state is LifecycleState.FORGOTTEN


@dataclass(slots=True)
class SyncReport:
    acked: list[int] = field(default_factory=list)
    pushed: int = 0
    applied: int = 0
    duplicates: int = 0
    refused: list[tuple[str, str, str]] = field(default_factory=list)  # op_id, code, reason
    pull_required: bool = False
    pulled: int = 0
    shredded: list[str] = field(default_factory=list)
    ignored: int = 0  # pulled changes for content this device already forgot
