"""Receipts: built from a decision the same way on both sides, and told to the user.

Invariant: what the user is told about a committed effect comes from its durable
receipt alone, never from a later step's success, and never quotes an old body.
"""

from __future__ import annotations

from datetime import datetime

from protocol.operations import AddEpisode, AnyOperation, EffectKind, Receipt, ReceiptStatus
from protocol.rules import Accept, Decision

MESSAGES = {
    EffectKind.EPISODE_LOGGED: "Logged what you typed.",
    EffectKind.CREATED: "Remembered.",
    EffectKind.CORRECTED: (
        "Your correction was committed; the previous version is no longer active."
    ),
    EffectKind.NOT_IN_USE: "I still know it, but I won't use it. You can undo this.",
    EffectKind.IN_USE_AGAIN: "I'll use it again.",
    EffectKind.USAGE_RESTRICTED: "I'll only use it where you said.",
    EffectKind.USAGE_UNRESTRICTED: "I'll use it wherever it helps again.",
    EffectKind.CONFIRMED: "Confirmed; it is now active.",
    EffectKind.REAFFIRMED: "Noted: still true.",
    EffectKind.ENDED: "Noted: that is over now; I keep it as something in the past.",
    EffectKind.FORGOTTEN: "Permanently forgotten; it cannot be brought back.",
    EffectKind.ARTIFACT_ADDED: "Derived item stored.",
    EffectKind.PROJECT_OPENED: "Project open.",
    EffectKind.PROJECT_CLOSED: "Project closed; its memories are left out until you reopen it.",
    EffectKind.CANDIDATE_MARKED: "Noted as a memory candidate; it is written in the background.",
    EffectKind.SESSION_ENDED: "Conversation ended; its candidates will be consolidated.",
    EffectKind.LEARNED: "Learned in the background.",
    EffectKind.REFRESHED: "Updated with new evidence.",
    EffectKind.CORROBORATED: "A second, independent source confirms it; it is now active.",
    EffectKind.RULE_REVISED: "Behaviour rule updated; the earlier version stays in its history.",
    EffectKind.TIME_PASSED: "Its time has passed; I keep it as something in the past.",
}


def receipt_for(index: int, op: AnyOperation, decision: Decision, at: datetime) -> Receipt:
    """The receipt of one decided operation."""
    record_id = None if isinstance(op, AddEpisode) else getattr(op, "record_id", None)
    if isinstance(decision, Accept):
        return Receipt(
            index=index,
            op_id=op.op_id,
            status=ReceiptStatus.APPLIED if decision.conflict is None else ReceiptStatus.CONFLICT,
            reason=decision.conflict,
            effect=decision.kind,
            record_id=decision.record_id or record_id,
            versions=list(decision.versions),
            affected_records=list(decision.affected_records),
            applied_at=at,
        )
    return Receipt(
        index=index,
        op_id=op.op_id,
        status=ReceiptStatus.REFUSED,
        code=decision.code,
        reason=decision.reason,
        record_id=record_id,
    )


def duplicate_of(first: Receipt, index: int) -> Receipt:
    """What a replay of an already-answered op gets: the original, marked duplicate."""
    return first.model_copy(
        update={
            "index": index,
            "status": ReceiptStatus.DUPLICATE,
            "original_status": first.original_status or first.status,
        }
    )


def receipt_message(receipt: Receipt) -> str:
    """One sentence for the user, from the receipt alone."""
    status = receipt.original_status or receipt.status
    if status is ReceiptStatus.REFUSED or (
        status is ReceiptStatus.CONFLICT and receipt.effect is None
    ):
        return f"Not done: {receipt.reason}"
    if receipt.effect is None:
        return "Done."
    if status is ReceiptStatus.CONFLICT:  # applied, and flagged
        return f"{MESSAGES[receipt.effect]} Flagged: {receipt.reason}."
    return MESSAGES[receipt.effect]
