"""The cloud store against the pure reference (``protocol.ledger``), under Hypothesis.

Random sequences of all thirteen operations (over a small, colliding pool of ids, with
replays, good and bad strong-authentication proofs, and batch boundaries) are pushed to
a real cloud and stepped through the ledger. Every receipt must be identical (status,
code, reason, effect, record, versions, affected records), and afterwards every
record's state and everything a newly enrolled device can read must equal the
ledger's. This is the check that device, cloud and reference decide alike: all three
call ``protocol.rules.decide``, and here the cloud's facts and effects are held to the
reference's. SQLite only (the contract suite covers both stores).
"""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nacl.signing import SigningKey

from cloud.config import CloudConfig
from cloud.service import CloudService
from protocol import strongauth
from protocol.ledger import Ledger, step
from protocol.messages import AccountKeyRequest, AckRequest, PushRequest
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
    ForgetArea,
    ForgetPermanently,
    Infer,
    Reaffirm,
    Remember,
    RestrictUsage,
    SetProject,
    UseAgain,
)
from protocol.sentences import split_sentences
from tests.cloud.conftest import MASTER_KEY, FakeClock, enroll, feed

AT = datetime(2026, 9, 21, 12, 0, tzinfo=UTC)
RECORDS = [f"rec_aaaaaaaa0{i}" for i in range(8)]
FREE = RECORDS[:6]  # the derivation chain below uses the last two
EPISODES = [f"ep_aaaaaaaa0{i}" for i in range(3)]
ARTIFACTS = [f"art_aaaaaaaa0{i}" for i in range(2)]
CONVERSATIONS = ["c1", "c2"]
PROJECTS = ["renovation", "thesis"]
TYPED = [
    "I grew up in Duluth. My favorite number is not 1729.",
    "I drink my coffee iced. I drink my coffee hot now.",
    "I live in Berlin. I drink my coffee hot today.",
]
CLAIMS = [
    "I grew up in Duluth.",
    "My favorite number is not 1729.",
    "1729",
    "I drink my coffee iced.",
    "I drink my coffee hot now.",
    "I live in Berlin.",
    "I live in Hamburg.",
    "I was raised in Duluth.",
]
GOOD_PROOF = b"good"  # replaced by a real proof for the example's space when pushed
ACCOUNT = SigningKey(bytes(range(32)))

areas = st.lists(st.sampled_from(list(LifeArea)[:3]), min_size=1, max_size=2, unique=True)


@st.composite
def contents(draw: st.DrawFn) -> RecordContent:
    return RecordContent(
        text=draw(st.sampled_from(CLAIMS)),
        content_type=draw(st.sampled_from(list(ContentType))),
        epistemic_state=draw(
            st.sampled_from(
                [EpistemicState.OBSERVED, EpistemicState.INFERRED, EpistemicState.HYPOTHESIS]
            )
        ),
        layer=draw(st.sampled_from(list(Layer))),
        time_kind=draw(st.sampled_from(list(TimeKind))),
        source_episode_ids=draw(st.lists(st.sampled_from(EPISODES), min_size=1, max_size=2)),
        source_kind=draw(st.sampled_from(list(SourceKind))),
        life_areas=draw(areas),
        sensitivity=draw(st.sampled_from([Sensitivity.NORMAL, Sensitivity.HEALTH])),
        subject=draw(st.sampled_from([None, None, "home city"])),
        derived_from=draw(
            st.sampled_from([[], [], []])
            | st.lists(st.sampled_from(RECORDS), min_size=1, max_size=1)
            | st.lists(st.sampled_from(RECORDS), max_size=2)
        ),
    )


@st.composite
def operations(draw: st.DrawFn, n: int) -> AnyOperation:
    base: dict[str, Any] = {
        "op_id": f"op_{n:010d}",
        "made_at": AT + timedelta(minutes=n),
        "initiated_by": draw(st.sampled_from([Initiator.USER] * 3 + [Initiator.ASSISTANT])),
    }
    record = draw(st.sampled_from(FREE) | st.sampled_from(RECORDS))
    kind = draw(
        st.sampled_from(
            ["remember"] * 5
            + ["restate"] * 3
            + ["infer"] * 4
            + ["add_episode", "correct", "correct", "dont_use", "dont_use", "use_again"]
            + ["use_again", "restrict_usage", "restrict_usage", "confirm", "confirm"]
            + ["reaffirm", "forget_permanently", "forget_permanently", "forget_area"]
            + ["add_artifact", "add_artifact", "set_project", "set_project"]
        )
    )
    episode = draw(st.integers(0, len(EPISODES) - 1))
    if kind == "add_episode":  # an episode id always carries the same words, like a real log
        return AddEpisode(
            **base,
            episode_id=EPISODES[episode],
            conversation_id=CONVERSATIONS[episode % 2],
            text=TYPED[episode],
            typed_at=base["made_at"],
        )
    if kind == "restate":  # the user's own sentence on a subject already spoken about
        return Remember(
            **base,
            record_id=record,
            text=draw(st.sampled_from(split_sentences(TYPED[episode]))),
            conversation_id=CONVERSATIONS[episode % 2],
            source_episode_ids=[EPISODES[episode]],
            subject=draw(st.sampled_from([None, "home city"])),
        )
    if kind in ("remember", "correct"):
        own = split_sentences(TYPED[episode])
        said = {
            "record_id": record,
            "text": draw(st.sampled_from(own * 4 + CLAIMS)),
            "conversation_id": draw(
                st.sampled_from([CONVERSATIONS[episode % 2]] * 4 + CONVERSATIONS)
            ),
            "source_episode_ids": [EPISODES[episode]],
        }
        if kind == "correct":
            return Correct(**base, **said)
        return Remember(
            **base,
            **said,
            time_kind=draw(st.sampled_from([*TimeKind, TimeKind.FOR_NOW])),
            life_areas=draw(areas),
            project=draw(st.sampled_from([None, None, *PROJECTS])),
            subject=draw(st.sampled_from([None, None, "home city"])),
        )
    if kind == "dont_use":
        return DontUse(**base, record_id=record)
    if kind == "use_again":
        return UseAgain(**base, record_id=record)
    if kind == "restrict_usage":
        restriction = draw(
            st.sampled_from(
                [None, UsageRestriction(area=LifeArea.WORK), UsageRestriction(project=PROJECTS[0])]
            )
        )
        return RestrictUsage(**base, record_id=record, restriction=restriction)
    if kind == "confirm":
        return Confirm(**base, record_id=record)
    if kind == "reaffirm":
        return Reaffirm(**base, record_id=record, still_true=draw(st.booleans()))
    if kind == "forget_permanently":
        return ForgetPermanently(**base, record_id=record)
    if kind == "forget_area":
        area = draw(st.sampled_from([None, *list(LifeArea)[:3]]))
        proof = draw(st.sampled_from([GOOD_PROOF, b"\x00" * 64]))
        return ForgetArea(**base, area=area, proof=proof)
    if kind == "infer":
        return Infer(**base, record_id=record, content=draw(contents()))
    if kind == "add_artifact":
        return AddArtifact(
            **base,
            artifact_id=draw(st.sampled_from(ARTIFACTS)),
            artifact_kind=draw(st.sampled_from(list(ArtifactKind))),
            derived_from=draw(
                st.lists(st.sampled_from(RECORDS), min_size=1, max_size=1)
                | st.lists(st.sampled_from(RECORDS), min_size=1, max_size=2)
            ),
            payload=draw(st.sampled_from(["Summary one.", "Summary two."])),
        )
    return SetProject(**base, project=draw(st.sampled_from(PROJECTS)), open=draw(st.booleans()))


@st.composite
def histories(draw: st.DrawFn) -> list[list[AnyOperation]]:
    """Batches of ops (each batch one push), with replays of earlier ops mixed in.

    Most histories begin by logging the episodes, so that records get made and the
    later ops meet records in every state rather than mostly unknown ids.
    """
    count = draw(st.integers(1, 30))
    made: list[AnyOperation] = []
    batches: list[list[AnyOperation]] = [[]]
    if draw(st.integers(0, 5)) > 0:
        for episode, text in enumerate(TYPED):
            made.append(
                AddEpisode(
                    op_id=f"op_{900 + episode:010d}",
                    made_at=AT,
                    initiated_by=Initiator.USER,
                    episode_id=EPISODES[episode],
                    conversation_id=CONVERSATIONS[episode % 2],
                    text=text,
                    typed_at=AT,
                )
            )
        if draw(st.booleans()):  # a derivation chain for forgets to cascade through
            user = {"made_at": AT, "initiated_by": Initiator.USER}
            made += [
                Remember(
                    op_id="op_0000000910",
                    **user,
                    record_id=RECORDS[6],
                    text="I grew up in Duluth.",
                    conversation_id="c1",
                    source_episode_ids=[EPISODES[0]],
                ),
                Infer(
                    op_id="op_0000000911",
                    **user,
                    record_id=RECORDS[7],
                    content=draw(contents()).model_copy(
                        update={
                            "derived_from": [RECORDS[6]],
                            "source_episode_ids": [EPISODES[1]],
                        }
                    ),
                ),
                AddArtifact(
                    op_id="op_0000000912",
                    **user,
                    artifact_id=ARTIFACTS[0],
                    artifact_kind=ArtifactKind.SUMMARY,
                    derived_from=[draw(st.sampled_from(RECORDS[6:]))],
                    payload="A summary of the chain.",
                ),
            ]
        batches[0].extend(made)
    for n in range(count):
        if made and draw(st.integers(0, 9)) == 0:
            batches[-1].append(draw(st.sampled_from(made)))  # a replay
        op = draw(operations(n))
        made.append(op)
        batches[-1].append(op)
        if draw(st.integers(0, 4)) == 0:
            batches.append([])
    return [b for b in batches if b]


def _with_proof(op: AnyOperation, space_id: str) -> AnyOperation:
    if isinstance(op, ForgetArea) and op.proof == GOOD_PROOF:
        area = op.area.value if op.area else None
        return op.model_copy(update={"proof": strongauth.prove(ACCOUNT, space_id, op.op_id, area)})
    return op


def test_the_cloud_decides_and_performs_exactly_like_the_reference_ledger(
    tmp_path: Path,
) -> None:
    clock = FakeClock(AT)
    service = CloudService(
        CloudConfig(
            store_url=f"sqlite:///{tmp_path / 'records.db'}",
            key_store_path=tmp_path / "keys.db",
            clock=clock,
            random_bytes=random.Random(7).randbytes,
            master_key=MASTER_KEY,
        )
    )
    users = itertools.count()

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(histories(), st.booleans())
    def run(batches: list[list[AnyOperation]], with_account: bool) -> None:
        space_id, code = service.add_user(f"user{next(users)}")
        phone = enroll(service, code, "phone")
        ledger = Ledger(space_id=space_id)
        if with_account:
            ledger.account_key = bytes(ACCOUNT.verify_key)
            service.register_account_key(
                space_id, phone.device_id, AccountKeyRequest(account_key=ledger.account_key)
            )
        for batch in batches:
            clock.advance(timedelta(minutes=1))
            ops = [_with_proof(op, space_id) for op in batch]
            events = [e.event_id for e in feed(service, phone).destroyed]
            service.ack(space_id, phone.device_id, AckRequest(event_ids=events))
            raw = [op.model_dump(mode="json") for op in ops]
            got = service.push(space_id, phone.device_id, PushRequest(ops=raw)).receipts
            for index, (op, receipt) in enumerate(zip(ops, got, strict=True)):
                ledger, expected = step(ledger, op, index, clock.now)
                assert receipt == expected, f"op {index} of the batch: {op!r}"

        for record_id, record in ledger.records.items():
            status = service.record_status(space_id, record_id)
            assert status.lifecycle_state is record.lifecycle, record_id
            if record.lifecycle is LifecycleState.FORGOTTEN:
                continue
            assert status.version == record.version, record_id
            assert status.usage_restriction == record.usage, record_id
            assert status.superseded_by_record == record.superseded_by, record_id
            assert status.conflicts_with == sorted(record.conflicts), record_id
        newcomer = enroll(service, service.new_enrollment_code(space_id), "newcomer")
        seen = feed(service, newcomer)
        readable = {c.text for c in seen.versions.values()}
        readable |= {e.text for e in seen.episodes.values()}
        readable |= {a.payload for _parents, a in seen.artifacts.values()}
        assert readable == ledger.readable_texts()
        assert seen.projects == ledger.projects
        assert {r for r, _v in seen.versions} == {
            r for r, rec in ledger.records.items() if rec.lifecycle is not LifecycleState.FORGOTTEN
        }
        for record_id, state in seen.states.items():
            record = ledger.records[record_id]
            assert state.lifecycle_state is record.lifecycle
            assert state.current_version == record.version
            assert seen.versions[(record_id, record.version)] == record.content

    try:
        run()
    finally:
        service.close()
