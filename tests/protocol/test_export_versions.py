"""Package schema 2 and the reader of schema 1: every record version says who produced
its words and who verified it; a committed version-1 package (written by the code of
main 2921609, before schema 2) still validates against the frozen v1 schema and reads
as version 2 with its provenance derived; the view says who wrote and who verified; an
import is an import whoever wrote the words in the exported space."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from protocol.errors import PackageError
from protocol.export.importing import operations, plan_import
from protocol.export.layout import Item, read_package, write_package
from protocol.export.package import (
    PACKAGE_SCHEMA_VERSION,
    READABLE_SCHEMA_VERSIONS,
    ExportedRecord,
    ExportedVersion,
    ExportPackage,
    PackageHeader,
    Section,
)
from protocol.export.schema import package_schema
from protocol.export.versions import check_version, upgrade_package
from protocol.export.view import produced, render_markdown, verified
from protocol.ids import make_id
from protocol.ledger import Ledger, step
from protocol.model import (
    EpistemicState,
    Producer,
    Provenance,
    RecordContent,
    SourceKind,
    Verification,
    VerifiedBy,
)
from protocol.operations import ReceiptStatus
from protocol.provenance import is_users_words, provenance_of, verification_of
from tests.protocol.packages import eid, package_text, record, rid

ROOT = Path(__file__).resolve().parents[2]
V1_PACKAGE = ROOT / "tests" / "golden" / "export" / "package-v1.json"
V1_SCHEMA = ROOT / "docs" / "export-package.v1.schema.json"
V2_SCHEMA = ROOT / "docs" / "export-package.schema.json"
NOW = datetime(2026, 4, 1, 10, 0, tzinfo=UTC)
WEB = "web_page:https://pay.example/fees"


def v1_text() -> str:
    return V1_PACKAGE.read_text(encoding="utf-8")


def v1_read() -> list[PackageHeader | Item | object]:
    return list(read_package(v1_text().splitlines()))


def by_id(events: list[Any]) -> dict[str, ExportedRecord]:
    return {
        e.model.id: e.model
        for e in events
        if isinstance(e, Item) and isinstance(e.model, ExportedRecord)
    }


def ids() -> Callable[[str], str]:
    counter = itertools.count(20_000)
    return lambda prefix: make_id(prefix, next(counter).to_bytes(10, "big"))


# --- the versions ----------------------------------------------------------------------


def test_writers_write_2_and_readers_read_1_and_2() -> None:
    assert PACKAGE_SCHEMA_VERSION == 2 and READABLE_SCHEMA_VERSIONS == (1, 2)
    assert PackageHeader(
        export_id="exp_" + "a1" * 8, exported_at=NOW, space_id="sp_" + "b2" * 8,
        includes_sensitive=False,
    ).schema_version == 2  # fmt: skip
    assert json.loads(package_text())["schema_version"] == 2
    assert [check_version(v) for v in (1, 2)] == [1, 2]
    for bad in (0, 3, "2", None, True, 1.0):
        with pytest.raises(PackageError, match="reads schema versions 1 and 2"):
            check_version(bad)


# --- the committed version-1 package ---------------------------------------------------


def test_the_committed_v1_package_validates_against_the_frozen_v1_schema_only() -> None:
    jsonschema_rs = pytest.importorskip("jsonschema_rs")
    raw = json.loads(v1_text())
    assert raw["schema_version"] == 1
    v1 = jsonschema_rs.validator_for(json.loads(V1_SCHEMA.read_text()))
    assert [str(e) for e in v1.iter_errors(raw)] == []
    v2 = jsonschema_rs.validator_for(json.loads(V2_SCHEMA.read_text()))
    assert not v2.is_valid(raw)  # no provenance beside the contents, version 1
    assert v2.is_valid(upgrade_package(raw))  # read as the version-2 package it would be


def test_the_frozen_v1_schema_is_version_1() -> None:
    schema = json.loads(V1_SCHEMA.read_text())
    assert schema["$id"].endswith("/v1.json")
    assert schema["properties"]["schema_version"]["const"] == 1
    assert "provenance" not in schema["$defs"]["ExportedVersion"]["properties"]
    assert schema != package_schema()


def test_a_v1_package_reads_as_2_with_each_version_s_provenance_derived() -> None:
    events = v1_read()
    header = events[0]
    assert isinstance(header, PackageHeader) and header.schema_version == 2
    records = by_id(events)
    assert len(records) == 9
    for rec in records.values():
        for v in rec.versions:
            assert v.provenance == provenance_of(v.content)
            assert v.verification == verification_of(v.content)
    oslo = records[rid(1)]
    assert [v.content.provenance for v in oslo.versions] == [None, None]  # content as was
    assert [v.provenance.producer for v in oslo.versions] == [Producer.USER] * 2
    assert oslo.current.provenance.conversation_id == "c1"
    assert records[rid(2)].current.provenance == records[rid(2)].current.content.provenance
    ana = records[rid(3)].current
    assert ana.verification is not None and ana.verification.by is VerifiedBy.USER
    bank = records[rid(4)].current
    assert bank.provenance.producer is Producer.SOURCE and bank.provenance.medium == "web_page"
    assert bank.verification is not None and bank.verification.by is VerifiedBy.SOURCES
    assert bank.verification.sources == ["bank.example", "pay.example"]
    fees = records[rid(5)].current
    assert (fees.provenance.producer, fees.provenance.medium, fees.provenance.reference) == (
        Producer.SOURCE, "web_page", "https://pay.example/fees",
    )  # fmt: skip
    assert fees.verification is None
    assert records[rid(6)].current.provenance.producer is Producer.ASSISTANT
    assert records[rid(7)].current.provenance.producer is Producer.IMPORT
    rule = records[rid(8)].current.provenance
    assert (rule.producer, rule.medium) == (Producer.ASSISTANT, "behaviour")


def test_both_readers_read_a_v1_package_alike() -> None:
    whole = ExportPackage.model_validate(upgrade_package(json.loads(v1_text())))
    assert whole.schema_version == 2
    assert {r.id: r for r in whole.all_records()} == by_id(v1_read())


def test_a_v1_package_written_again_is_a_v2_package_that_reads_the_same() -> None:
    """What a device does with a version-1 stream from a cloud not yet upgraded."""
    events = v1_read()
    header = events[0]
    assert isinstance(header, PackageHeader)
    again = "".join(write_package(header, [e for e in events if isinstance(e, Item)]))
    raw = json.loads(again)
    assert raw["schema_version"] == 2
    assert all(
        "provenance" in v and "verification" in v for r in raw["records"] for v in r["versions"]
    )
    assert list(read_package(again.splitlines())) == events
    jsonschema_rs = pytest.importorskip("jsonschema_rs")
    assert jsonschema_rs.validator_for(json.loads(V2_SCHEMA.read_text())).is_valid(raw)


def test_a_v1_record_version_with_the_fields_of_2_is_not_version_1() -> None:
    raw = json.loads(v1_text())
    version = raw["records"][0]["versions"][0]
    version["provenance"] = {"producer": "user"}
    with pytest.raises(PackageError, match="version 1 does not have"):
        upgrade_package(raw)
    lines = v1_text().splitlines()
    lines[2] = json.dumps(raw["records"][0], separators=(",", ":"))
    with pytest.raises(PackageError, match=r"line 3 .*provenance beside its content"):
        list(read_package(lines))


def test_a_bad_v1_record_is_refused_naming_where() -> None:
    lines = v1_text().splitlines()
    raw = json.loads(lines[2])
    raw["versions"][0]["content"]["text"] = ""
    lines[2] = json.dumps(raw)
    with pytest.raises(PackageError, match=r"line 3 .*versions\.0\.content\.text"):
        list(read_package(lines))


# --- version 2 says it, always -----------------------------------------------------------


def _v2_raw() -> dict[str, Any]:
    return json.loads(
        package_text(records=[record(1, {"text": "I live in Oslo.", "source_episode_ids": [eid(1)],
                                         "conversation_id": "c1", "said_at": NOW.isoformat()})])
    )  # fmt: skip


def test_a_v2_package_without_a_version_s_provenance_is_refused() -> None:
    for name in ("provenance", "verification"):
        raw = _v2_raw()
        del raw["records"][0]["versions"][0][name]
        with pytest.raises(ValidationError, match=name):
            ExportPackage.model_validate(raw)
        text = package_text(records=[record(1, {"text": "x", "source_episode_ids": [eid(1)]})])
        lines = text.splitlines()
        item = json.loads(lines[2])
        del item["versions"][0][name]
        lines[2] = json.dumps(item)
        with pytest.raises(PackageError, match=rf"line 3 .*versions\.0\.{name}"):
            list(read_package(lines))


def test_a_version_s_statement_must_agree_with_its_content() -> None:
    said = RecordContent(
        text="I live in Oslo.", source_episode_ids=[eid(1)],
        provenance=Provenance(producer=Producer.SOURCE, medium="web_page"),
    )  # fmt: skip
    with pytest.raises(ValidationError, match="differs from the one its content holds"):
        ExportedVersion(
            version=1, recorded_at=NOW, content=said,
            provenance=Provenance(producer=Producer.USER), verification=None,
        )  # fmt: skip
    with pytest.raises(ValidationError, match="said, not verified, but has a verification"):
        ExportedVersion(
            version=1, recorded_at=NOW, content=said, provenance=said.provenance,
            verification=Verification(by=VerifiedBy.USER),
        )  # fmt: skip
    confirmed = said.model_copy(update={"epistemic_state": EpistemicState.VERIFIED})
    with pytest.raises(ValidationError, match="does not say who verified it"):
        ExportedVersion(
            version=1, recorded_at=NOW, content=confirmed, provenance=said.provenance,
            verification=None,
        )  # fmt: skip
    stored = confirmed.model_copy(update={"verification": Verification(by=VerifiedBy.SOURCES)})
    with pytest.raises(ValidationError, match="verification differs"):
        ExportedVersion(
            version=1, recorded_at=NOW, content=stored, provenance=said.provenance,
            verification=Verification(by=VerifiedBy.USER),
        )  # fmt: skip
    made = ExportedVersion.of(version=1, recorded_at=NOW, content=stored)
    assert made.provenance == said.provenance and made.verification == stored.verification


# --- the view -----------------------------------------------------------------------------


def view_of_v1() -> str:
    return "".join(render_markdown(read_package(v1_text().splitlines())))


def _record_block(view: str, text: str) -> str:
    start = view.index(f"- **{text}**")
    end = view.find("\n- ", start + 1)
    return view[start : end if end >= 0 else None]


def test_the_view_says_who_wrote_and_who_verified_each_record() -> None:
    view = view_of_v1()
    oslo = _record_block(view, "I live in Oslo\\.")
    assert "Provenance: you wrote this in conversation `c1` on 2025-12-28" in oslo
    assert "verification: not verified" in oslo
    assert "I live in Bergen\\. (provenance: you wrote this" in oslo  # the older version
    ana = _record_block(view, "My sister is called Ana\\.")
    assert "you wrote this" in ana and "verification: you confirmed it" in ana
    bank = _record_block(view, "The bank's support line is 0800 123\\.")
    assert "Provenance: from a web page (pay\\.example), seen on 2025-12-23" in bank
    assert (
        "corroborated by independent sources (bank\\.example, pay\\.example) on 2025-12-28, "
        "not confirmed by you"
    ) in bank
    assert "you wrote" not in bank and "you confirmed" not in bank
    fees = _record_block(view, "Card fees are 2% abroad\\.")
    assert "from a web page (pay\\.example)" in fees and "you wrote" not in fees
    guess = _record_block(view, "Probably works from home on Fridays\\.")
    assert "Provenance: inferred by the assistant;" in guess and "you wrote" not in guess
    old = _record_block(view, "I once lived in Tromsø\\.")
    assert "Provenance: imported from import:exp\\_0011223344556677" in old
    rule = _record_block(view, "Suggest the window seat when booking a flight\\.")
    assert "inferred by the assistant from your behaviour" in rule
    # the user's own sentences only: Oslo (both versions), coffee, Ana, insulin
    assert view.count("you wrote this") == 5


def test_the_view_s_words_for_each_producer_and_verifier() -> None:
    at = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
    assert produced(Provenance(producer=Producer.USER, at=at)) == "you wrote this on 2026-01-05"
    assert (
        produced(Provenance(producer=Producer.SOURCE, medium="email", reference="ana@bank.example"))
        == "from an email (ana@bank\\.example)"
    )
    hostile = Provenance(producer=Producer.SOURCE, medium="web_page", reference="[x](javascript:1)")
    assert "[" not in produced(hostile).replace("\\[", "")
    assert produced(Provenance(producer=Producer.IMPORT, reference="notes.txt")) == (
        "imported from notes\\.txt"
    )
    assert produced(Provenance(producer=Producer.IMPORT)) == "imported"
    assert produced(Provenance(producer=Producer.ASSISTANT, at=at)) == "inferred by the assistant"
    assert verified(None) == "not verified"
    assert verified(Verification(by=VerifiedBy.USER, at=at)) == "you confirmed it on 2026-01-05"
    assert verified(Verification(by=VerifiedBy.USER)) == "you confirmed it"
    assert verified(Verification(by=VerifiedBy.SOURCES, sources=["a.example", "b.example"])) == (
        "corroborated by independent sources (a\\.example, b\\.example), not confirmed by you"
    )


# --- importing ----------------------------------------------------------------------------


def test_an_import_of_the_user_s_own_words_is_an_import_not_their_words() -> None:
    """In the exported space rec 1 and rec 2 were the user's typed sentences; imported,
    they are the import's words, candidates "imported, not verified"."""
    package = ExportPackage.model_validate(upgrade_package(json.loads(v1_text())))
    exported = {r.id: r for r in package.all_records()}
    assert is_users_words(exported[rid(2)].current.content)
    plan = plan_import(package, now=NOW, new_id=ids())
    assert len(plan.records) == 9
    ledger = Ledger()
    for index, op in enumerate(operations(plan, new_id=ids(), at=NOW)):
        ledger, receipt = step(ledger, op, index, NOW)
        assert receipt.status is ReceiptStatus.APPLIED, receipt.reason
    for planned in plan.records:
        content = ledger.records[planned.record_id].content
        assert content is not None
        assert content.source_kind is SourceKind.IMPORT
        assert content.provenance is not None
        assert content.provenance.producer is Producer.IMPORT
        assert content.provenance.reference == f"import:{package.export_id}"
        assert not is_users_words(content)
        assert verification_of(content) is None
        assert "you wrote" not in produced(provenance_of(content))


def test_a_v2_package_s_stated_provenance_cannot_make_an_import_the_user_s_words() -> None:
    raw = _v2_raw()
    version = raw["records"][0]["versions"][0]
    assert version["provenance"]["producer"] == "user"
    package = ExportPackage.model_validate(raw)
    plan = plan_import(package, now=NOW, new_id=ids())
    (planned,) = plan.records
    assert planned.content.provenance is None  # the rules establish it: an import
    ledger = Ledger()
    for index, op in enumerate(operations(plan, new_id=ids(), at=NOW)):
        ledger, _receipt = step(ledger, op, index, NOW)
    content = ledger.records[planned.record_id].content
    assert content is not None and provenance_of(content).producer is Producer.IMPORT
    assert not is_users_words(content)


def test_every_section_of_records_is_upgraded() -> None:
    raw = json.loads(v1_text())
    up = upgrade_package(raw)
    for section in (Section.RECORDS, Section.BEHAVIOUR_RULES):
        assert all("provenance" in v for r in up[section.value] for v in r["versions"])
    assert all("provenance" in v for r in up["sensitive"]["records"] for v in r["versions"])
    assert raw["records"][0]["versions"][0].keys() == {
        "version", "supersedes", "recorded_at", "content",
    }  # fmt: skip  # the input is not changed
    assert up["schema_version"] == 2 and raw["schema_version"] == 1
