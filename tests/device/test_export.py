"""The device's export (``device.export``, ``DeviceAgent.export``) against the real sealed
stream at its transport seam (``tests.device.export_cloud``): the two files are whole
or absent, hold what was sent plus this device's device-only classes, and every
refusal or fault leaves nothing behind."""

from __future__ import annotations

import errno
import os
import random
import stat
import tempfile
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nacl.public import PrivateKey, SealedBox

from device.agent import DeviceAgent
from device.errors import (
    ExportDirectoryInvalid,
    ExportFailed,
    ExportIdUsed,
    ExportUnavailable,
    Offline,
    Refused,
    ServerRefused,
    StrongAuthRequired,
)
from device.export import Expected, ExportResult, receive
from protocol.errors import PackageError
from protocol.export import signing
from protocol.export.layout import Item, lines_of, read_package, write_package
from protocol.export.package import ExportedRecord, PackageHeader, Section, Totals
from protocol.export.stream import StreamSealer
from protocol.export.view import escape
from protocol.messages import ErrorCode
from protocol.model import Episode, Sensitivity, Skeleton
from protocol.version import PROTOCOL_VERSION
from tests.device.conftest import MakeAgent
from tests.device.export_cloud import (
    EXPORTED_AT,
    HOSTILE,
    ExportCloud,
    another_public_key,
    broken_after,
    package_text,
    sample_items,
    sealed_frames,
)
from tests.device.fake_cloud import FakeCloud

ACCOUNT = "account words for export"
INSULIN = "I take insulin every morning."
INSULIN_LATER = "I take insulin every evening."


@pytest.fixture
def exporter(cloud: FakeCloud) -> ExportCloud:
    return ExportCloud(cloud)


@pytest.fixture
def agent(make_agent: MakeAgent, cloud: FakeCloud, exporter: ExportCloud) -> DeviceAgent:
    """An enrolled device with an account key, holding one record of a class it keeps
    only on this device (corrected once: a chain of two versions)."""
    agent = make_agent(cloud=cloud)
    agent.enroll(cloud.new_code(), account_passphrase=ACCOUNT)
    agent.keep_on_device(Sensitivity.HEALTH)
    agent.say(INSULIN, "c1", sensitivity=Sensitivity.HEALTH)
    kept = agent.remember(INSULIN, "c1", sensitivity=Sensitivity.HEALTH)
    agent.say(INSULIN_LATER, "c1", sensitivity=Sensitivity.HEALTH)
    agent.correct(kept.record_id, INSULIN_LATER, "c1")
    return agent


@pytest.fixture
def out(tmp_path: Path) -> Path:
    path = tmp_path / "out"
    path.mkdir()
    return path


def read_file(path: Path) -> list[PackageHeader | Item | Totals]:
    with path.open("rb") as f:
        return list(read_package(lines_of(iter(lambda: f.read(700), b""))))


def items_of(events: list[PackageHeader | Item | Totals]) -> list[Item]:
    return [e for e in events if isinstance(e, Item)]


def _own(item: Item) -> bool:
    """An item this device added (the sample package's ids all start ``*_cloud``)."""
    item_id = str(getattr(item.model, "id", ""))
    return bool(item_id) and not item_id.split("_", 1)[1].startswith("cloud")


def device_only_record(agent: DeviceAgent) -> str:
    [view] = [v for v in agent.what_do_you_know() if v.device_only]
    return view.record_id


def test_export_writes_the_package_and_its_view(
    agent: DeviceAgent, exporter: ExportCloud, out: Path
) -> None:
    result = agent.export(out, ACCOUNT)
    [sent] = exporter.sent
    assert sent.request.include_sensitive and sent.request.export_id == result.export_id
    assert sorted(p.name for p in out.iterdir()) == [
        f"memsync-export-{result.export_id}.json",
        f"memsync-export-{result.export_id}.md",
    ]
    for path in (result.package_path, result.view_path):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600

    events = read_file(result.package_path)
    assert events[0] == sent.header
    got = items_of(events)
    kept_id = device_only_record(agent)
    # the cloud's items, in order, and this device's own after the cloud's sensitive ones
    assert [i for i in got if not _own(i)] == sent.items
    sensitive = [i for i in got if i.section is Section.SENSITIVE_RECORDS]
    assert [i.model.id for i in sensitive] == ["rec_cloudsensitive1", kept_id]  # type: ignore[attr-defined]
    kept = sensitive[-1].model
    assert isinstance(kept, ExportedRecord)
    assert [v.content.text for v in kept.versions] == [INSULIN, INSULIN_LATER]
    assert kept.current_version == 2 and kept.versions[1].supersedes == 1
    assert {v.content.sensitivity for v in kept.versions} == {Sensitivity.HEALTH}
    episodes = [i.model for i in got if i.section is Section.SENSITIVE_EPISODES]
    assert [e.text for e in episodes if isinstance(e, Episode)] == [
        "I have asthma.",
        INSULIN,
        INSULIN_LATER,
    ]
    totals = events[-1]
    assert isinstance(totals, Totals) and totals == result.totals
    assert (totals.sensitive_records, totals.sensitive_episodes, totals.records) == (2, 3, 1)
    assert (result.device_only_records, result.device_only_episodes) == (1, 2)

    view = result.view_path.read_text("utf-8")
    for record in ("I live in Duluth.", HOSTILE, "Always answer in *short* sentences.",
                   "I have asthma.", INSULIN, INSULIN_LATER):  # fmt: skip
        assert escape(record) in view, record
    assert "[now](https://evil.example)" not in view and "<b>" not in view
    assert "Sensitive classes are included" in view and "sensitive.records: 2" in view
    # nothing of the export was written into the memory
    assert agent.pending_ops() == 0


def test_a_forgotten_device_only_record_is_exported_as_its_skeleton(
    agent: DeviceAgent, out: Path
) -> None:
    kept_id = device_only_record(agent)
    agent.forget_permanently(kept_id)
    result = agent.export(out, ACCOUNT)
    got = items_of(read_file(result.package_path))
    assert [i.model for i in got if _own(i)] == [
        Skeleton(id=kept_id, forgotten_at=datetime.fromisoformat(_forgotten_at(agent, kept_id)))
    ]
    assert [i.section for i in got if _own(i)] == [Section.SKELETONS]
    assert got[3].section is Section.SKELETONS and got[3].model.id == kept_id  # type: ignore[attr-defined]
    assert "insulin" not in result.package_path.read_text("utf-8")
    assert (result.device_only_skeletons, result.device_only_records) == (1, 0)


def _forgotten_at(agent: DeviceAgent, record_id: str) -> str:
    [view] = [v for v in agent.what_do_you_know() if v.record_id == record_id]
    assert view.forgotten_at is not None
    return view.forgotten_at


def test_a_device_only_item_the_cloud_sent_is_not_added_twice(
    agent: DeviceAgent, exporter: ExportCloud, out: Path
) -> None:
    kept_id = device_only_record(agent)
    first = agent.export(out, ACCOUNT)
    got = items_of(read_file(first.package_path))
    [mine] = [i for i in got if getattr(i.model, "id", None) == kept_id]
    # a cloud that (somehow) holds it sends it after its own sensitive record
    exporter.items = lambda sensitive: [
        *sample_items(sensitive)[:-1],
        mine,
        sample_items(sensitive)[-1],
    ]
    second = agent.export(out, ACCOUNT)
    ids = [getattr(i.model, "id", None) for i in items_of(read_file(second.package_path))]
    assert ids.count(kept_id) == 1 and second.device_only_records == 0


def test_the_file_is_the_canonical_layout_of_what_was_sent(
    make_agent: MakeAgent, cloud: FakeCloud, exporter: ExportCloud, out: Path
) -> None:
    agent = make_agent(cloud=cloud)  # no device-only class: the file is what was sent
    agent.enroll(cloud.new_code(), account_passphrase=ACCOUNT)
    result = agent.export(out, ACCOUNT)
    # signed (issue 22): the file is what was sent, closed by the account's signature
    parts = signing.split(result.package_path.read_bytes())
    assert parts.body == exporter.sent[0].text and parts.signature is not None
    signing.verify(parts.body, parts.signature)
    assert result.device_only_records == result.device_only_episodes == 0


def test_without_sensitive_leaves_the_device_only_classes_out(
    agent: DeviceAgent, exporter: ExportCloud, out: Path
) -> None:
    result = agent.export(out, ACCOUNT, include_sensitive=False)
    assert exporter.sent[0].request.include_sensitive is False
    events = read_file(result.package_path)
    header = events[0]
    assert isinstance(header, PackageHeader) and not header.includes_sensitive
    assert not any(i.section.value.startswith("sensitive.") for i in items_of(events))
    assert items_of(events) == exporter.sent[0].items
    for path in (result.package_path, result.view_path):
        text = path.read_text("utf-8")
        assert "insulin" not in text and device_only_record(agent) not in text
        assert "asthma" not in text
    assert result.device_only_records == 0
    assert "Sensitive classes were left out" in result.view_path.read_text("utf-8")


def test_a_wrong_or_missing_passphrase_sends_nothing(
    agent: DeviceAgent, make_agent: MakeAgent, cloud: FakeCloud, exporter: ExportCloud, out: Path
) -> None:
    before = len(cloud.requests)
    with pytest.raises(Refused, match="account passphrase is wrong") as caught:
        agent.export(out, "not the account words")
    assert caught.value.code == "strong_auth_required"
    with pytest.raises(Refused, match="empty"):
        agent.export(out, "")
    unregistered = make_agent("laptop", seed=2, cloud=FakeCloud(seed=3))
    with pytest.raises(Refused, match="no account key is set"):
        unregistered.export(out, ACCOUNT)
    assert exporter.export_requests == 0 and len(cloud.requests) == before
    assert list(out.iterdir()) == []


def test_an_output_directory_that_is_not_one_is_refused_first(
    agent: DeviceAgent, exporter: ExportCloud, tmp_path: Path
) -> None:
    with pytest.raises(ExportDirectoryInvalid, match="does not exist"):
        agent.export(tmp_path / "missing", ACCOUNT)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    with pytest.raises(ExportDirectoryInvalid, match="not a directory"):
        agent.export(a_file, "wrong, but the directory is checked first")
    assert exporter.export_requests == 0 and a_file.read_text() == "x"


def _drop_final(frames: list[bytes]) -> list[bytes]:
    return frames[:-1]


def _cut_inside_a_frame(frames: list[bytes]) -> list[bytes]:
    return [*frames[:2], frames[2][:-7]]


def _tamper(frames: list[bytes]) -> list[bytes]:
    body = bytearray(frames[2])
    body[40] ^= 0x01
    return [*frames[:2], bytes(body), *frames[3:]]


def _reorder(frames: list[bytes]) -> list[bytes]:
    return [frames[0], frames[2], frames[1], *frames[3:]]


def _replay(frames: list[bytes]) -> list[bytes]:
    return [*frames[:2], frames[1], *frames[2:]]


def _extra_after_final(frames: list[bytes]) -> list[bytes]:
    return [*frames, frames[1]]


FAULTS: dict[str, tuple[Callable[[ExportCloud], None], str]] = {
    "the final chunk never came": (
        lambda c: setattr(c, "frames_hook", _drop_final),
        "without its final chunk",
    ),
    "cut inside a frame": (
        lambda c: setattr(c, "frames_hook", _cut_inside_a_frame),
        "ends inside a frame",
    ),
    "a tampered chunk": (lambda c: setattr(c, "frames_hook", _tamper), "does not open"),
    "chunks reordered": (lambda c: setattr(c, "frames_hook", _reorder), "does not open"),
    "a chunk replayed": (lambda c: setattr(c, "frames_hook", _replay), "does not open"),
    "frames after the final chunk": (
        lambda c: setattr(c, "frames_hook", _extra_after_final),
        "frames follow the final chunk",
    ),
    "an error chunk": (
        lambda c: setattr(c, "error_after", 2),
        "the record store stopped answering",
    ),
    "sealed for another export": (
        lambda c: setattr(c, "seal_export_id", "exp_someotherexport1"),
        "does not open",
    ),
    "sealed to another device": (
        lambda c: setattr(c, "seal_to", another_public_key()),
        "does not open with this device's key",
    ),
    "the connection broke": (
        lambda c: setattr(c, "frames_hook", broken_after(3)),
        "connection to the cloud .* broke",
    ),
    "a header for another space": (
        lambda c: c.header_fields.update(space_id="sp_someotherspace1"),
        "package is of space sp_someotherspace1",
    ),
    "a header for another export": (
        lambda c: c.header_fields.update(export_id="exp_someotherexport1"),
        "package is for export exp_someotherexport1",
    ),
    "a bad item": (
        lambda c: setattr(
            c,
            "text_hook",
            lambda text: text.replace(b'"id":"rec_cloudrecord1"', b'"id":"not-a-record"', 1),
        ),
        "item 0 of section records is invalid at 'id'",
    ),
    "totals that disagree": (
        lambda c: setattr(
            c,
            "text_hook",
            lambda text: text.replace(b'"totals":{"records":1', b'"totals":{"records":2', 1),
        ),
        "section records holds 1 item.* but the totals say 2",
    ),
    "a section out of order": (
        lambda c: setattr(
            c, "text_hook", lambda text: text.replace(b'"skeletons":[', b'"projects":[', 1)
        ),
        r"""expected '"skeletons":\[', found '"projects":\['""",
    ),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_stream_that_is_not_whole_leaves_no_file(
    fault: str, agent: DeviceAgent, exporter: ExportCloud, out: Path
) -> None:
    arrange, reason = FAULTS[fault]
    arrange(exporter)
    with pytest.raises(ExportFailed, match=reason) as caught:
        agent.export(out, ACCOUNT)
    [sent] = exporter.sent
    assert caught.value.export_id == sent.request.export_id
    assert sent.request.export_id in str(caught.value) and "no file" in str(caught.value)
    assert list(out.iterdir()) == []


@pytest.mark.parametrize(
    ("status", "code", "error"),
    [
        (403, ErrorCode.STRONG_AUTH_REQUIRED, StrongAuthRequired),
        (409, ErrorCode.EXPORT_ID_USED, ExportIdUsed),
        (503, ErrorCode.EXPORT_UNAVAILABLE, ExportUnavailable),
    ],
)
def test_refusals_become_their_own_errors(
    status: int,
    code: ErrorCode,
    error: type[ServerRefused],
    agent: DeviceAgent,
    exporter: ExportCloud,
    out: Path,
) -> None:
    message = f"what the cloud said about {code.value}: the record store is unreachable"
    exporter.refuse = (status, code, message)
    with pytest.raises(error) as caught:
        agent.export(out, ACCOUNT)
    assert isinstance(caught.value, ServerRefused)
    assert (caught.value.status, caught.value.code) == (status, code.value)
    assert message in str(caught.value)
    assert list(out.iterdir()) == []


def test_a_proof_the_cloud_cannot_verify_is_refused_there(
    agent: DeviceAgent, cloud: FakeCloud, exporter: ExportCloud, out: Path
) -> None:
    cloud.ledger.account_key = another_public_key(9)  # the cloud holds another account key
    with pytest.raises(StrongAuthRequired, match="proof does not verify"):
        agent.export(out, ACCOUNT)
    assert exporter.sent == [] and list(out.iterdir()) == []


def test_an_older_cloud_is_spoken_to_in_its_version(
    agent: DeviceAgent, exporter: ExportCloud, out: Path
) -> None:
    exporter.only_version_1 = True
    result = agent.export(out, ACCOUNT)
    assert exporter.versions_seen == [PROTOCOL_VERSION, 1] and agent.protocol_version == 1
    assert result.package_path.exists() and len(exporter.sent) == 1


def test_each_export_has_its_own_id(agent: DeviceAgent, exporter: ExportCloud, out: Path) -> None:
    first = agent.export(out, ACCOUNT)
    second = agent.export(out, ACCOUNT, include_sensitive=False)
    assert first.export_id != second.export_id and len(list(out.iterdir())) == 4


def test_the_cloud_out_of_reach_leaves_no_file(
    agent: DeviceAgent, cloud: FakeCloud, exporter: ExportCloud, out: Path
) -> None:
    cloud.fail_before.append("/v1/export")
    with pytest.raises(Offline, match="cannot reach the cloud"):
        agent.export(out, ACCOUNT)
    assert exporter.export_requests == 1 and list(out.iterdir()) == []


def test_a_full_disk_leaves_no_file(
    agent: DeviceAgent, out: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(ExportFailed, match="writing the files failed: No space left"):
        agent.export(out, ACCOUNT)
    assert list(out.iterdir()) == []


def test_a_partial_package_is_never_readable_as_whole() -> None:
    """Positive control for the reader the files are checked with: a package cut short
    is refused by it, so 'no file' above is the only safe outcome."""
    header = PackageHeader(
        export_id="exp_abcdefghij",
        exported_at=EXPORTED_AT,
        space_id="sp_abcdefghij",
        includes_sensitive=True,
    )
    text = package_text(header, sample_items(True))
    with pytest.raises(PackageError):
        list(read_package(lines_of([text[: len(text) // 2]])))


# --- receiving alone (no passphrase, no HTTP): any prefix of a valid stream ----------

_KEY = PrivateKey(random.Random(21).randbytes(32))
_EXPECTED = Expected("exp_abcdefghij", "sp_abcdefghij", True)
_HEADER = PackageHeader(
    export_id=_EXPECTED.export_id,
    exported_at=EXPORTED_AT,
    space_id=_EXPECTED.space_id,
    includes_sensitive=True,
)
_TEXT = package_text(_HEADER, sample_items(True))
_STREAM = b"".join(
    sealed_frames(_TEXT, _EXPECTED.export_id, bytes(_KEY.public_key), random.Random(22))
)


def _chunks(data: bytes, cuts: list[int]) -> Iterator[bytes]:
    start = 0
    for cut in sorted(set(cuts)):
        yield data[start:cut]
        start = cut
    yield data[start:]


def _receive(data: Iterator[bytes], out: Path) -> ExportResult:
    return receive(data, _EXPECTED, SealedBox(_KEY).decrypt, out, None)


@settings(max_examples=60, deadline=None)
@given(
    cut=st.integers(min_value=0, max_value=len(_STREAM) - 1),
    splits=st.lists(st.integers(min_value=0, max_value=len(_STREAM)), max_size=6),
)
def test_any_prefix_of_a_valid_stream_never_yields_a_file(cut: int, splits: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        prefix = _STREAM[:cut]
        with pytest.raises(ExportFailed, match=_EXPECTED.export_id):
            _receive(_chunks(prefix, [s for s in splits if s <= cut]), out)
        assert list(out.iterdir()) == []


@settings(max_examples=20, deadline=None)
@given(splits=st.lists(st.integers(min_value=0, max_value=len(_STREAM)), max_size=12))
def test_the_whole_stream_in_any_chunking_yields_the_package(splits: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        result = _receive(_chunks(_STREAM, splits), Path(tmp))
        assert result.package_path.read_bytes() == _TEXT
        assert sorted(p.name for p in Path(tmp).iterdir()) == [
            result.package_path.name,
            result.view_path.name,
        ]


def test_receiving_holds_a_few_items_at_a_time() -> None:
    """A package of thousands of records is received in flat memory: the peak traced
    while opening, validating and writing it stays far below the package's size."""
    many = 3000
    template = sample_items(True)[0].model
    assert isinstance(template, ExportedRecord)

    def items() -> Iterator[Item]:
        for n in range(many):
            yield Item(Section.RECORDS, template.model_copy(update={"id": f"rec_many{n:08d}"}))

    def stream() -> Iterator[bytes]:
        sealer = StreamSealer(bytes(32), bytes(16), _EXPECTED.export_id)
        yield sealer.header(SealedBox(_KEY.public_key).encrypt(bytes(32)))
        yield from sealer.seal_all(line.encode() for line in write_package(_HEADER, items()))

    size = sum(len(frame) for frame in stream())
    with tempfile.TemporaryDirectory() as tmp:
        tracemalloc.start()
        try:
            result = _receive(stream(), Path(tmp))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert result.totals.records == many
        assert result.package_path.stat().st_size > 3_000_000 and size > 3_000_000
    assert peak < 1_500_000, f"peak {peak} bytes for a {size}-byte stream"
