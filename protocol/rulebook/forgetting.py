"""The rules for forgetting: one record permanently, or a whole life area (or all
memory) with strong authentication.

Invariants:
- Forgetting covers everything derived from the record, transitively
  (``derivation_closure``); a forgotten record accepts no further op.
- A mass forget needs the user as initiator and a proof that verifies against the
  account key (``protocol.strongauth``).
- A record never seen here whose episodes are held still has its words forgotten.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from protocol import strongauth
from protocol.model import Initiator, LifecycleState
from protocol.operations import EffectKind, ForgetArea, ForgetPermanently, RefusalCode
from protocol.rulebook.effects import Accept, Decision, ForgetRecords, Refuse, refuse_forgotten
from protocol.rulebook.facts import DerivedItem, Facts


def derivation_closure(
    roots: Sequence[str], children: Mapping[str, Sequence[DerivedItem]]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Every record and artifact derived, directly or not, from ``roots`` (roots included)."""
    records: list[str] = []
    artifacts: list[str] = []
    seen: set[tuple[str, str]] = set()
    stack = [DerivedItem("record", r) for r in reversed(roots)]
    while stack:
        item = stack.pop()
        if (item.kind, item.item_id) in seen:
            continue
        seen.add((item.kind, item.item_id))
        if item.kind == "artifact":
            artifacts.append(item.item_id)
            continue
        records.append(item.item_id)
        stack.extend(reversed(list(children.get(item.item_id, ()))))
    return tuple(records), tuple(sorted(artifacts))


def forget(op: ForgetPermanently, facts: Facts) -> Decision:
    if facts.record is None:
        held = tuple(sorted(e for e in op.episode_ids if e in (facts.episodes or {})))
        if held:
            # never seen here, forgotten where it was made: its words go all the same
            effect = ForgetRecords((), episode_ids=held)
            return Accept((effect,), EffectKind.FORGOTTEN, op.record_id)
        return Refuse(
            RefusalCode.UNKNOWN_RECORD, f"record {op.record_id} does not exist in this space"
        )
    if facts.record.lifecycle is LifecycleState.FORGOTTEN:
        return refuse_forgotten(op.record_id)
    records, artifacts = derivation_closure([op.record_id], facts.children)
    effect = ForgetRecords(records, artifacts)
    return Accept((effect,), EffectKind.FORGOTTEN, op.record_id, (), records)


def forget_area(op: ForgetArea, facts: Facts) -> Decision:
    what = f"all memory in {op.area.value}" if op.area else "all memory"
    if op.initiated_by is not Initiator.USER:
        return Refuse(
            RefusalCode.NOT_ALLOWED,
            f"forgetting {what} can only be started by the user, never by the assistant",
        )
    if facts.account_key is None or not strongauth.verify(
        facts.account_key,
        op.proof,
        facts.space_id,
        op.op_id,
        op.area.value if op.area else None,
    ):
        return Refuse(
            RefusalCode.STRONG_AUTH_REQUIRED,
            f"forgetting {what} needs strong authentication: the proof does not verify "
            "against this account's key",
        )
    records, artifacts = derivation_closure(list(facts.area_records), facts.children)
    effect = ForgetRecords(records, artifacts, all_episodes=op.area is None)
    return Accept((effect,), EffectKind.FORGOTTEN, None, (), records)
