"""Property: applying random op sequences locally gives the same receipts (status, code,
effect, record, versions, affected records) as the reference ``protocol.ledger`` on the
same ops, and the same record states afterwards."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from nacl.signing import SigningKey

from device import store
from device.agent import DeviceAgent
from device.errors import Refused
from protocol import strongauth
from protocol.ids import make_id
from protocol.ledger import Ledger, step
from protocol.model import (
    ArtifactKind,
    ContentType,
    EpistemicState,
    Initiator,
    Layer,
    LifeArea,
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
    CandidateRef,
    Confirm,
    Consolidate,
    Correct,
    Corroborate,
    DontUse,
    EndSession,
    ForgetArea,
    ForgetPermanently,
    Infer,
    MarkCandidate,
    PassTime,
    Reaffirm,
    Receipt,
    Remember,
    RestrictUsage,
    ReviseRule,
    SetProject,
    UseAgain,
)
from tests.device.conftest import PASSPHRASE, TickingClock, seeded

AT = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
RECORDS = [make_id("rec", bytes([i]) * 10) for i in range(3)]
EPISODES = [make_id("ep", bytes([i]) * 10) for i in range(3)]
ARTIFACTS = [make_id("art", bytes([i]) * 10) for i in range(2)]
CONVERSATIONS = ["c1", "c2"]
TYPED = [
    "I drink my coffee iced. My sister lives in Oslo.",
    "I drink my coffee hot now.",
    "I am learning Spanish for now!",
]
CLAIMS = [
    "I drink my coffee iced.",
    "My sister lives in Oslo.",
    "I drink my coffee hot now",
    "I am learning Spanish for now!",
    "coffee",
    "I like my coffee hot.",
]
# episode i usually holds TYPED[i] in conversation ALIGNED[i]; these claims are its sentences
ALIGNED = ["c1", "c2", "c1"]
SENTENCES = [CLAIMS[:2], [CLAIMS[2]], [CLAIMS[3]]]
AREAS = [None, LifeArea.HEALTH, LifeArea.GENERAL]
ACCOUNT = "equivalence account passphrase"


@cache
def account_key(space: str) -> SigningKey:
    return strongauth.account_signing_key(ACCOUNT, space)


@st.composite
def operation(draw: st.DrawFn, n: int, space: str) -> AnyOperation:
    base: dict[str, Any] = {
        "op_id": make_id("op", n.to_bytes(10, "big")),
        "made_at": AT + timedelta(minutes=n + 1),
        "initiated_by": Initiator.USER,
    }
    record = draw(st.sampled_from(RECORDS))
    kind = draw(
        st.sampled_from(
            ["add_episode", "add_episode", "add_episode", "remember", "remember", "remember",
             "correct", "dont_use",
             "use_again", "restrict", "confirm", "reaffirm", "forget", "infer", "infer",
             "artifact", "project", "correct", "forget_area" if n % 3 == 0 else "dont_use",
             "mark", "end_session", "consolidate", "consolidate", "corroborate", "revise_rule",
             "pass_time", "external"]
        )
    )  # fmt: skip
    aligned = draw(st.integers(0, 4)) > 0
    which = draw(st.integers(0, 2))
    if aligned:
        sources, conversation = [EPISODES[which]], ALIGNED[which]
        claim = draw(st.sampled_from(SENTENCES[which]))
        typed = TYPED[which]
    else:
        sources = draw(st.lists(st.sampled_from(EPISODES), min_size=1, max_size=2, unique=True))
        conversation = draw(st.sampled_from(CONVERSATIONS))
        claim = draw(st.sampled_from(CLAIMS))
        typed = draw(st.sampled_from(TYPED))
    if kind == "add_episode":
        return AddEpisode(
            **base,
            episode_id=EPISODES[which],
            conversation_id=conversation,
            text=typed,
            typed_at=base["made_at"],
        )
    if kind == "remember":
        return Remember(
            **base,
            record_id=record,
            text=claim,
            conversation_id=conversation,
            source_episode_ids=sources,
            time_kind=draw(
                st.sampled_from([TimeKind.PERMANENT, TimeKind.FOR_NOW, TimeKind.ONE_OFF])
            ),
            life_areas=[draw(st.sampled_from([LifeArea.GENERAL, LifeArea.HEALTH]))],
            project=draw(st.sampled_from([None, None, None, "Thesis"])),
        )
    if kind == "correct":
        return Correct(
            **base,
            record_id=record,
            text=claim,
            conversation_id=conversation,
            source_episode_ids=sources,
        )
    if kind == "restrict":
        restriction = draw(
            st.sampled_from(
                [None, UsageRestriction(area=LifeArea.HEALTH), UsageRestriction(project="Thesis")]
            )
        )
        return RestrictUsage(**base, record_id=record, restriction=restriction)
    if kind == "reaffirm":
        return Reaffirm(**base, record_id=record, still_true=draw(st.booleans()))
    if kind == "forget_area":
        area = draw(st.sampled_from(AREAS))
        name = area.value if area else None
        good = draw(st.booleans())
        proof = strongauth.prove(account_key(space), space, base["op_id"], name)
        base["initiated_by"] = draw(st.sampled_from([Initiator.USER, Initiator.ASSISTANT]))
        return ForgetArea(**base, area=area, proof=proof if good else b"\x01" * 64)
    if kind == "infer":
        base["initiated_by"] = Initiator.ASSISTANT
        content = RecordContent(
            text=claim,
            epistemic_state=draw(
                st.sampled_from([EpistemicState.INFERRED, EpistemicState.HYPOTHESIS])
            ),
            source_episode_ids=sources,
            source_kind=draw(
                st.sampled_from([SourceKind.USER_BEHAVIOUR, SourceKind.EXTERNAL_CONTENT])
            ),
            derived_from=draw(st.lists(st.sampled_from(RECORDS), max_size=2, unique=True)),
        )
        return Infer(**base, record_id=record, content=content)
    if kind == "external":
        return AddEpisode(
            **base,
            episode_id=EPISODES[which],
            conversation_id="inbox",
            text=typed,
            typed_at=base["made_at"],
            source_kind=SourceKind.EXTERNAL_CONTENT,
            source_id=draw(st.sampled_from(["email:m1", "web_page:w2"])),
        )
    if kind == "mark":
        base["initiated_by"] = Initiator.ASSISTANT
        return MarkCandidate(
            **base,
            episode_id=EPISODES[which],
            sentence=draw(st.integers(0, 2)),
            content_type=ContentType.PERSONAL_FACT,
            sensitivity=draw(st.sampled_from([Sensitivity.NORMAL, Sensitivity.HEALTH])),
            time_kind=TimeKind.PERMANENT,
            score=0.9,
            model_id="m",
        )
    if kind == "end_session":
        return EndSession(**base, conversation_id=conversation)
    if kind == "consolidate":
        base["initiated_by"] = draw(st.sampled_from([Initiator.ASSISTANT] * 3 + [Initiator.USER]))
        state = draw(
            st.sampled_from([EpistemicState.SAID, EpistemicState.SAID, EpistemicState.OBSERVED])
        )
        content = RecordContent(
            text=claim,
            epistemic_state=state,
            layer=draw(st.sampled_from([Layer.CONSOLIDATED_FACT, Layer.BEHAVIOUR_RULE])),
            content_type=draw(st.sampled_from([ContentType.PERSONAL_FACT, ContentType.PREFERENCE])),
            source_episode_ids=sources,
            source_kind=draw(
                st.sampled_from([SourceKind.USER_STATEMENT, SourceKind.EXTERNAL_CONTENT])
            ),
            conversation_id=conversation,
            sensitivity=draw(st.sampled_from([Sensitivity.NORMAL, Sensitivity.HEALTH])),
            derived_from=draw(st.lists(st.sampled_from(RECORDS), max_size=1)),
        )
        refs = [CandidateRef(episode_id=s, sentence=0) for s in sources]
        return Consolidate(**base, record_id=record, content=content, candidates=refs)
    if kind == "corroborate":
        base["initiated_by"] = Initiator.ASSISTANT
        return Corroborate(**base, record_id=record, episode_id=EPISODES[which])
    if kind == "revise_rule":
        text = draw(st.sampled_from(["Keep answers short.", "Pay my bills."]))
        return ReviseRule(**base, record_id=record, text=text)
    if kind == "pass_time":
        base["initiated_by"] = Initiator.ASSISTANT
        base["made_at"] = AT + timedelta(days=draw(st.sampled_from([0, 400])))
        return PassTime(**base, record_id=record)
    if kind == "artifact":
        base["initiated_by"] = Initiator.ASSISTANT
        return AddArtifact(
            **base,
            artifact_id=draw(st.sampled_from(ARTIFACTS)),
            artifact_kind=ArtifactKind.SUMMARY,
            derived_from=draw(st.lists(st.sampled_from(RECORDS), min_size=1, max_size=2)),
            payload="summary text",
        )
    if kind == "project":
        return SetProject(**base, project="Thesis", open=draw(st.booleans()))
    if kind == "confirm":
        base["initiated_by"] = draw(st.sampled_from([Initiator.USER, Initiator.ASSISTANT]))
        return Confirm(**base, record_id=record)
    simple: dict[str, Any] = {
        "dont_use": DontUse, "use_again": UseAgain, "forget": ForgetPermanently,
    }  # fmt: skip
    result: AnyOperation = simple[kind](**base, record_id=record)
    return result


def essentials(receipt: Receipt) -> tuple[Any, ...]:
    return (
        receipt.status,
        receipt.code,
        receipt.effect,
        receipt.record_id,
        receipt.versions,
        receipt.affected_records,
    )


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data(), size=st.integers(1, 24))
def test_local_receipts_equal_the_reference_ledger(data: st.DataObject, size: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        agent = DeviceAgent.create(
            Path(tmp), PASSPHRASE, device_name="p", clock=TickingClock(), random_bytes=seeded(5)
        )
        db = agent._debug_db()
        space = store.get_meta(db).local_space
        key = bytes(account_key(space).verify_key)
        with db.atomic():
            store.set_account_key(db, key)
        ledger = Ledger(space_id=space, account_key=key)
        prelude: list[AnyOperation] = [
            AddEpisode(
                op_id=make_id("op", bytes([200 + i]) * 10),
                made_at=AT,
                initiated_by=Initiator.USER,
                episode_id=EPISODES[i],
                conversation_id=ALIGNED[i],
                text=TYPED[i],
                typed_at=AT,
            )
            for i in range(data.draw(st.integers(0, 3)))
        ]
        for n in range(size + len(prelude)):
            op = prelude[n] if n < len(prelude) else data.draw(operation(n, space))
            try:
                local = agent.apply_operation(op).receipt
            except Refused as exc:
                local = exc.receipt
            assert local is not None
            event(f"{op.kind} {local.status.value} {local.code}")
            _, reference = step(ledger, op, 0, AT)
            assert essentials(local) == essentials(reference), op
        views = {v.record_id: v for v in agent.what_do_you_know()}
        assert set(views) == set(ledger.records)
        for record_id, record in ledger.records.items():
            view = views[record_id]
            assert view.lifecycle == record.lifecycle.value
            if record.content is not None:
                assert (view.version, view.text) == (record.version, record.content.text)
                assert view.superseded_by == record.superseded_by
        marks = {
            (r["episode_id"], r["sentence"]): r["record_id"]
            for r in db.all("SELECT episode_id, sentence, record_id FROM candidates")
        }
        assert marks == ledger.candidates
        ended = {r[0] for r in db.all("SELECT conversation_id FROM ended_conversations")}
        assert ended == ledger.ended_conversations
        agent.close()
