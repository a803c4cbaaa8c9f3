"""Golden files pin each protocol version's wire format byte for byte: any change to a
message's JSON in any version fails here.

``tests/golden/v<n>/`` holds every message of version n, rendered by
``protocol.versioned.render_json`` and written as sorted, indented JSON. The version-1
files predate version 2 and are never regenerated: rendering today's models for
version 1 must reproduce them exactly. To add a message or a new protocol version,
write its golden files deliberately with
``MEMSYNC_WRITE_GOLDEN=<version> pytest tests/protocol/test_golden.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import get_args

import pytest
from pydantic import BaseModel, ValidationError

from protocol.confidence import ConfidenceClass
from protocol.messages import (
    AccountKeyRequest,
    AccountKeyResponse,
    AckRequest,
    AckResponse,
    ArtifactChange,
    EnrollRequest,
    EnrollResponse,
    EpisodeChange,
    ErrorBody,
    ErrorCode,
    ForgetStatus,
    KeyDestruction,
    PendingDevice,
    PendingResponse,
    PinRequest,
    ProjectChange,
    PullRequest,
    PullResponse,
    PushRequest,
    PushResponse,
    RecallAnswer,
    RecallLine,
    RecallRequest,
    RecallResponse,
    RecordStateChange,
    RecordUse,
    RecordVersionChange,
    SubsetChange,
    SubsetPolicyRequest,
    SubsetResponse,
    WipedRequest,
    WipedResponse,
)
from protocol.model import (
    ArtifactKind,
    ContentType,
    CustomType,
    EpistemicState,
    Evidence,
    Initiator,
    LifeArea,
    LifecycleState,
    Observation,
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
    EffectKind,
    EndSession,
    ForgetArea,
    ForgetPermanently,
    Infer,
    MarkCandidate,
    PassTime,
    Reaffirm,
    Receipt,
    ReceiptStatus,
    RefusalCode,
    Remember,
    RestrictUsage,
    ReviseRule,
    SetProject,
    UseAgain,
)
from protocol.retrieval.task import Relation
from protocol.subset import (
    Reason,
    SubsetBudget,
    SubsetEntry,
    SubsetPolicy,
    SubsetRules,
    SubsetView,
)
from protocol.version import LOWEST_VERSION, PROTOCOL_VERSION
from protocol.versioned import parse, render_json

GOLDEN_ROOT = Path(__file__).resolve().parent.parent / "golden"
VERSIONS = list(range(LOWEST_VERSION, PROTOCOL_VERSION + 1))
AT = datetime(2026, 9, 21, 8, 30, tzinfo=UTC)
REC = "rec_aaaaaaaaaaaaaaaa"
EP = "ep_bbbbbbbbbbbbbbbb"
DEV = "dev_cccccccccccccccc"

USER = {"made_at": AT, "initiated_by": Initiator.USER}
ASSISTANT = {"made_at": AT, "initiated_by": Initiator.ASSISTANT}

ADD = AddEpisode(
    op_id="op_0000000000000001",
    **USER,
    episode_id=EP,
    conversation_id="c1",
    text="I grew up in Duluth.",
    typed_at=AT,
)
REMEMBER = Remember(
    op_id="op_0000000000000002",
    record_id=REC,
    text="I grew up in Duluth.",
    conversation_id="c1",
    source_episode_ids=[EP],
    content_type=ContentType.PERSONAL_FACT,
    custom_type=CustomType(name="hometown", core=ContentType.PERSONAL_FACT),
    life_areas=[LifeArea.GENERAL, LifeArea.TRAVEL],
    **USER,
)
FORGET = ForgetPermanently(op_id="op_0000000000000003", record_id=REC, **USER)
INFERRED = RecordContent(
    text="Prefers an americano in the morning",
    content_type=ContentType.PREFERENCE,
    epistemic_state=EpistemicState.INFERRED,
    time_kind=TimeKind.PERMANENT,
    source_episode_ids=[EP],
    source_kind=SourceKind.USER_BEHAVIOUR,
    evidence=Evidence(
        observations=[Observation(source_id="orders", source_kind=SourceKind.USER_BEHAVIOUR, at=AT)]
    ),
    life_areas=[LifeArea.SHOPPING],
    derived_from=[REC],
)
EVERY_OP = [
    ADD,
    REMEMBER,
    Correct(
        op_id="op_0000000000000004",
        record_id=REC,
        text="I grew up in Duluth.",
        conversation_id="c1",
        source_episode_ids=[EP],
        **USER,
    ),
    DontUse(op_id="op_0000000000000005", record_id=REC, **USER),
    UseAgain(op_id="op_0000000000000006", record_id=REC, **USER),
    RestrictUsage(
        op_id="op_0000000000000007",
        record_id=REC,
        restriction=UsageRestriction(area=LifeArea.TRAVEL),
        **USER,
    ),
    Confirm(op_id="op_0000000000000008", record_id=REC, **USER),
    Reaffirm(op_id="op_0000000000000009", record_id=REC, still_true=True, **USER),
    Infer(
        op_id="op_0000000000000010", record_id="rec_eeeeeeeeeeeeeeee", content=INFERRED, **ASSISTANT
    ),
    AddArtifact(
        op_id="op_0000000000000011",
        artifact_id="art_ffffffffffffffff",
        artifact_kind=ArtifactKind.SUMMARY,
        derived_from=[REC],
        payload="Grew up in Duluth.",
        **ASSISTANT,
    ),
    SetProject(op_id="op_0000000000000012", project="Renovation", open=True, **USER),
    ForgetArea(op_id="op_0000000000000013", area=LifeArea.WORK, proof=b"\x06" * 64, **USER),
    FORGET,
]
PAGE = AddEpisode(
    op_id="op_0000000000000014",
    **USER,
    episode_id="ep_gggggggggggggggg",
    conversation_id="inbox",
    text="Our office moves to Pier 4 in March.",
    typed_at=AT,
    source_kind=SourceKind.EXTERNAL_CONTENT,
    source_id="email:msg-1842@example.org",
)
WRITING_OPS = [
    PAGE,
    MarkCandidate(
        op_id="op_0000000000000015",
        episode_id=EP,
        sentence=0,
        content_type=ContentType.PERSONAL_FACT,
        sensitivity=Sensitivity.NORMAL,
        time_kind=TimeKind.PAST,
        score=0.93,
        model_id="candidate-detector-v1@0123456789ab",
        **ASSISTANT,
    ),
    EndSession(op_id="op_0000000000000016", conversation_id="c1", **USER),
    Consolidate(
        op_id="op_0000000000000017",
        record_id="rec_hhhhhhhhhhhhhhhh",
        content=RecordContent(
            text="I grew up in Duluth.",
            epistemic_state=EpistemicState.SAID,
            time_kind=TimeKind.PAST,
            source_episode_ids=[EP],
            conversation_id="c1",
            background=True,
        ),
        candidates=[CandidateRef(episode_id=EP, sentence=0)],
        **ASSISTANT,
    ),
    Corroborate(
        op_id="op_0000000000000018",
        record_id="rec_iiiiiiiiiiiiiiii",
        episode_id="ep_gggggggggggggggg",
        **ASSISTANT,
    ),
    ReviseRule(
        op_id="op_0000000000000019",
        record_id="rec_jjjjjjjjjjjjjjjj",
        text="Keep answers short in the morning.",
        **USER,
    ),
    PassTime(op_id="op_0000000000000020", record_id=REC, **ASSISTANT),
]

EXAMPLES: dict[str, BaseModel] = {
    "enroll_request": EnrollRequest(
        code="ABCD-EFGH-IJKL", device_name="phone", public_key=b"\x01" * 32
    ),
    "enroll_response": EnrollResponse(
        device_id=DEV, space_id="sp_dddddddddddddddd", credential="mst_x"
    ),
    "push_request": PushRequest(
        ops=[
            ADD.model_dump(mode="json"),
            REMEMBER.model_dump(mode="json"),
            FORGET.model_dump(mode="json"),
        ]
    ),
    "push_response": PushResponse(
        receipts=[
            Receipt(index=0, op_id=ADD.op_id, status=ReceiptStatus.APPLIED, applied_at=AT),
            Receipt(
                index=1,
                op_id=REMEMBER.op_id,
                status=ReceiptStatus.DUPLICATE,
                original_status=ReceiptStatus.APPLIED,
                effect=EffectKind.CORRECTED,
                record_id=REC,
                versions=[1, 2],
                applied_at=AT,
            ),
            Receipt(
                index=2,
                op_id=FORGET.op_id,
                status=ReceiptStatus.REFUSED,
                code=RefusalCode.FORGOTTEN,
                reason=f"record {REC} was permanently forgotten",
                record_id=REC,
            ),
        ]
    ),
    "push_request_writing": PushRequest(ops=[op.model_dump(mode="json") for op in WRITING_OPS]),
    "pull_request": PullRequest(cursor="MTo0Mg", limit=100),
    "pull_response": PullResponse(
        changes=[
            EpisodeChange(
                seq=1,
                episode_id=EP,
                typed_at=AT,
                key_id="key_e",
                sealed_content=b"\x02" * 40,
                sealed_key=b"\x03" * 80,
            ),
            RecordVersionChange(
                seq=2,
                record_id=REC,
                version=1,
                recorded_at=AT,
                key_id="key_r",
                sealed_content=b"\x04" * 40,
                sealed_key=b"\x05" * 80,
            ),
            RecordStateChange(
                seq=3,
                record_id=REC,
                lifecycle_state=LifecycleState.ACTIVE,
                current_version=1,
                usage_restriction=UsageRestriction(project="Renovation"),
                superseded_by_record="rec_eeeeeeeeeeeeeeee",
                conflicts_with=["rec_eeeeeeeeeeeeeeee"],
                at=AT,
            ),
            ArtifactChange(
                seq=4,
                artifact_id="art_ffffffffffffffff",
                derived_from=[REC],
                created_at=AT,
                key_id="key_a",
                sealed_content=b"\x07" * 40,
                sealed_key=b"\x08" * 80,
            ),
            ProjectChange(seq=5, project="Renovation", open=False, at=AT),
            KeyDestruction(
                seq=6,
                event_id=6,
                record_id=REC,
                key_ids=["key_r", "key_e", "key_a"],
                episode_ids=[EP],
                artifact_ids=["art_ffffffffffffffff"],
                destroyed_at=AT,
            ),
        ],
        cursor="MTo0",
        has_more=False,
    ),
    "ack_request": AckRequest(event_ids=[4]),
    "account_key_request": AccountKeyRequest(account_key=b"\x09" * 32),
    "account_key_response": AccountKeyResponse(account_key=b"\x09" * 32),
    "wiped_request": WipedRequest(),
    "wiped_response": WipedResponse(device_id=DEV, wiped_at=AT),
    "ack_response": AckResponse(acknowledged=[4]),
    "pending_response": PendingResponse(
        forgets=[
            ForgetStatus(
                record_id=REC,
                forgotten_at=AT,
                pending=[PendingDevice(device_id=DEV, device_name="phone")],
            )
        ]
    ),
    "recall_request": RecallRequest(
        query="Where did I grow up?",
        limit=3,
        area=LifeArea.TRAVEL,
        project="Renovation",
        personalized=True,
        factual=False,
        consents=[Sensitivity.HEALTH],
    ),
    "recall_response": RecallResponse(sealed_answer=b"\x00sealed box: 48-byte overhead\xff"),
    "recall_answer": RecallAnswer(
        lines=[
            RecallLine(
                record_id=REC,
                text="I grew up in Duluth.",
                content_type="hometown",
                epistemic_state=EpistemicState.SAID,
                confidence=ConfidenceClass.YOU_TOLD_ME,
                conflict=True,
                outdated=False,
                current=True,
                line='On 2026-09-21 you wrote: "I grew up in Duluth."  '
                "[hometown | said | You told me | CONFLICT: another record disagrees]",
                score=0.5868,
            ),
            RecallLine(
                record_id="rec_eeeeeeeeeeeeeeee",
                text="Lives near Lake Superior",
                content_type="personal_fact",
                epistemic_state=EpistemicState.INFERRED,
                confidence=ConfidenceClass.I_THINK_SO,
                conflict=True,
                outdated=False,
                current=False,
                line="[inferred, not your words] Lives near Lake Superior  "
                "[personal_fact | inferred | I think so | CONFLICT: another record disagrees]",
                score=0.0,
                pulled_in_by=REC,
                relation=Relation.PERSON,
            ),
        ],
        block="<memory-data id=0123456789abcdef>\n...\n</memory-data id=0123456789abcdef>",
        scope="cloud",
        factual=False,
    ),
    "error_body": ErrorBody(
        code=ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
        message="protocol version 7 is not supported; this side accepts versions 1 to 1",
        supported_versions=(1, 1),
    ),
}

# What version 2 says differently: its new fields set, in every message that has one.
V2_CHANGES: dict[str, BaseModel] = {
    "pull_request": PullRequest(cursor="MTo0Mg", limit=100, wait=20.0),
    "pull_response": PullResponse(
        changes=[
            EXAMPLES["pull_response"].changes[0],  # type: ignore[attr-defined]
            RecordVersionChange(
                seq=2,
                record_id=REC,
                version=1,
                recorded_at=AT,
                key_id="key_r",
                sealed_content=b"\x04" * 40,
                sealed_key=b"\x05" * 80,
                schema_version=1,
            ),
            *EXAMPLES["pull_response"].changes[2:],  # type: ignore[attr-defined]
        ],
        cursor="MTo0",
        has_more=True,
    ),
    "error_body": ErrorBody(
        code=ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
        message="protocol version 7 is not supported; this side accepts versions 1 to 2",
        supported_versions=(1, 2),
    ),
}


# What version 3 adds: the device subset (its changes, the uses a pull reports, its routes).
V3_CHANGES: dict[str, BaseModel] = {
    "pull_request": PullRequest(
        cursor="YzI6NDI6Nw",
        limit=100,
        wait=20.0,
        used=[RecordUse(record_id=REC, uses=3, last_used_at=AT)],
    ),
    "pull_response": PullResponse(
        changes=[
            *V2_CHANGES["pull_response"].changes[:3],  # type: ignore[attr-defined]
            SubsetChange(seq=3, record_id=REC, entered=True, reason="preference", at=AT),
            SubsetChange(
                seq=7,
                record_id="rec_eeeeeeeeeeeeeeee",
                entered=False,
                episode_ids=[EP],
                artifact_ids=["art_ffffffffffffffff"],
                at=AT,
            ),
        ],
        cursor="YzI6NDI6OQ",
        has_more=False,
    ),
    "subset_policy_request": SubsetPolicyRequest(
        policy=SubsetPolicy(
            rules=SubsetRules(
                upcoming_days=7, frequent_uses=5, recent_days=14, areas=[LifeArea.WORK]
            ),
            budget=SubsetBudget(max_records=500, max_bytes=8 * 1024 * 1024),
        )
    ),
    "pin_request": PinRequest(record_id=REC, pinned=True),
    "subset_response": SubsetResponse(
        subset=SubsetView(
            device_id=DEV,
            policy=SubsetPolicy(),
            pins=[REC],
            records=3,
            size_bytes=4096,
            by_reason=[
                SubsetEntry(reason=Reason.PINNED, records=1),
                SubsetEntry(reason=Reason.PREFERENCE, records=2),
            ],
            left_out=1,
            left_out_pins=[],
            excluded_pins=["rec_eeeeeeeeeeeeeeee"],
            chosen_at=AT,
        )
    ),
    "error_body": ErrorBody(
        code=ErrorCode.PIN_REFUSED,
        message="record rec_aaaaaaaaaaaaaaaa is permanently forgotten; there is nothing to pin",
        supported_versions=(1, 3),
    ),
}


# version 4: a cloud answer says how many of the space's records were not indexed yet
_ANSWER = EXAMPLES["recall_answer"]
assert isinstance(_ANSWER, RecallAnswer)
V4_CHANGES: dict[str, BaseModel] = {
    "recall_answer": _ANSWER.model_copy(update={"unindexed": 1375}),
}


def examples(version: int) -> dict[str, BaseModel]:
    """Every message of ``version``, as the models of today's code hold it."""
    if version == 1:
        return EXAMPLES
    if version == 2:
        return {**EXAMPLES, **V2_CHANGES}
    if version == 3:
        return {**EXAMPLES, **V2_CHANGES, **V3_CHANGES}
    return {**EXAMPLES, **V2_CHANGES, **V3_CHANGES, **V4_CHANGES}


def golden_text(model: BaseModel, version: int) -> str:
    return json.dumps(json.loads(render_json(model, version)), indent=2, sort_keys=True) + "\n"


CASES = [(v, name) for v in VERSIONS for name in sorted(examples(v))]


@pytest.mark.parametrize(("version", "name"), CASES, ids=[f"v{v}-{n}" for v, n in CASES])
def test_wire_format_matches_golden_file_byte_for_byte(version: int, name: str) -> None:
    model = examples(version)[name]
    path = GOLDEN_ROOT / f"v{version}" / f"{name}.json"
    text = golden_text(model, version)
    if os.environ.get("MEMSYNC_WRITE_GOLDEN") == str(version):
        path.write_text(text)
    assert path.read_bytes() == text.encode(), (
        f"the v{version} wire format of {name} changed; see the module docstring"
    )
    raw = json.loads(path.read_text())
    assert raw.get("protocol_version", version) == version
    parsed = parse(type(model), raw, version)
    expected = model
    if "protocol_version" in type(model).model_fields:
        expected = model.model_copy(update={"protocol_version": version})
    assert parsed == expected
    assert golden_text(parsed, version) == text


@pytest.mark.parametrize("version", VERSIONS)
def test_golden_files_have_no_orphans(version: int) -> None:
    folder = GOLDEN_ROOT / f"v{version}"
    assert {p.stem for p in folder.glob("*.json")} == set(examples(version))


def test_version_1_renders_of_version_2_messages_drop_exactly_the_new_fields() -> None:
    v1 = json.loads(render_json(EXAMPLES["pull_response"], 1))
    v2 = json.loads(render_json(EXAMPLES["pull_response"], 2))
    version_change = next(c for c in v2["changes"] if c["kind"] == "record_version")
    assert version_change["schema_version"] == 1
    assert all("schema_version" not in c for c in v1["changes"])
    assert (v1["protocol_version"], v2["protocol_version"]) == (1, 2)
    assert "wait" in json.loads(render_json(EXAMPLES["pull_request"], 2))
    assert "wait" not in json.loads(render_json(EXAMPLES["pull_request"], 1))


def test_wire_models_are_frozen_and_refuse_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        PullRequest.model_validate({"protocol_version": 1, "cursor": None, "surprise": 1})
    with pytest.raises(ValidationError):
        EXAMPLES["ack_request"].event_ids = []  # type: ignore[attr-defined]


def test_every_operation_kind_is_pinned_by_a_golden_file() -> None:
    pinned = {
        op["kind"]
        for version in VERSIONS
        for name in ("push_request", "push_request_writing")
        for op in json.loads((GOLDEN_ROOT / f"v{version}" / f"{name}.json").read_text())["ops"]
    }
    every = {cls.model_fields["kind"].default for cls in get_args(AnyOperation)}
    shown = {op.kind for op in [*EVERY_OP, *WRITING_OPS]}
    assert every == shown, f"operations without an example: {sorted(every - shown)}"
    assert {"add_episode", *(op.kind for op in WRITING_OPS)} <= pinned
