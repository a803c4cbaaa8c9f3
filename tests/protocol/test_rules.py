"""The transition rules and the reference ledger (invariants 1, 3, 4, 6, 7 in the pure core)."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import strongauth
from protocol.ledger import Ledger, step
from protocol.model import (
    ArtifactKind,
    ContentType,
    EpistemicState,
    Initiator,
    Layer,
    LifeArea,
    LifecycleState,
    RecordContent,
    Sensitivity,
    SourceKind,
    TimeKind,
    UsageRestriction,
)
from protocol.operations import (
    AddArtifact,
    AddEpisode,
    AnyOperation,
    Confirm,
    Correct,
    DontUse,
    EffectKind,
    ForgetArea,
    ForgetPermanently,
    Infer,
    Reaffirm,
    ReceiptStatus,
    RefusalCode,
    Remember,
    RestrictUsage,
    SetProject,
    UseAgain,
)
from protocol.rules import DerivedItem, derivation_closure
from protocol.sentences import check_said
from tests.protocol.strategies import AT, op_sequences

USER, ASSISTANT = Initiator.USER, Initiator.ASSISTANT
SPACE = "sp_rulestest01"


class Script:
    """Applies ops to a ledger with fresh op ids and a clock that moves a minute per op."""

    def __init__(self) -> None:
        self.ledger = Ledger(space_id=SPACE)
        self.n = 0

    def base(self, by: Initiator = USER) -> dict[str, object]:
        self.n += 1
        return {
            "op_id": f"op_{self.n:010d}",
            "made_at": AT + timedelta(minutes=self.n),
            "initiated_by": by,
        }

    def run(self, op: AnyOperation):  # type: ignore[no-untyped-def]
        self.ledger, receipt = step(self.ledger, op, 0, op.made_at)
        return receipt

    def say(self, episode: str, text: str, conversation: str = "c1"):  # type: ignore[no-untyped-def]
        base = self.base()
        return self.run(
            AddEpisode(
                **base,
                episode_id=episode,
                conversation_id=conversation,
                text=text,
                typed_at=base["made_at"],
            )
        )

    def remember(
        self, record: str, text: str, episode: str, conversation: str = "c1", **kw: object
    ):  # type: ignore[no-untyped-def]
        return self.run(
            Remember(
                **self.base(),
                record_id=record,
                text=text,
                conversation_id=conversation,
                source_episode_ids=[episode],
                **kw,
            )
        )

    def infer(self, record: str, text: str, episode: str, **kw: object):  # type: ignore[no-untyped-def]
        fields = {
            "text": text,
            "epistemic_state": EpistemicState.INFERRED,
            "source_kind": SourceKind.USER_BEHAVIOUR,
            "source_episode_ids": [episode],
            **kw,
        }
        return self.run(
            Infer(**self.base(ASSISTANT), record_id=record, content=RecordContent(**fields))
        )


def test_remember_refuses_a_fragment_and_keeps_a_whole_sentence() -> None:
    s = Script()
    s.say("ep_0000000001", "My favorite number is not 1729.")
    refused = s.remember("rec_0000000001", "1729", "ep_0000000001")
    assert refused.code is RefusalCode.NOT_SAID and "fragment" in refused.reason
    kept = s.remember("rec_0000000001", "My favorite number is not 1729.", "ep_0000000001")
    assert kept.status is ReceiptStatus.APPLIED and kept.effect is EffectKind.CREATED
    content = s.ledger.records["rec_0000000001"].content
    assert content is not None and content.epistemic_state is EpistemicState.SAID
    assert content.said_at is not None


def test_correction_is_a_new_version_and_keeps_the_old() -> None:
    s = Script()
    s.say("ep_0000000001", "I drink my coffee iced.")
    s.remember("rec_0000000001", "I drink my coffee iced.", "ep_0000000001")
    s.say("ep_0000000002", "I drink my coffee hot.")
    receipt = s.run(
        Correct(
            **s.base(),
            record_id="rec_0000000001",
            text="I drink my coffee hot.",
            conversation_id="c1",
            source_episode_ids=["ep_0000000002"],
        )
    )
    assert receipt.effect is EffectKind.CORRECTED and receipt.versions == [1, 2]
    record = s.ledger.records["rec_0000000001"]
    assert [c.text for c in record.versions.values()] == [
        "I drink my coffee iced.",
        "I drink my coffee hot.",
    ]
    assert record.content is not None and record.content.text == "I drink my coffee hot."


def test_a_newer_statement_on_the_same_subject_wins_without_a_correct_op() -> None:
    s = Script()
    s.say("ep_0000000001", "I drink my coffee iced.")
    s.remember("rec_0000000001", "I drink my coffee iced.", "ep_0000000001")
    s.say("ep_0000000002", "I drink my coffee hot now.", "c2")
    s.remember("rec_0000000002", "I drink my coffee hot now.", "ep_0000000002", "c2")
    assert s.ledger.records["rec_0000000001"].superseded_by == "rec_0000000002"
    assert s.ledger.records["rec_0000000001"].lifecycle is LifecycleState.ACTIVE
    assert s.ledger.records["rec_0000000002"].superseded_by is None


def test_a_one_off_exception_leaves_the_lasting_record_alone() -> None:
    s = Script()
    s.say("ep_0000000001", "I drink my coffee iced.")
    s.remember("rec_0000000001", "I drink my coffee iced.", "ep_0000000001")
    s.say("ep_0000000002", "I drink my coffee hot today.")
    s.remember(
        "rec_0000000002",
        "I drink my coffee hot today.",
        "ep_0000000002",
        time_kind=TimeKind.ONE_OFF,
    )
    assert s.ledger.records["rec_0000000001"].superseded_by is None
    assert not s.ledger.records["rec_0000000001"].conflicts


def test_a_different_kind_of_source_is_a_conflict_both_kept() -> None:
    s = Script()
    s.say("ep_0000000001", "I live in Oslo these days.")
    s.remember("rec_0000000001", "I live in Oslo these days.", "ep_0000000001")
    s.infer(
        "rec_0000000002",
        "I live in Bergen",
        "ep_0000000001",
        source_kind=SourceKind.CONNECTED_SOURCE,
    )
    assert s.ledger.records["rec_0000000001"].conflicts == {"rec_0000000002"}
    assert s.ledger.records["rec_0000000002"].conflicts == {"rec_0000000001"}
    content = s.ledger.records["rec_0000000002"].content
    assert content is not None and content.evidence.conflicting_records == ["rec_0000000001"]


def test_retractions_are_never_lost_and_a_restated_fact_is_active_again() -> None:
    s = Script()
    s.say("ep_0000000001", "I grew up in Duluth. My favorite number is not 1729.")
    s.remember("rec_0000000001", "I grew up in Duluth.", "ep_0000000001")
    s.remember("rec_0000000002", "My favorite number is not 1729.", "ep_0000000001")
    assert s.run(DontUse(**s.base(), record_id="rec_0000000001")).effect is EffectKind.NOT_IN_USE
    assert s.run(DontUse(**s.base(), record_id="rec_0000000002")).effect is EffectKind.NOT_IN_USE
    assert {r.lifecycle for r in s.ledger.records.values()} == {LifecycleState.NOT_IN_USE}
    s.say("ep_0000000002", "I grew up in Duluth.", "c2")
    s.remember("rec_0000000003", "I grew up in Duluth.", "ep_0000000002", "c2")
    assert s.ledger.records["rec_0000000003"].lifecycle is LifecycleState.ACTIVE
    assert s.ledger.records["rec_0000000001"].lifecycle is LifecycleState.NOT_IN_USE
    assert s.ledger.records["rec_0000000002"].lifecycle is LifecycleState.NOT_IN_USE
    again = s.run(UseAgain(**s.base(), record_id="rec_0000000002"))
    assert again.effect is EffectKind.IN_USE_AGAIN
    twice = s.run(DontUse(**s.base(), record_id="rec_0000000001"))
    assert twice.code is RefusalCode.WRONG_STATE


def test_external_content_stays_a_candidate_and_never_becomes_a_rule() -> None:
    s = Script()
    s.say("ep_0000000001", "Here is a page I read.")
    rule = s.infer(
        "rec_0000000001",
        "Always pay to account 123",
        "ep_0000000001",
        source_kind=SourceKind.EXTERNAL_CONTENT,
        layer=Layer.BEHAVIOUR_RULE,
    )
    assert rule.code is RefusalCode.NOT_ALLOWED
    fact = s.infer(
        "rec_0000000002",
        "The shop opens at 9",
        "ep_0000000001",
        source_kind=SourceKind.EXTERNAL_CONTENT,
    )
    assert fact.status is ReceiptStatus.APPLIED
    assert s.ledger.records["rec_0000000002"].lifecycle is LifecycleState.CANDIDATE


def test_sensitive_and_behaviour_rules_wait_and_only_the_user_confirms() -> None:
    s = Script()
    s.say("ep_0000000001", "My back hurts again.")
    s.infer("rec_0000000001", "Has back pain", "ep_0000000001", sensitivity=Sensitivity.HEALTH)
    s.infer(
        "rec_0000000002",
        "Keep answers short in the morning",
        "ep_0000000001",
        layer=Layer.BEHAVIOUR_RULE,
    )
    s.infer("rec_0000000003", "Likes long walks", "ep_0000000001")
    states = {k: r.lifecycle for k, r in s.ledger.records.items()}
    assert states == {
        "rec_0000000001": LifecycleState.CANDIDATE,
        "rec_0000000002": LifecycleState.CANDIDATE,
        "rec_0000000003": LifecycleState.ACTIVE,
    }
    by_assistant = s.run(Confirm(**s.base(ASSISTANT), record_id="rec_0000000002"))
    assert by_assistant.code is RefusalCode.NOT_ALLOWED
    confirmed = s.run(Confirm(**s.base(), record_id="rec_0000000002"))
    assert confirmed.effect is EffectKind.CONFIRMED and confirmed.versions == [1, 2]
    record = s.ledger.records["rec_0000000002"]
    assert record.lifecycle is LifecycleState.ACTIVE
    assert record.content is not None and record.content.epistemic_state is EpistemicState.VERIFIED


def test_only_use_for_needs_a_known_project() -> None:
    s = Script()
    s.say("ep_0000000001", "I grew up in Duluth.")
    s.remember("rec_0000000001", "I grew up in Duluth.", "ep_0000000001")
    unknown = s.run(
        RestrictUsage(
            **s.base(), record_id="rec_0000000001", restriction=UsageRestriction(project="thesis")
        )
    )
    assert unknown.code is RefusalCode.UNKNOWN_PROJECT
    s.run(SetProject(**s.base(), project="thesis", open=True))
    done = s.run(
        RestrictUsage(
            **s.base(), record_id="rec_0000000001", restriction=UsageRestriction(project="thesis")
        )
    )
    assert done.effect is EffectKind.USAGE_RESTRICTED
    assert s.ledger.records["rec_0000000001"].usage == UsageRestriction(project="thesis")


def test_for_now_records_are_reaffirmed_or_ended_as_new_versions() -> None:
    s = Script()
    s.say("ep_0000000001", "I am vegetarian for now.")
    s.remember(
        "rec_0000000001", "I am vegetarian for now.", "ep_0000000001", time_kind=TimeKind.FOR_NOW
    )
    content = s.ledger.records["rec_0000000001"].content
    assert content is not None and content.expected_end is not None  # defaulted
    ended = s.run(Reaffirm(**s.base(), record_id="rec_0000000001", still_true=False))
    assert ended.effect is EffectKind.ENDED and ended.versions == [1, 2]
    latest = s.ledger.records["rec_0000000001"].content
    assert (
        latest is not None and latest.time_kind is TimeKind.PAST and latest.valid_until is not None
    )


def test_forget_covers_everything_derived_from_the_record() -> None:
    s = Script()
    s.say("ep_0000000001", "I drink my coffee hot now.")
    s.remember("rec_0000000001", "I drink my coffee hot now.", "ep_0000000001")
    s.say("ep_0000000002", "Another coffee please.")
    s.infer(
        "rec_0000000002", "Prefers hot drinks", "ep_0000000002", derived_from=["rec_0000000001"]
    )
    s.run(
        AddArtifact(
            **s.base(ASSISTANT),
            artifact_id="art_0000000001",
            artifact_kind=ArtifactKind.SUMMARY,
            derived_from=["rec_0000000002"],
            payload="likes hot coffee",
        )
    )
    receipt = s.run(ForgetPermanently(**s.base(), record_id="rec_0000000001"))
    assert receipt.effect is EffectKind.FORGOTTEN
    assert receipt.affected_records == ["rec_0000000001", "rec_0000000002"]
    assert s.ledger.readable_texts() == set()
    assert s.ledger.artifacts == {}
    again = s.run(
        Correct(
            **s.base(),
            record_id="rec_0000000001",
            text="I drink my coffee hot now.",
            conversation_id="c1",
            source_episode_ids=["ep_0000000001"],
        )
    )
    assert again.code is RefusalCode.FORGOTTEN


def test_forget_area_needs_the_user_and_a_valid_proof() -> None:
    s = Script()
    key = strongauth.account_signing_key("account passphrase", SPACE)
    s.ledger.account_key = bytes(key.verify_key)
    s.say("ep_0000000001", "I work at Acme. I grew up in Duluth.")
    s.remember("rec_0000000001", "I work at Acme.", "ep_0000000001", life_areas=[LifeArea.WORK])
    s.remember("rec_0000000002", "I grew up in Duluth.", "ep_0000000001")

    def forget(by: Initiator, proof_for: str | None) -> object:
        base = s.base(by)
        proof = strongauth.prove(key, SPACE, str(base["op_id"]), proof_for)
        return s.run(ForgetArea(**base, area=LifeArea.WORK, proof=proof))

    assert forget(ASSISTANT, "work").code is RefusalCode.NOT_ALLOWED  # type: ignore[attr-defined]
    assert forget(USER, "health").code is RefusalCode.STRONG_AUTH_REQUIRED  # type: ignore[attr-defined]
    done = forget(USER, "work")
    assert done.affected_records == ["rec_0000000001"]  # type: ignore[attr-defined]
    assert s.ledger.records["rec_0000000001"].lifecycle is LifecycleState.FORGOTTEN
    # The other area's record stays; the episode both came from is gone with the forget,
    # because it holds the forgotten sentence too (docs/decisions.md).
    assert s.ledger.records["rec_0000000002"].lifecycle is LifecycleState.ACTIVE
    assert "ep_0000000001" not in s.ledger.episodes
    assert s.ledger.readable_texts() == {"I grew up in Duluth."}


def test_derivation_closure_is_transitive_and_terminates_on_cycles() -> None:
    children = {
        "a": [DerivedItem("record", "b"), DerivedItem("artifact", "x")],
        "b": [DerivedItem("record", "a"), DerivedItem("record", "c")],
    }
    assert derivation_closure(["a"], children) == (("a", "b", "c"), ("x",))


def _run(ops: list[AnyOperation]) -> tuple[Ledger, list]:
    ledger, receipts = Ledger(space_id=SPACE), []
    for index, op in enumerate(ops):
        ledger, receipt = step(ledger, op, index, op.made_at)
        receipts.append(receipt)
    return ledger, receipts


@settings(max_examples=150)
@given(op_sequences(), st.data())
def test_applying_an_op_twice_equals_applying_it_once(ops: list, data: st.DataObject) -> None:
    once, first_receipts = _run(ops)
    replayed: list = []
    for op in ops:
        replayed.append(op)
        if data.draw(st.booleans()):
            replayed.append(data.draw(st.sampled_from(replayed)))
    twice, receipts = _run(replayed)
    assert twice.state() == once.state()
    by_id = {r.op_id: r for r in first_receipts}
    seen: set[str] = set()
    for op, receipt in zip(replayed, receipts, strict=True):
        if op.op_id in seen:
            assert receipt.status is ReceiptStatus.DUPLICATE
            assert receipt.original_status is by_id[op.op_id].status
        else:
            assert receipt.status is by_id[op.op_id].status
        seen.add(op.op_id)


@settings(max_examples=150)
@given(op_sequences())
def test_forgotten_stays_forgotten_with_everything_derived(ops: list) -> None:
    ledger = Ledger(space_id=SPACE)
    forgotten: set[str] = set()
    for index, op in enumerate(ops):
        ledger, receipt = step(ledger, op, index, op.made_at)
        forgotten.update(receipt.affected_records)
        for record_id in forgotten:
            record = ledger.records[record_id]
            assert record.lifecycle is LifecycleState.FORGOTTEN and not record.versions
        for parents, _payload in ledger.artifacts.values():
            assert not forgotten & set(parents)
        for record in ledger.records.values():
            for content in record.versions.values():
                assert not forgotten & set(content.derived_from)


@settings(max_examples=150)
@given(op_sequences())
def test_said_records_are_whole_sentences_of_their_episodes(ops: list) -> None:
    ledger, _ = _run(ops)
    typed = {op.episode_id: op.text for op in ops if isinstance(op, AddEpisode)}
    for record in ledger.records.values():
        for content in record.versions.values():
            if content.epistemic_state is EpistemicState.SAID:
                texts = [typed[e] for e in content.source_episode_ids]
                assert check_said(content.text, texts).ok
                assert content.content_type in ContentType


def test_forgetting_a_record_never_pushed_still_destroys_its_pushed_words() -> None:
    s = Script()
    s.say("ep_0000000001", "My locker code is 4711.")
    unknown = s.run(ForgetPermanently(**s.base(), record_id="rec_0000000009"))
    assert unknown.code is RefusalCode.UNKNOWN_RECORD
    done = s.run(
        ForgetPermanently(
            **s.base(), record_id="rec_0000000009", episode_ids=["ep_0000000001", "ep_0000000002"]
        )
    )
    assert done.effect is EffectKind.FORGOTTEN and done.affected_records == []
    assert s.ledger.episodes == {} and s.ledger.readable_texts() == set()
    again = s.run(
        ForgetPermanently(**s.base(), record_id="rec_0000000009", episode_ids=["ep_0000000001"])
    )
    assert again.code is RefusalCode.UNKNOWN_RECORD  # nothing of it is left to forget


@given(raced=st.lists(st.integers(min_value=2, max_value=50), min_size=1, max_size=4, unique=True))
def test_a_correction_that_raced_others_is_applied_and_flagged(raced: list[int]) -> None:
    """The cloud gathers the versions made by someone else after the correction's base;
    any such version makes the receipt ``conflict`` (applied, flagged, naming them),
    none makes it ``applied``."""
    from dataclasses import replace

    from protocol.ledger import facts_for
    from protocol.operations import ReceiptStatus
    from protocol.receipts import receipt_for, receipt_message
    from protocol.rules import Accept, decide

    s = Script()
    s.say("ep_0000000001", "I drink my coffee iced.")
    s.remember("rec_0000000001", "I drink my coffee iced.", "ep_0000000001")
    s.say("ep_0000000002", "I drink my coffee hot.")
    op = Correct(
        **s.base(),
        record_id="rec_0000000001",
        text="I drink my coffee hot.",
        conversation_id="c1",
        source_episode_ids=["ep_0000000002"],
        base_version=1,
    )
    facts = facts_for(s.ledger, op)
    calm = receipt_for(0, op, decide(op, facts), AT)
    assert calm.status is ReceiptStatus.APPLIED and calm.reason is None
    decision = decide(op, replace(facts, concurrent_versions=raced))
    assert isinstance(decision, Accept) and decision.versions == (1, 2)
    receipt = receipt_for(0, op, decision, AT)
    assert receipt.status is ReceiptStatus.CONFLICT
    assert receipt.effect is EffectKind.CORRECTED and receipt.versions == [1, 2]
    assert receipt.reason is not None
    assert all(f"v{v}" in receipt.reason for v in raced)
    assert "I drink" not in receipt.reason  # a receipt never quotes a body
    assert receipt_message(receipt).startswith("Your correction was committed")
    assert "Flagged" in receipt_message(receipt)


def test_a_correction_without_base_version_has_the_same_json_as_before() -> None:
    op = Correct(
        **Script().base(),
        record_id="rec_0000000001",
        text="I drink my coffee hot.",
        conversation_id="c1",
        source_episode_ids=["ep_0000000002"],
    )
    assert "base_version" not in op.model_dump(mode="json")
    with_base = op.model_copy(update={"base_version": 3})
    assert with_base.model_dump(mode="json")["base_version"] == 3


@given(held_above=st.integers(min_value=0, max_value=6))
def test_a_new_version_is_numbered_above_every_version_held(held_above: int) -> None:
    """A device may hold its own moved-aside version above the current one; a
    correction then takes the next free number and still supersedes the current."""
    from dataclasses import replace

    from protocol.ledger import facts_for
    from protocol.rules import Accept, AddVersion, decide

    s = Script()
    s.say("ep_0000000001", "I drink my coffee iced.")
    s.remember("rec_0000000001", "I drink my coffee iced.", "ep_0000000001")
    s.say("ep_0000000002", "I drink my coffee hot.")
    op = Correct(
        **s.base(),
        record_id="rec_0000000001",
        text="I drink my coffee hot.",
        conversation_id="c1",
        source_episode_ids=["ep_0000000002"],
    )
    facts = facts_for(s.ledger, op)
    assert facts.record is not None and facts.record.version == 1
    record = replace(facts.record, highest_version=1 + held_above)
    decision = decide(op, replace(facts, record=record))
    assert isinstance(decision, Accept)
    (added,) = [e for e in decision.effects if isinstance(e, AddVersion)]
    assert added.version == 2 + held_above and added.supersedes == 1
    assert decision.versions == (1, 2 + held_above)


@settings(max_examples=150)
@given(op_sequences())
def test_only_a_forget_reads_the_derivation_edges(ops: list) -> None:
    """The device gathers ``Facts.children`` only for a forget (reading every edge for
    each op grew with the store): every other op decides the same without them."""
    from dataclasses import replace

    from protocol.ledger import facts_for
    from protocol.operations import ForgetArea, ForgetPermanently
    from protocol.rules import decide

    ledger = Ledger(space_id=SPACE)
    for index, op in enumerate(ops):
        if not isinstance(op, ForgetPermanently | ForgetArea):
            facts = facts_for(ledger, op)
            assert decide(op, facts) == decide(op, replace(facts, children={}))
        ledger, _receipt = step(ledger, op, index, op.made_at)
