"""The transition rules and the reference ledger (invariants 1, 4 and 6 in the pure core)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from protocol.ledger import Ledger, step
from protocol.model import LifecycleState
from protocol.operations import ForgetPermanently, ReceiptStatus, RefusalCode, Remember
from protocol.rules import Accept, EpisodeFacts, Facts, RecordFacts, Refuse, decide
from protocol.sentences import check_said
from tests.protocol.strategies import AT, EPISODES, RECORDS, op_sequences

EP = EPISODES[0]
REC = RECORDS[0]
TYPED = "My favorite number is not 1729."


def _remember(text: str, conversation: str = "c1") -> Remember:
    return Remember(
        op_id="op_aaaaaaaaaaaaaaaa",
        record_id=REC,
        text=text,
        conversation_id=conversation,
        source_episode_ids=[EP],
        made_at=AT,
    )


def _facts(record: RecordFacts | None = None) -> Facts:
    return Facts(record=record, episodes={EP: EpisodeFacts(EP, "c1", TYPED)})


def test_remember_whole_sentence_is_accepted() -> None:
    assert isinstance(decide(_remember(TYPED), _facts()), Accept)


def test_remember_fragment_is_refused_with_reason() -> None:
    decision = decide(_remember("1729"), _facts())
    assert isinstance(decision, Refuse)
    assert decision.code is RefusalCode.NOT_SAID
    assert "fragment" in decision.reason and REC in decision.reason


def test_remember_needs_its_episodes_in_the_same_conversation() -> None:
    assert decide(_remember(TYPED, "c2"), _facts()).code is RefusalCode.WRONG_CONVERSATION  # type: ignore[union-attr]
    missing = decide(_remember(TYPED), Facts())
    assert isinstance(missing, Refuse) and missing.code is RefusalCode.UNKNOWN_EPISODE


def test_forgotten_record_accepts_nothing() -> None:
    gone = RecordFacts(REC, LifecycleState.FORGOTTEN, 1)
    for op in (
        _remember(TYPED),
        ForgetPermanently(op_id="op_bbbbbbbbbbbbbbbb", record_id=REC, made_at=AT),
    ):
        decision = decide(op, _facts(gone))
        assert isinstance(decision, Refuse) and decision.code is RefusalCode.FORGOTTEN


def _run(ops: list) -> tuple[Ledger, list]:
    ledger, receipts = Ledger(), []
    for index, op in enumerate(ops):
        ledger, receipt = step(ledger, op, index, AT)
        receipts.append(receipt)
    return ledger, receipts


@given(op_sequences(), st.data())
def test_applying_an_op_twice_equals_applying_it_once(ops: list, data: st.DataObject) -> None:
    once, first_receipts = _run(ops)
    replayed: list = []
    for op in ops:
        replayed.append(op)
        if data.draw(st.booleans()):
            replayed.append(data.draw(st.sampled_from(replayed)))
    twice, receipts = _run(replayed)
    assert (twice.records, twice.texts, twice.episodes) == (once.records, once.texts, once.episodes)
    by_id = {r.op_id: r for r in first_receipts}
    seen: set[str] = set()
    for op, receipt in zip(replayed, receipts, strict=True):
        if op.op_id in seen:
            assert receipt.status is ReceiptStatus.DUPLICATE
            assert receipt.original_status is by_id[op.op_id].status
        else:
            assert receipt.status is by_id[op.op_id].status
        seen.add(op.op_id)


@given(op_sequences())
def test_forgotten_stays_forgotten_and_unreadable(ops: list) -> None:
    ledger, forgotten = Ledger(), {}
    for index, op in enumerate(ops):
        before = ledger.records.get(getattr(op, "record_id", ""))
        ledger, receipt = step(ledger, op, index, AT)
        if isinstance(op, ForgetPermanently) and receipt.status is ReceiptStatus.APPLIED:
            assert before is not None
            forgotten[op.record_id] = before
        for record_id in forgotten:
            assert ledger.records[record_id].lifecycle is LifecycleState.FORGOTTEN
            assert record_id not in ledger.texts


@given(op_sequences())
def test_every_record_is_a_whole_sentence_its_episodes_hold(ops: list) -> None:
    _, receipts = _run(ops)
    for op, receipt in zip(ops, receipts, strict=True):
        if isinstance(op, Remember) and receipt.status is ReceiptStatus.APPLIED:
            typed = []
            for later in ops:
                if getattr(later, "episode_id", None) in op.source_episode_ids:
                    typed.append(later.text)  # type: ignore[union-attr]
            assert check_said(op.text, typed).ok
