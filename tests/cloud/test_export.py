"""The cloud's export (issue 7), on SQLite and PostgreSQL: the package field by field,
its sealing to the asking device, strong authentication, one export per id, and the
same package in every region."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from nacl.public import SealedBox
from nacl.signing import SigningKey
from sqlalchemy import text

from cloud.config import CloudConfig
from cloud.errors import ExportIdUsed, StrongAuthRequired, Unauthorized
from cloud.export import PackageBuilder
from cloud.service import CloudService
from protocol.export.layout import Item, lines_of, read_package
from protocol.export.package import (
    ExportedRecord,
    ExportPackage,
    PackageHeader,
    Section,
    Totals,
)
from protocol.export.schema import package_schema
from protocol.export.stream import StreamAborted, open_stream
from protocol.export.view import render_markdown
from protocol.messages import AccountKeyRequest, AckRequest, ExportRequest, KeyDestruction
from protocol.model import Layer, LifecycleState, Sensitivity, SourceKind
from protocol.provenance import provenance_of, verification_of
from protocol.strongauth import prove_export
from tests.cloud.conftest import (
    SENTENCE,
    START,
    TYPED,
    Device,
    Ops,
    applied,
    new_user,
    pull_all,
    push,
)

ACCOUNT = SigningKey(bytes(range(1, 33)))
SICK = "I have asthma since I was a child."
RULE = "Keep your answers short."
RULE_CANDIDATE = "Answer me in a friendly tone."
GONE = "My old locker code is hidden in the garage."
CALENDAR = "Dentist appointment on Friday morning."


@dataclass
class Space:
    phone: Device
    laptop: Device
    code: str  # an enrollment code never used


def make_space(service: CloudService, ops: Ops) -> Space:
    """A space with every kind of thing an export holds (see the asserts below)."""
    phone, laptop = new_user(service, "ada", "phone", "laptop")
    code = service.new_enrollment_code(phone.space_id)
    service.register_account_key(
        phone.space_id, phone.device_id, AccountKeyRequest(account_key=bytes(ACCOUNT.verify_key))
    )
    connected = ops.episode("ep_aaaaaaaa03", CALENDAR)
    connected |= {"source_kind": "connected_source", "source_id": "calendar"}
    applied(
        push(
            service,
            phone,
            ops.episode("ep_aaaaaaaa01", TYPED),
            ops.episode("ep_aaaaaaaa02", SICK, "conv-2"),
            connected,
            ops.episode("ep_aaaaaaaa04", f"{RULE} {RULE_CANDIDATE}", "conv-4"),
            ops.episode("ep_aaaaaaaa05", GONE, "conv-5"),
            ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
            ops.correct("rec_aaaaaaaa01", "I drink tea every morning.", ["ep_aaaaaaaa01"]),
            ops.remember("rec_aaaaaaaa02", SICK, ["ep_aaaaaaaa02"], "conv-2", sensitivity="health"),
            ops.infer(
                "rec_aaaaaaaa03",
                by="user",
                text=RULE,
                layer="behaviour_rule",
                source_episode_ids=["ep_aaaaaaaa04"],
            ),
            ops.simple("confirm", "rec_aaaaaaaa03"),
            ops.infer(
                "rec_aaaaaaaa04",
                by="user",
                text=RULE_CANDIDATE,
                layer="behaviour_rule",
                source_episode_ids=["ep_aaaaaaaa04"],
            ),
            ops.remember("rec_aaaaaaaa05", GONE, ["ep_aaaaaaaa05"], "conv-5"),
            ops.project("garden"),
        )
    )
    applied(push(service, phone, ops.forget("rec_aaaaaaaa05")))
    destroyed = [c.event_id for c in pull_all(service, phone) if isinstance(c, KeyDestruction)]
    service.ack(phone.space_id, phone.device_id, AckRequest(event_ids=destroyed))
    return Space(phone, laptop, code)


def request(
    space_id: str, export_id: str, include_sensitive: bool = True, key: SigningKey = ACCOUNT
) -> ExportRequest:
    proof = prove_export(key, space_id, export_id, include_sensitive)
    return ExportRequest(export_id=export_id, include_sensitive=include_sensitive, proof=proof)


def export_text(service: CloudService, device: Device, req: ExportRequest) -> str:
    """Start the export and open its sealed stream with the device's private key."""
    frames = service.export(device.space_id, device.device_id, req)
    plain = open_stream(frames, req.export_id, SealedBox(device.key).decrypt)
    return b"".join(plain).decode("utf-8")


def read(package: str) -> tuple[PackageHeader, list[Item], Totals]:
    events = list(read_package(lines_of([package.encode()])))
    header, *items, totals = events
    assert isinstance(header, PackageHeader) and isinstance(totals, Totals)
    assert all(isinstance(i, Item) for i in items)
    return header, [i for i in items if isinstance(i, Item)], totals


def export_row(service: CloudService, space_id: str, export_id: str) -> Any:
    with service.store.session() as s:
        return s.export(space_id, export_id)


# --- the package, field by field ---------------------------------------------------------


def test_the_package_holds_every_section_field_by_field(service: CloudService, ops: Ops) -> None:
    space = make_space(service, ops)
    sp = space.phone.space_id
    package_text = export_text(service, space.phone, request(sp, "exp_aaaaaaaa01"))
    package = ExportPackage.model_validate_json(package_text)
    header, items, totals = read(package_text)
    assert header.export_id == "exp_aaaaaaaa01" and header.space_id == sp
    assert header.exported_at == START and header.includes_sensitive
    assert package.schema_version == 2 and package.format == "memsync-export"

    # records: the whole chain, opened, with the record's state
    (corrected, candidate_rule) = package.records
    assert corrected.id == "rec_aaaaaaaa01" and corrected.current_version == 2
    assert [v.content.text for v in corrected.versions] == [SENTENCE, "I drink tea every morning."]
    assert [v.supersedes for v in corrected.versions] == [None, 1]
    assert corrected.lifecycle_state is LifecycleState.ACTIVE and corrected.created_at == START
    assert corrected.versions[0].content.source_episode_ids == ["ep_aaaaaaaa01"]
    # schema 2: each version says who produced its words and who verified it
    raw = json.loads(package_text)
    assert all(
        {"provenance", "verification"} <= v.keys()
        for section in (raw["records"], raw["behaviour_rules"], raw["sensitive"]["records"])
        for r in section
        for v in r["versions"]
    )
    for r in package.all_records():
        for v in r.versions:
            assert v.provenance == provenance_of(v.content)
            assert v.verification == verification_of(v.content)
    # a behaviour rule the user has not accepted is a record like any other
    assert candidate_rule.id == "rec_aaaaaaaa04"
    assert candidate_rule.lifecycle_state is LifecycleState.CANDIDATE
    assert candidate_rule.current.content.layer is Layer.BEHAVIOUR_RULE
    # accepted behaviour rules, apart
    (rule,) = package.behaviour_rules
    assert rule.id == "rec_aaaaaaaa03" and rule.lifecycle_state is LifecycleState.ACTIVE
    assert rule.current.content.text == RULE and len(rule.versions) == 2
    # the forgotten record: its skeleton and nothing else, and its episode is gone
    (skeleton,) = package.skeletons
    assert skeleton.id == "rec_aaaaaaaa05" and skeleton.forgotten_at == START
    assert skeleton.lifecycle_state is LifecycleState.FORGOTTEN
    assert GONE not in package_text and "ep_aaaaaaaa05" not in package_text
    # episodes: every one not forgotten, but not the sensitive record's source
    assert [e.id for e in package.episodes] == ["ep_aaaaaaaa01", "ep_aaaaaaaa03", "ep_aaaaaaaa04"]
    first = package.episodes[0]
    assert (first.text, first.conversation_id, first.typed_at) == (TYPED, "conv-1", START)
    assert first.source_kind is SourceKind.USER_STATEMENT
    # projects, connected accounts (derived from the episodes), devices, no tasks
    assert [(p.name, p.open, p.updated_at) for p in package.projects] == [("garden", True, START)]
    (calendar,) = package.connected_accounts
    assert calendar.source_id == "calendar" and calendar.capabilities == ["read"]
    assert (calendar.first_episode_at, calendar.latest_episode_at, calendar.episodes) == (
        START,
        START,
        1,
    )
    devices = {d.device_id: d for d in package.devices}
    assert set(devices) == {space.phone.device_id, space.laptop.device_id}
    assert devices[space.phone.device_id].name == "phone"
    assert devices[space.phone.device_id].enrolled_at == START
    assert all(d.revoked_at is None for d in devices.values())
    assert package.tasks == []
    # the sensitive section: the record and the episode it came from
    assert package.sensitive is not None
    (sick,) = package.sensitive.records
    assert sick.id == "rec_aaaaaaaa02" and sick.sensitive
    assert sick.current.content.sensitivity is Sensitivity.HEALTH
    assert [e.id for e in package.sensitive.episodes] == ["ep_aaaaaaaa02"]
    # totals close it, and say what was read
    assert totals == package.totals
    assert (totals.records, totals.behaviour_rules, totals.skeletons, totals.episodes) == (
        2,
        1,
        1,
        3,
    )
    assert [i.section for i in items].count(Section.SENSITIVE_RECORDS) == 1
    # the audit log: who exported what, and how it ended
    row = export_row(service, sp, "exp_aaaaaaaa01")
    assert row.device_id == space.phone.device_id and row.include_sensitive
    assert row.outcome == "complete" and row.finished_at == START
    # and the human-readable view shows it
    view = "".join(render_markdown(read_package(lines_of([package_text.encode()]))))
    assert "Accepted behaviour rules" in view and "rec_aaaaaaaa05" in view


def test_the_sensitive_section_can_be_left_out(service: CloudService, ops: Ops) -> None:
    space = make_space(service, ops)
    sp = space.phone.space_id
    package_text = export_text(service, space.phone, request(sp, "exp_aaaaaaaa02", False))
    package = ExportPackage.model_validate_json(package_text)
    assert not package.includes_sensitive and package.sensitive is None
    assert package.totals.of(Section.SENSITIVE_RECORDS) == 0
    for gone in ("rec_aaaaaaaa02", "ep_aaaaaaaa02", "asthma"):
        assert gone not in package_text
    assert [r.id for r in package.all_records()] == [
        "rec_aaaaaaaa01",
        "rec_aaaaaaaa04",
        "rec_aaaaaaaa03",
    ]
    assert not export_row(service, sp, "exp_aaaaaaaa02").include_sensitive


def test_the_package_holds_no_secret(service: CloudService, ops: Ops) -> None:
    space = make_space(service, ops)
    sp = space.phone.space_id
    package_text = export_text(service, space.phone, request(sp, "exp_aaaaaaaa03"))
    secrets: dict[str, bytes | str] = {
        "phone credential": space.phone.credential,
        "laptop credential": space.laptop.credential,
        "credential hash": hashlib.sha256(space.phone.credential.encode()).hexdigest(),
        "phone public key": bytes(space.phone.key.public_key),
        "laptop public key": bytes(space.laptop.key.public_key),
        "account key": bytes(ACCOUNT.verify_key),
        "enrollment code": space.code,
    }
    with service.store.session() as s:
        key_ids = [r[0] for r in s.conn.execute(text("SELECT key_id FROM record_versions"))]
        key_ids += [r[0] for r in s.conn.execute(text("SELECT key_id FROM episodes"))]
    for key_id in key_ids:
        dek = service.key_store.data_key(sp, key_id)
        if dek is not None:
            secrets[f"data key {key_id}"] = dek
    assert len(secrets) > 10
    for name, secret in secrets.items():
        forms = [secret] if isinstance(secret, str) else []
        if isinstance(secret, bytes):
            b64 = base64.b64encode(secret).decode()
            forms += [secret.hex(), b64, b64.rstrip("="), base64.urlsafe_b64encode(secret).decode()]
            forms += [secret.decode("latin-1")]
        for form in forms:
            assert form not in package_text, name
    # key ids are not secrets, but the package has no use for them either
    assert not any(k in package_text for k in key_ids)


def test_the_committed_json_schema_accepts_the_package(service: CloudService, ops: Ops) -> None:
    jsonschema_rs = pytest.importorskip("jsonschema_rs")
    space = make_space(service, ops)
    sp = space.phone.space_id
    for n, sensitive in enumerate((True, False)):
        package_text = export_text(
            service, space.phone, request(sp, f"exp_aaaaaaaa1{n}", sensitive)
        )
        validator = jsonschema_rs.validator_for(package_schema())
        validator.validate(json.loads(package_text))


# --- pages, snapshots, regions --------------------------------------------------------------


def _header(space_id: str, export_id: str = "exp_aaaaaaaa20") -> PackageHeader:
    return PackageHeader(
        export_id=export_id, exported_at=START, space_id=space_id, includes_sensitive=True
    )


def test_pages_of_any_size_make_the_same_package(service: CloudService, ops: Ops) -> None:
    space = make_space(service, ops)
    header = _header(space.phone.space_id)
    whole = "".join(service.package(header))
    with service.store.snapshot() as s:
        paged = "".join(PackageBuilder(s, service.vault, header.space_id, page=1).lines(header))
    assert paged == whole


def test_the_package_is_the_same_in_every_region(config: CloudConfig, ops: Ops) -> None:
    east = CloudService(replace(config, region="eu-east"))
    west = CloudService(replace(config, region="us-west"))
    try:
        space = make_space(east, ops)
        header = _header(space.phone.space_id)
        assert "".join(east.package(header)) == "".join(west.package(header))
    finally:
        east.close()
        west.close()


def _many(ops: Ops, first: int, n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(first, first + n):
        words = f"I planted row number {i} of the long garden with blue flowers."
        out.append(ops.episode(f"ep_bbbbbbbb{i:04d}", words, f"c{i}"))
        out.append(ops.remember(f"rec_bbbbbbbb{i:04d}", words, [f"ep_bbbbbbbb{i:04d}"], f"c{i}"))
    return out


def test_a_package_is_one_snapshot_while_writes_go_on(service: CloudService, ops: Ops) -> None:
    space = make_space(service, ops)
    sp = space.phone.space_id
    applied(push(service, space.phone, *_many(ops, 0, 200)))
    frames = service.export(sp, space.phone.device_id, request(sp, "exp_aaaaaaaa21"))
    head, first = next(frames), next(frames)  # the first chunk read: the snapshot is taken
    # another device keeps writing while the package streams; the push is not blocked
    applied(
        push(service, space.laptop, *_many(ops, 200, 3), ops.simple("dont_use", "rec_aaaaaaaa01"))
    )
    plain = open_stream(
        [head, first, *frames], "exp_aaaaaaaa21", SealedBox(space.phone.key).decrypt
    )
    package = ExportPackage.model_validate_json(b"".join(plain))
    ids = {r.id for r in package.all_records()}
    assert len(package.records) == 202 and "rec_bbbbbbbb0200" not in ids
    assert package.records[0].id == "rec_aaaaaaaa01"
    assert package.records[0].lifecycle_state is LifecycleState.ACTIVE  # as of the start
    assert export_row(service, sp, "exp_aaaaaaaa21").outcome == "complete"


def test_a_forget_during_the_export_stops_it_with_the_reason(
    service: CloudService, ops: Ops
) -> None:
    space = make_space(service, ops)
    sp = space.phone.space_id
    applied(push(service, space.phone, *_many(ops, 0, 200)))
    frames = service.export(sp, space.phone.device_id, request(sp, "exp_aaaaaaaa23"))
    head, first = next(frames), next(frames)
    applied(push(service, space.laptop, ops.forget("rec_bbbbbbbb0150")))  # keys destroyed
    with pytest.raises(StreamAborted, match="bbbbbbbb0150: it was forgotten after the export"):
        b"".join(
            open_stream(
                [head, first, *frames], "exp_aaaaaaaa23", SealedBox(space.phone.key).decrypt
            )
        )
    outcome = export_row(service, sp, "exp_aaaaaaaa23").outcome
    assert outcome.startswith("failed: episode ep_bbbbbbbb0150: it was forgotten")


def test_a_stream_closed_early_is_logged_abandoned_and_releases_the_store(
    service: CloudService, ops: Ops
) -> None:
    space = make_space(service, ops)
    sp = space.phone.space_id
    applied(push(service, space.phone, *_many(ops, 0, 200)))
    frames = service.export(sp, space.phone.device_id, request(sp, "exp_aaaaaaaa22"))
    assert export_row(service, sp, "exp_aaaaaaaa22").outcome == "streaming"
    next(frames), next(frames)  # inside the snapshot, a chunk out
    assert isinstance(frames, Iterator)
    frames.close()  # type: ignore[attr-defined]  # what the app does when the client goes
    row = export_row(service, sp, "exp_aaaaaaaa22")
    assert row.outcome == "abandoned" and row.finished_at == START
    assert service.store.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    applied(push(service, space.phone, *_many(ops, 200, 1)))


# --- refusals: strong authentication, one export per id ----------------------------------


def test_an_export_needs_the_account_keys_proof(service: CloudService, ops: Ops) -> None:
    alone, *_ = new_user(service, "bob", "phone")
    with pytest.raises(StrongAuthRequired, match="has no account key registered"):
        service.export(alone.space_id, alone.device_id, request(alone.space_id, "exp_aaaaaaaa30"))
    space = make_space(service, ops)
    sp, phone = space.phone.space_id, space.phone
    other = SigningKey(bytes(32))
    with pytest.raises(StrongAuthRequired, match="exp_aaaaaaaa31: the proof does not verify"):
        service.export(sp, phone.device_id, request(sp, "exp_aaaaaaaa31", key=other))
    # a proof for a package without the sensitive classes cannot start one with them
    without = request(sp, "exp_aaaaaaaa31", include_sensitive=False)
    widened = ExportRequest(export_id="exp_aaaaaaaa31", include_sensitive=True, proof=without.proof)
    with pytest.raises(StrongAuthRequired, match="with the sensitive classes"):
        service.export(sp, phone.device_id, widened)
    # a proof made for another space does not verify either
    with pytest.raises(StrongAuthRequired, match="does not verify"):
        service.export(sp, phone.device_id, request(alone.space_id, "exp_aaaaaaaa31"))
    # refusals change nothing: the id was not used up, and the right proof starts it
    assert export_row(service, sp, "exp_aaaaaaaa31") is None
    assert export_text(service, phone, request(sp, "exp_aaaaaaaa31", False))
    # a device of another space cannot export this one (the credential decides the space)
    with pytest.raises(Unauthorized, match="not enrolled in this space"):
        service.export(sp, alone.device_id, request(sp, "exp_aaaaaaaa32"))


def test_an_export_id_starts_one_export_only(service: CloudService, ops: Ops) -> None:
    space = make_space(service, ops)
    sp, phone = space.phone.space_id, space.phone
    export_text(service, phone, request(sp, "exp_aaaaaaaa40"))
    with pytest.raises(ExportIdUsed, match="export id exp_aaaaaaaa40 already started an export"):
        service.export(sp, phone.device_id, request(sp, "exp_aaaaaaaa40"))
    with pytest.raises(ExportIdUsed):  # from another device of the space too
        service.export(sp, space.laptop.device_id, request(sp, "exp_aaaaaaaa40"))
    assert export_row(service, sp, "exp_aaaaaaaa40").device_id == phone.device_id


def test_the_records_section_never_holds_a_rule_or_a_sensitive_record(
    service: CloudService, ops: Ops
) -> None:
    space = make_space(service, ops)
    package = ExportPackage.model_validate_json(
        "".join(service.package(_header(space.phone.space_id)))
    )
    for record in package.records:
        assert isinstance(record, ExportedRecord) and not record.sensitive
        assert not (
            record.lifecycle_state is LifecycleState.ACTIVE
            and record.current.content.layer is Layer.BEHAVIOUR_RULE
        )
