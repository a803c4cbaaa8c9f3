"""What one work item becomes: a ``Plan`` (ops to apply, items they finish), built by a
planner inside the transaction that applies it.

Invariants:
- A planner reads only through its ``Context`` (the space's store session under the
  space lock, the vault, the extractors, the injected time); it writes nothing: the
  worker applies ``Plan.ops`` through ``CloudService.apply_system`` and completes the
  items in that same transaction.
- Every op id and every record id a planner makes is deterministic and keyed
  (``Context.op_id`` / ``Context.record_id``, see ``tokens``): one id per logical write
  (this candidate's record, this claim of this episode, this subject's summary over
  this set of events), whatever op kind the current state calls for, so planning the
  same item again gives the same ids and applying them again is a duplicate.
- Every op the consolidator makes is started by the assistant.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from cloud.consolidator.extractors import OnnxExtractor
from cloud.consolidator.tokens import keyed_id
from cloud.facts import FactsReader
from cloud.store.base import StoreSession, WorkItemRow
from cloud.vault import Vault
from protocol.consolidation.extract import Extractor
from protocol.model import Initiator
from protocol.operations import AnyOperation
from protocol.rules import EpisodeFacts, RecordFacts

BY = Initiator.ASSISTANT


@dataclass
class Plan:
    """The ops one item becomes, and what finishing it means."""

    ops: list[AnyOperation] = field(default_factory=list)
    finishes: list[tuple[str, int | None]] = field(default_factory=list)  # other items
    record_id: str | None = None  # what the item became (``work_items.record_id``)
    drop: str | None = None  # why the item is dropped (then ``ops`` is empty)

    @classmethod
    def dropped(cls, reason: str) -> Plan:
        return cls(drop=reason)


@dataclass
class Context:
    """What a planner may read, for one space at one moment."""

    s: StoreSession
    vault: Vault
    space_id: str
    now: datetime
    onnx: OnnxExtractor
    extractor: Extractor

    @property
    def reader(self) -> FactsReader:
        return FactsReader(self.s, self.vault, self.space_id)

    def op_id(self, *parts: str) -> str:
        return keyed_id(self.vault, self.space_id, "op", *parts)

    def record_id(self, *parts: str) -> str:
        return keyed_id(self.vault, self.space_id, "rec", *parts)

    def episode(self, episode_id: str) -> EpisodeFacts | None:
        """The episode's words and source, or None once forgotten."""
        return self.reader.episodes([episode_id]).get(episode_id)

    def episodes(self, episode_ids: Iterable[str]) -> dict[str, EpisodeFacts]:
        return self.reader.episodes(episode_ids)

    def record(self, record_id: str) -> RecordFacts | None:
        """The record's state and current content (None content once forgotten)."""
        row = self.s.record(self.space_id, record_id)
        return None if row is None else self.reader.record(row)


def describe(item: WorkItemRow) -> str:
    return f"{item.item_kind} {item.name} of {item.space_id}"
