"""The record schema version: carried, invisible at schema 1, and a newer writer's
content type read as its core type (``protocol.model.RecordContent``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError, create_model

from protocol.model import (
    CORE_TYPE_NAMES,
    RECORD_SCHEMA_VERSION,
    ContentType,
    RecordContent,
)
from protocol.wire import WireModel
from tests.protocol.strategies import contents

# A reader from before the schema version existed: the same fields, minus that one,
# refusing unknown fields like every wire model.
OldRecordContent = create_model(  # type: ignore[call-overload]
    "OldRecordContent",
    __base__=WireModel,
    **{
        name: (info.annotation, info)
        for name, info in RecordContent.model_fields.items()
        if name != "schema_version"
    },
)

custom_names = st.from_regex(r"^[a-z][a-z0-9_]{1,39}$", fullmatch=True).filter(
    lambda name: name not in CORE_TYPE_NAMES
)
cores = st.sampled_from(list(ContentType))


def test_this_code_writes_record_schema_1() -> None:
    assert RECORD_SCHEMA_VERSION == 1


@given(content=contents())
def test_schema_1_content_is_written_as_before_and_an_old_reader_opens_it(
    content: RecordContent,
) -> None:
    written = content.model_dump_json()
    assert content.schema_version == 1
    assert "schema_version" not in json.loads(written)
    old = OldRecordContent.model_validate_json(written)
    assert old.model_dump(mode="json") == json.loads(written)
    assert RecordContent.model_validate_json(written) == content


@given(content=contents(), name=custom_names, core=cores, schema=st.integers(1, 9))
def test_a_newer_writers_type_is_read_as_its_core_type(
    content: RecordContent, name: str, core: ContentType, schema: int
) -> None:
    newer: dict[str, Any] = json.loads(content.model_dump_json())
    newer.update(
        schema_version=schema,
        content_type=name,
        custom_type={"name": name, "core": core.value},
    )
    read = RecordContent.model_validate_json(json.dumps(newer))
    assert read.content_type is core
    assert read.custom_type is not None and read.custom_type.name == name
    assert read.custom_type.core is core
    assert read.schema_version == RECORD_SCHEMA_VERSION  # held in the schema this code knows
    kept = read.model_dump(mode="json", exclude={"content_type", "custom_type"})
    original = content.model_dump(mode="json", exclude={"content_type", "custom_type"})
    assert kept == original
    # written back, it is plain schema 1: an old reader opens it
    OldRecordContent.model_validate_json(read.model_dump_json())


@given(content=contents(), name=custom_names)
def test_an_unknown_type_naming_no_core_is_refused_by_name(
    content: RecordContent, name: str
) -> None:
    raw: dict[str, Any] = json.loads(content.model_dump_json())
    raw.update(content_type=name, custom_type=None)
    with pytest.raises(ValidationError) as info:
        RecordContent.model_validate(raw)
    assert f"content type {name!r} is not one of the eight core types" in str(info.value)
    assert "names no core type" in str(info.value)


def test_the_medication_example() -> None:
    base = {"text": "I take insulin.", "source_episode_ids": ["ep_bbbbbbbbbbbbbbbb"]}
    read = RecordContent.model_validate(
        {
            **base,
            "content_type": "medication",
            "custom_type": {"name": "medication", "core": "constraint"},
        }
    )
    assert read.content_type is ContentType.CONSTRAINT
    assert read.custom_type is not None and read.custom_type.name == "medication"

    with pytest.raises(ValidationError, match="custom_type names 'pill', not 'medication'"):
        RecordContent.model_validate(
            {
                **base,
                "content_type": "medication",
                "custom_type": {"name": "pill", "core": "constraint"},
            }
        )
    with pytest.raises(ValidationError, match="content_type"):  # the core must be core
        RecordContent.model_validate(
            {
                **base,
                "content_type": "medication",
                "custom_type": {"name": "medication", "core": "medicine"},
            }
        )
    with pytest.raises(ValidationError, match="names no core type"):
        RecordContent.model_validate({**base, "content_type": "medication"})


@pytest.mark.parametrize("schema", [0, -1, "two", None])
def test_a_schema_version_must_be_a_positive_number(schema: object) -> None:
    raw = {"text": "x", "source_episode_ids": ["ep_bbbbbbbbbbbbbbbb"], "schema_version": schema}
    with pytest.raises(ValidationError, match="schema_version"):
        RecordContent.model_validate(raw)


def test_fields_outside_the_forward_compatible_set_are_still_refused() -> None:
    raw = {
        "schema_version": 2,
        "text": "x",
        "source_episode_ids": ["ep_bbbbbbbbbbbbbbbb"],
        "dosage": "10 units",
    }
    with pytest.raises(ValidationError, match="dosage"):
        RecordContent.model_validate(raw)
