"""Golden files pin version 1's wire format: any change to a message's JSON fails here.

To add a message or a new protocol version, write its golden file deliberately with
``MEMSYNC_WRITE_GOLDEN=1 pytest tests/protocol/test_golden.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from protocol.messages import (
    AckRequest,
    AckResponse,
    EnrollRequest,
    EnrollResponse,
    EpisodeChange,
    ErrorBody,
    ErrorCode,
    ForgetStatus,
    KeyDestruction,
    LifecycleChange,
    PendingDevice,
    PendingResponse,
    PullRequest,
    PullResponse,
    PushRequest,
    PushResponse,
    RecordVersionChange,
)
from protocol.model import EpistemicState, LifecycleState
from protocol.operations import (
    AddEpisode,
    ForgetPermanently,
    Receipt,
    ReceiptStatus,
    RefusalCode,
    Remember,
)

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "v1"
AT = datetime(2026, 9, 21, 8, 30, tzinfo=UTC)
REC = "rec_aaaaaaaaaaaaaaaa"
EP = "ep_bbbbbbbbbbbbbbbb"
DEV = "dev_cccccccccccccccc"

ADD = AddEpisode(
    op_id="op_0000000000000001",
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
    made_at=AT,
)
FORGET = ForgetPermanently(op_id="op_0000000000000003", record_id=REC, made_at=AT)

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
                record_id=REC,
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
                epistemic_state=EpistemicState.SAID,
                lifecycle_state=LifecycleState.ACTIVE,
                recorded_at=AT,
                key_id="key_r",
                sealed_content=b"\x04" * 40,
                sealed_key=b"\x05" * 80,
            ),
            LifecycleChange(seq=3, record_id=REC, lifecycle_state=LifecycleState.FORGOTTEN, at=AT),
            KeyDestruction(
                seq=4,
                event_id=4,
                record_id=REC,
                key_ids=["key_r", "key_e"],
                episode_ids=[EP],
                destroyed_at=AT,
            ),
        ],
        cursor="MTo0",
        has_more=False,
    ),
    "ack_request": AckRequest(event_ids=[4]),
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
    "error_body": ErrorBody(
        code=ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
        message="protocol version 7 is not supported; this side accepts versions 1 to 1",
    ),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_wire_format_matches_golden_file(name: str) -> None:
    model = EXAMPLES[name]
    encoded = json.loads(model.model_dump_json())
    path = GOLDEN / f"{name}.json"
    if os.environ.get("MEMSYNC_WRITE_GOLDEN") == "1":
        path.write_text(json.dumps(encoded, indent=2, sort_keys=True) + "\n")
    golden = json.loads(path.read_text())
    assert encoded == golden, f"the wire format of {name} changed; see the module docstring"
    assert type(model).model_validate_json(path.read_text()) == model


def test_golden_files_have_no_orphans() -> None:
    assert {p.stem for p in GOLDEN.glob("*.json")} == set(EXAMPLES)


def test_wire_models_are_frozen_and_refuse_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        PullRequest.model_validate({"protocol_version": 1, "cursor": None, "surprise": 1})
    with pytest.raises(ValidationError):
        EXAMPLES["ack_request"].event_ids = []  # type: ignore[attr-defined]
