"""Rendering and parsing one message for one protocol version (``protocol.versioned``)."""

from __future__ import annotations

import json
from contextlib import nullcontext
from datetime import UTC, datetime
from typing import Annotated, Any, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field, ValidationError

from protocol import messages
from protocol.errors import FieldNotInVersion
from protocol.messages import (
    AnyChange,
    EpisodeChange,
    PullRequest,
    PullResponse,
    RecordUse,
    RecordVersionChange,
)
from protocol.version import PROTOCOL_VERSION, Since
from protocol.versioned import _refuse_newer_set, _walk_spec, introduced_in, parse, render_json

AT = datetime(2026, 9, 21, 8, 30, tzinfo=UTC)
REC = "rec_aaaaaaaaaaaaaaaa"


def _wire_models() -> list[type[BaseModel]]:
    found = {
        obj
        for obj in vars(messages).values()
        if isinstance(obj, type)
        and issubclass(obj, BaseModel)
        and obj.__module__ == messages.__name__
    }
    return sorted(found | set(get_args(AnyChange)), key=lambda t: t.__name__)


def test_version_2_added_exactly_live_pull_and_the_record_schema_version() -> None:
    added = {
        (model.__name__, name)
        for model in _wire_models()
        for name in model.model_fields
        if introduced_in(model, name) == 2
    }
    assert added == {("PullRequest", "wait"), ("RecordVersionChange", "schema_version")}
    assert all(
        introduced_in(model, name) <= PROTOCOL_VERSION
        for model in _wire_models()
        for name in model.model_fields
    )


def test_version_3_added_exactly_the_uses_a_pull_reports() -> None:
    """The device subset (protocol 3) adds one field; its new messages (``SubsetChange``,
    the subset routes' envelopes) are never sent to an older device."""
    added = {
        (model.__name__, name)
        for model in _wire_models()
        for name in model.model_fields
        if introduced_in(model, name) == 3
    }
    assert added == {("PullRequest", "used")}
    used = PullRequest(used=[RecordUse(record_id=REC, uses=2, last_used_at=AT)])
    with pytest.raises(FieldNotInVersion):
        render_json(used, 2)
    assert "used" not in json.loads(render_json(PullRequest(), 2))


def _version_change(seq: int = 2, **extra: object) -> RecordVersionChange:
    return RecordVersionChange(
        seq=seq,
        record_id=REC,
        version=1,
        recorded_at=AT,
        key_id="key_r",
        sealed_content=b"\x04" * 8,
        sealed_key=b"\x05" * 8,
        **extra,  # type: ignore[arg-type]
    )


def test_a_version_1_request_carrying_wait_is_refused_naming_the_field_and_version() -> None:
    for value in (0, 10, 99, "x"):  # refused for being there, whatever its value
        with pytest.raises(FieldNotInVersion) as info:
            parse(PullRequest, {"protocol_version": 1, "wait": value}, 1)
        assert str(info.value) == (
            "PullRequest field 'wait' needs protocol version 2; this message speaks version 1"
        )
    assert parse(PullRequest, {"protocol_version": 2, "wait": 10}, 2).wait == 10.0


def test_a_version_1_answer_carrying_a_nested_version_2_field_is_refused() -> None:
    raw = json.loads(
        render_json(PullResponse(changes=[_version_change()], cursor="c", has_more=False), 2)
    )
    raw["protocol_version"] = 1
    with pytest.raises(FieldNotInVersion, match="RecordVersionChange field 'schema_version'"):
        parse(PullResponse, raw, 1)
    del raw["changes"][0]["schema_version"]
    parsed = parse(PullResponse, raw, 1)
    assert parsed.changes[0].schema_version == 1  # type: ignore[union-attr]


@pytest.mark.parametrize("wait", [-0.1, 25.5, float("nan"), float("inf"), "soon"])
def test_wait_is_validated(wait: object) -> None:
    with pytest.raises(ValidationError, match="wait"):
        parse(PullRequest, {"protocol_version": 2, "wait": wait}, 2)


def test_a_message_that_version_1_cannot_say_is_not_rendered_for_it() -> None:
    with pytest.raises(FieldNotInVersion, match="'wait' needs protocol version 2"):
        render_json(PullRequest(wait=5), 1)
    with pytest.raises(FieldNotInVersion, match="'schema_version' needs protocol version 2"):
        render_json(
            PullResponse(changes=[_version_change(schema_version=2)], cursor="c", has_more=False), 1
        )


def test_rendering_for_a_version_the_code_does_not_speak_is_refused() -> None:
    with pytest.raises(Exception, match="protocol version 5 is not supported"):
        render_json(PullRequest(), 5)


changes = st.lists(
    st.one_of(
        st.builds(
            lambda seq: _version_change(seq=seq),
            st.integers(1, 10**6),
        ),
        st.builds(
            lambda seq: EpisodeChange(
                seq=seq,
                episode_id="ep_bbbbbbbbbbbbbbbb",
                typed_at=AT,
                key_id="k",
                sealed_content=b"\x01",
                sealed_key=b"\x02",
            ),
            st.integers(1, 10**6),
        ),
    ),
    max_size=6,
)


@given(
    cursor=st.none() | st.text(max_size=20),
    limit=st.integers(1, 500),
    wait=st.floats(0, 25),
    page=changes,
    has_more=st.booleans(),
)
def test_version_1_is_version_2_without_its_new_fields(
    cursor: str | None, limit: int, wait: float, page: list[AnyChange], has_more: bool
) -> None:
    for message, v2_only in [
        (PullRequest(cursor=cursor, limit=limit), {"wait"}),
        (PullResponse(changes=page, cursor="c", has_more=has_more), set()),
    ]:
        v1 = json.loads(render_json(message, 1))
        v2 = json.loads(render_json(message, 2))
        assert (v1.pop("protocol_version"), v2.pop("protocol_version")) == (1, 2)
        assert set(v2) - set(v1) == v2_only
        for old, new in zip(v1.get("changes", []), v2.get("changes", []), strict=True):
            assert set(new) - set(old) == (
                {"schema_version"} if new["kind"] == "record_version" else set()
            )
        assert parse(type(message), {"protocol_version": 1, **v1}, 1) == message.model_copy(
            update={"protocol_version": 1}
        )
    live = PullRequest(cursor=cursor, limit=limit, wait=wait)
    assert parse(PullRequest, json.loads(render_json(live, 2)), 2) == live.model_copy(
        update={"protocol_version": 2}
    )
    with pytest.raises(FieldNotInVersion) if wait else nullcontext():
        render_json(live, 1)


class _Inner(BaseModel):
    late: Annotated[int, Since(2)] = 0


class _Holder(BaseModel):
    plain: list[int] = []
    named: Annotated[str, Field(min_length=0)] = ""
    inner: list[_Inner] = []
    anything: Any = None
    maybe: dict[str, _Inner | None] = {}


def test_the_parse_walk_skips_only_what_cannot_hold_a_newer_field() -> None:
    """A model whose fields cannot hold a newer field is not walked; every field that
    can (a nested model, ``Any``, a dict of models) still is, at any depth."""
    assert _walk_spec(PullRequest, 2) == ()  # its own newer field, nothing nested
    assert _walk_spec(RecordVersionChange, 2) is None
    assert _walk_spec(_Holder, 2) == ("anything",)  # only Any may hold a newer one
    assert _walk_spec(_Holder, 1) == ("inner", "anything", "maybe")
    for raw in (
        {"inner": [{}, {"late": 1}]},
        {"maybe": {"a": None, "b": {"late": 0}}},
    ):
        with pytest.raises(FieldNotInVersion, match="_Inner field 'late'"):
            parse(_Holder, raw, 1)
        parse(_Holder, raw, 2)
    held = _Holder(anything=_Inner(late=3))
    with pytest.raises(FieldNotInVersion, match="_Inner field 'late'"):
        _refuse_newer_set(held, 1)
    _refuse_newer_set(_Holder(anything=[_Inner()]), 1)
