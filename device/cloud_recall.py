"""What the device tells its user about a cloud recall: the cloud's indexing lag, and
the fall-back to this device's own recall when the cloud is offline or slow.

Invariants:
- A cloud answer is parsed in the protocol version its request went out in
  (``protocol.versioned.parse``), so a field the version lacks is refused by name.
- An answer whose ``unindexed`` is above 0 keeps its lines and says, in its note, how
  many of the space's records the cloud could not search yet; it is never presented
  as complete.
- A fall-back answer is the device's own answer (scope ``device``) and its note says
  first why the cloud was not asked (unreachable, or slow: nothing was lost), then
  that only this device's records were searched.
"""

from __future__ import annotations

import dataclasses
import json

from device.errors import CloudSlow, Offline
from device.retrieval import Recall
from protocol.messages import RecallAnswer
from protocol.versioned import parse


def open_answer(plain: bytes, version: int) -> RecallAnswer:
    """The opened JSON of a ``RecallAnswer`` of protocol ``version``."""
    return parse(RecallAnswer, json.loads(plain), version)


def unindexed_note(unindexed: int) -> str:
    return (
        f"The cloud has not indexed {unindexed} record(s) of your space yet, so this "
        "answer may miss them; ask again in a moment."
    )


def with_unindexed(recall: Recall, unindexed: int) -> Recall:
    """``recall`` with the cloud's indexing lag added to its note (none: unchanged)."""
    if unindexed <= 0:
        return recall
    return dataclasses.replace(recall, note=f"{recall.note} {unindexed_note(unindexed)}")


def why_not_cloud(exc: Offline) -> str:
    if isinstance(exc, CloudSlow):
        waited = "" if exc.timeout is None else f" within {exc.timeout:g} s"
        return f"The cloud is slow (it did not answer{waited}); nothing was lost."
    return "The cloud is unreachable (offline)."


def fallen_back(local: Recall, exc: Offline) -> Recall:
    """The device's own answer, given because asking the cloud failed with ``exc``."""
    return dataclasses.replace(
        local, note=f"{why_not_cloud(exc)} Answered from this device instead. {local.note}"
    )
