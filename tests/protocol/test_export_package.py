"""The export package: layout round trip, totals, order, schema version, the view, the
committed JSON Schema."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from protocol.errors import PackageError
from protocol.export.layout import Item, lines_of, read_package, write_package
from protocol.export.package import (
    ConnectedAccount,
    ExportedDevice,
    ExportedProject,
    ExportedRecord,
    ExportedVersion,
    ExportPackage,
    PackageHeader,
    Section,
    Totals,
)
from protocol.export.schema import package_schema_json
from protocol.export.view import escape, render_markdown
from protocol.ids import make_id
from protocol.model import (
    Episode,
    LifecycleState,
    RecordContent,
    Sensitivity,
    Skeleton,
)
from tests.protocol.strategies import contents

AT = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "export-package.schema.json"


def header(include_sensitive: bool = True) -> PackageHeader:
    return PackageHeader(
        export_id=make_id("exp", b"\x01" * 10),
        exported_at=AT,
        space_id=make_id("sp", b"\x02" * 10),
        includes_sensitive=include_sensitive,
    )


def record(n: int, text: str = "I grew up in Duluth.", **content: object) -> ExportedRecord:
    body = RecordContent(text=text, source_episode_ids=[episode(0).id], **content)  # type: ignore[arg-type]
    return ExportedRecord(
        id=make_id("rec", n.to_bytes(10, "big")),
        lifecycle_state=LifecycleState.ACTIVE,
        created_at=AT,
        current_version=1,
        versions=[ExportedVersion.of(version=1, recorded_at=AT, content=body)],
    )


def episode(n: int, text: str = "I grew up in Duluth.") -> Episode:
    return Episode(
        id=make_id("ep", n.to_bytes(10, "big")), conversation_id="c1", text=text, typed_at=AT
    )


def sample_items() -> list[Item]:
    return [
        Item(Section.RECORDS, record(1)),
        Item(Section.RECORDS, record(2, "I drink my coffee iced.")),
        Item(Section.SKELETONS, Skeleton(id=make_id("rec", b"\x09" * 10), forgotten_at=AT)),
        Item(Section.EPISODES, episode(0)),
        Item(Section.PROJECTS, ExportedProject(name="thesis", open=True, updated_at=AT)),
        Item(
            Section.CONNECTED_ACCOUNTS,
            ConnectedAccount(
                source_id="calendar:me", first_episode_at=AT, latest_episode_at=AT, episodes=2
            ),
        ),
        Item(
            Section.DEVICES,
            ExportedDevice(device_id=make_id("dev", b"\x03" * 10), name="phone", enrolled_at=AT),
        ),
        Item(
            Section.SENSITIVE_RECORDS,
            record(3, "I have asthma.", sensitivity=Sensitivity.HEALTH),
        ),
    ]


def test_a_written_package_is_one_json_document_and_reads_back_item_for_item() -> None:
    text = "".join(write_package(header(), sample_items()))
    package = ExportPackage.model_validate_json(text)
    assert package.totals.records == 2 and package.totals.sensitive_records == 1
    assert package.sensitive is not None and package.sensitive.records[0].sensitive
    events = list(read_package(text.splitlines()))
    assert events[0] == header()
    assert [e for e in events if isinstance(e, Item)] == sample_items()
    assert isinstance(events[-1], Totals) and events[-1] == package.totals


def test_left_out_sensitive_section_is_null_and_refuses_sensitive_items() -> None:
    items = [i for i in sample_items() if i.section is not Section.SENSITIVE_RECORDS]
    text = "".join(write_package(header(False), items))
    assert json.loads(text)["sensitive"] is None
    assert ExportPackage.model_validate_json(text).includes_sensitive is False
    with pytest.raises(PackageError, match=r"sensitive\.records"):
        "".join(write_package(header(False), sample_items()))


def test_items_out_of_section_order_are_refused() -> None:
    items = sample_items()
    with pytest.raises(PackageError, match="order"):
        "".join(write_package(header(), [items[3], items[0]]))


def test_an_item_of_the_wrong_model_is_refused() -> None:
    with pytest.raises(PackageError, match="expected a ExportedRecord"):
        "".join(write_package(header(), [Item(Section.RECORDS, episode(1))]))


@pytest.mark.parametrize("cut", [1, 3, 5, 9, 12])
def test_a_package_cut_short_is_refused(cut: int) -> None:
    lines = "".join(write_package(header(), sample_items())).splitlines()
    with pytest.raises(PackageError, match=r"cut short|expected"):
        list(read_package(lines[: len(lines) - cut]))


def test_totals_that_disagree_are_refused_by_both_readers() -> None:
    text = "".join(write_package(header(), sample_items()))
    forged = text.replace('"records":2,', '"records":3,', 1)
    assert forged != text
    with pytest.raises(PackageError, match="holds 2 item"):
        list(read_package(forged.splitlines()))
    with pytest.raises(ValidationError, match="incomplete or was altered"):
        ExportPackage.model_validate_json(forged)


def test_a_dropped_item_is_caught_by_the_totals() -> None:
    lines = "".join(write_package(header(), sample_items())).splitlines()
    spliced = [line for line in lines if "coffee" not in line]
    with pytest.raises(PackageError, match="records holds 1"):
        list(read_package(spliced))


@pytest.mark.parametrize("version", ["3", "0", '"2"', "null", "true", "2.5"])
def test_an_unknown_schema_version_is_refused_by_name(version: str) -> None:
    text = "".join(write_package(header(), sample_items()))
    assert '"schema_version":2,' in text
    changed = text.replace('"schema_version":2', f'"schema_version":{version}', 1)
    shown = {"null": "None", "true": "True", '"2"': "'2'"}.get(version, version)
    with pytest.raises(
        PackageError,
        match=rf"schema version {re.escape(shown)}; this memsync reads schema versions 1 and 2",
    ):
        list(read_package(changed.splitlines()))


def test_an_item_with_an_unknown_field_is_refused_naming_the_line() -> None:
    lines = "".join(write_package(header(), sample_items())).splitlines()
    bad = [
        line.replace('{"id"', '{"secret":"x","id"', 1)
        if "Duluth" in line and line.startswith('{"id"')
        else line
        for line in lines
    ]
    with pytest.raises(PackageError, match=r"line \d+ .*secret"):
        list(read_package(bad))


def test_lines_of_rejoins_any_chunking() -> None:
    text = "".join(write_package(header(), sample_items())).encode()
    for size in (1, 7, 64, 4096):
        chunks = [text[i : i + size] for i in range(0, len(text), size)]
        assert list(lines_of(chunks)) == text.decode().splitlines()


def test_lines_of_refuses_a_line_above_its_limit() -> None:
    with pytest.raises(PackageError, match="longer than 10 bytes"):
        list(lines_of([b"x" * 11], max_line=10))


@settings(max_examples=60, deadline=None)
@given(st.lists(contents(), min_size=0, max_size=6), st.booleans())
def test_any_records_round_trip_through_the_layout(bodies: list[RecordContent], sens: bool) -> None:
    items: list[Item] = []
    sensitive: list[Item] = []
    for n, body in enumerate(bodies):
        rec = ExportedRecord(
            id=make_id("rec", (n + 100).to_bytes(10, "big")),
            lifecycle_state=LifecycleState.CANDIDATE,
            created_at=AT,
            current_version=2,
            versions=[
                ExportedVersion.of(version=1, recorded_at=AT, content=body),
                ExportedVersion.of(
                    version=2, supersedes=1, recorded_at=AT + timedelta(days=1), content=body
                ),
            ],
        )
        if rec.sensitive:
            if sens:
                sensitive.append(Item(Section.SENSITIVE_RECORDS, rec))
        else:
            items.append(Item(Section.RECORDS, rec))
    text = "".join(write_package(header(sens), [*items, *sensitive]))
    read = [e for e in read_package(text.splitlines()) if isinstance(e, Item)]
    assert read == [*items, *sensitive]
    assert len(ExportPackage.model_validate_json(text).all_records()) == len(read)


def test_the_view_shows_every_item_and_escapes_stored_words() -> None:
    hostile = record(7, "# Heading [link](http://x) <script>alert(1)</script>")
    items = [*sample_items()[:2], Item(Section.RECORDS, hostile), *sample_items()[2:]]
    text = "".join(write_package(header(), items))
    view = "".join(render_markdown(read_package(text.splitlines())))
    assert "I grew up in Duluth\\." in view and "I have asthma\\." in view
    assert "<script>" not in view and "\n# Heading" not in view and "](http" not in view
    assert "permanently forgotten" in view and "calendar:me" in view and "phone" in view
    assert "## Task history\n\nNone." in view
    assert escape("a\nb") == "a b"


def test_the_committed_json_schema_is_the_models_schema() -> None:
    """Regenerate with ``make export-schema`` when a package model changes."""
    assert SCHEMA_FILE.read_text() == package_schema_json(), (
        "docs/export-package.schema.json disagrees with protocol.export.package: "
        "run `make export-schema` and commit the result"
    )


def test_the_schema_names_its_version_and_every_section() -> None:
    schema = json.loads(package_schema_json())
    assert schema["properties"]["schema_version"]["const"] == 2
    version = schema["$defs"]["ExportedVersion"]
    assert {"provenance", "verification"} <= set(version["required"])
    for section in (
        "records",
        "behaviour_rules",
        "skeletons",
        "episodes",
        "projects",
        "connected_accounts",
        "devices",
        "tasks",
        "sensitive",
        "totals",
    ):
        assert section in schema["properties"], section
    names: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            names.update(node.get("properties", {}))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    for secret in ("credential", "token", "proof", "public_key", "account_key", "password", "key"):
        assert not [n for n in names if secret in n], (secret, sorted(names))
