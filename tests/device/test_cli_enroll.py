"""Issue 23 item 3: enrollment a new user can retry, an account key set later, and an
export folder made when missing (``memsync device …`` in-process, the fake cloud at the
device's transport seam)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from device import cli
from device.agent import DeviceAgent
from protocol.messages import DeviceStatus, ForgetStatus, PendingDevice
from tests.device.conftest import PASSPHRASE, TickingClock, seeded
from tests.device.fake_cloud import FakeCloud

ACCOUNT = "account words for the new user"


@pytest.fixture
def cloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCloud:
    fake = FakeCloud()

    def create(args: argparse.Namespace, passphrase: str) -> DeviceAgent:
        return DeviceAgent.create(
            Path(args.dir),
            passphrase,
            device_name=args.name,
            cloud_url="https://cloud.test",
            transport=fake.transport,
            clock=TickingClock(),
            random_bytes=seeded(1),
        )

    def open_(args: argparse.Namespace) -> DeviceAgent:
        return DeviceAgent.open(
            Path(args.dir), cli._passphrase(), transport=fake.transport, clock=TickingClock()
        )

    monkeypatch.setattr(cli, "_create", create)
    monkeypatch.setattr(cli, "_open", open_)
    monkeypatch.setenv("MEMSYNC_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMSYNC_DEVICE_DIR", str(tmp_path / "dev"))
    monkeypatch.delenv("MEMSYNC_ACCOUNT_PASSPHRASE", raising=False)
    return fake


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["device", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_refused_code_leaves_no_database_and_the_right_code_then_works(
    cloud: FakeCloud, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "init", "--name", "phone", "--code", "wrongcode")
    assert code == 2 and out == ""
    assert "enrollment code unknown" in err and "no device was created" in err
    assert not any((tmp_path / "dev").glob("device.db*"))
    code, out, err = run(capsys, "init", "--name", "phone", "--code", cloud.new_code())
    assert code == 0, err
    assert "enrolled as dev_" in out
    assert "memsync device account-key set" in out  # no passphrase given: how to set it


def test_enroll_after_init_and_retry_after_a_refusal(
    cloud: FakeCloud, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "init", "--name", "phone")[0] == 0
    code, _, err = run(capsys, "enroll", "--code", "wrongcode")
    assert code == 2 and "enrollment code unknown" in err
    code, out, err = run(capsys, "enroll", "--code", cloud.new_code(), "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["device_id"].startswith("dev_") and answer["account_key_set"] is False


def test_the_account_key_can_be_set_after_enrollment(
    cloud: FakeCloud, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run(capsys, "init", "--name", "phone", "--code", cloud.new_code())
    monkeypatch.setenv("MEMSYNC_ACCOUNT_PASSPHRASE", ACCOUNT)
    code, out, err = run(capsys, "account-key", "set")
    assert code == 0, err
    assert "Account key set for space sp_" in out
    assert cloud.ledger.account_key is not None
    code, out, _ = run(capsys, "account-key", "set")
    assert code == 0 and "matches the account key already set" in out
    monkeypatch.setenv("MEMSYNC_ACCOUNT_PASSPHRASE", "other words")
    code, _, err = run(capsys, "account-key", "set")
    assert code == 2 and "wrong" in err


def test_export_makes_its_folder(
    cloud: FakeCloud,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run(capsys, "init", "--name", "phone", "--code", cloud.new_code())
    monkeypatch.setenv("MEMSYNC_ACCOUNT_PASSPHRASE", ACCOUNT)
    out_dir = tmp_path / "not" / "there"
    code, _, err = run(capsys, "export", "--out", str(out_dir))
    assert out_dir.is_dir()
    assert "does not exist" not in err  # refused later, for the account key, not the folder
    assert code == 2 and "no account key is set" in err and "account-key set" in err


# --- issue 23 item 4: the forget prompt shows the words; pending forgets ------------------


def _status(device_id: str, name: str, **extra: object) -> DeviceStatus:
    return DeviceStatus(
        device_id=device_id, name=name, enrolled_at=datetime(2026, 1, 1, tzinfo=UTC), **extra
    )


def test_the_forget_prompt_shows_the_words_and_the_other_devices(
    cloud: FakeCloud,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run(capsys, "init", "--name", "phone", "--code", cloud.new_code())
    run(capsys, "say", "My friend Kalomi lives in Lima.", "--conversation", "c1")
    _, out, _ = run(
        capsys, "remember", "My friend Kalomi lives in Lima.", "--conversation", "c1", "--json"
    )
    record = json.loads(out)["record_id"]

    def devices(agent: DeviceAgent) -> list[DeviceStatus]:
        return [
            _status(str(agent.device_id), "phone"),
            _status("dev_" + "b" * 26, "laptop"),
            _status("dev_" + "c" * 26, "old tablet", revoked_at=datetime(2026, 2, 1, tzinfo=UTC)),
        ]

    monkeypatch.setattr(DeviceAgent, "devices", devices)
    monkeypatch.setattr("builtins.input", lambda prompt: "no")
    code, out, err = run(capsys, "forget", record, "--permanent")
    assert code == 2 and "not confirmed" in err
    assert "'My friend Kalomi lives in Lima.'" in out
    assert "laptop" in out and "old tablet" not in out
    code, out, _ = run(capsys, "list")
    assert "Kalomi" in out  # nothing was changed by the refusal


def test_a_forget_offers_the_records_with_the_same_words(
    cloud: FakeCloud, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run(capsys, "init", "--name", "phone", "--code", cloud.new_code())
    monkeypatch.setattr(DeviceAgent, "devices", lambda agent: [])
    ids = []
    for n, text in enumerate(("I was born in Lima.", "i was born in lima", "I like Lima.")):
        run(capsys, "say", text, "--conversation", f"c{n}")
        _, out, _ = run(capsys, "remember", text, "--conversation", f"c{n}", "--json")
        ids.append(json.loads(out)["record_id"])
    answers = iter(["yes", "no"])  # forget this one; keep its twin
    monkeypatch.setattr("builtins.input", lambda prompt: next(answers))
    code, out, _ = run(capsys, "forget", ids[0], "--permanent")
    assert code == 0 and "1 other record(s) hold the same words" in out
    assert ids[1] in out and ids[2] not in out
    assert f"Kept 1 record(s) with the same words: {ids[1]}" in out
    _, out, _ = run(capsys, "list")
    assert "i was born in lima" in out
    code, out, _ = run(capsys, "forget", ids[1], "--permanent", "--yes", "--same-words")
    assert code == 0
    _, out, _ = run(capsys, "list")
    assert "born in" not in out.casefold() and "I like Lima." in out


def test_pending_names_the_devices_still_holding_keys(
    cloud: FakeCloud, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run(capsys, "init", "--name", "phone", "--code", cloud.new_code())
    forgotten = ForgetStatus(
        record_id="rec_" + "a" * 26,
        forgotten_at=datetime(2026, 3, 1, 9, 30, tzinfo=UTC),
        pending=[PendingDevice(device_id="dev_" + "b" * 26, device_name="laptop")],
    )
    monkeypatch.setattr(DeviceAgent, "pending_forgets", lambda agent: [forgotten])
    code, out, _ = run(capsys, "pending")
    assert code == 0 and "rec_aaaa" in out and "still on laptop" in out
    code, out, _ = run(capsys, "pending", "--json")
    assert json.loads(out)[0]["pending"][0]["device_name"] == "laptop"
    monkeypatch.setattr(DeviceAgent, "pending_forgets", lambda agent: [])
    code, out, _ = run(capsys, "pending")
    assert "No forget is pending" in out


def test_the_revocation_message_names_a_way_forward(
    cloud: FakeCloud, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "init", "--name", "phone", "--code", cloud.new_code())
    agent = DeviceAgent.open(tmp_path / "dev", PASSPHRASE, transport=cloud.transport)
    with agent:
        message = str(agent._revoked(3, confirmed=True))
    assert "enroll it again" not in message  # a revoked device cannot enroll again
    assert "memsync cloud add-device" in message and "memsync device init" in message


def test_a_malformed_id_is_described_in_words_not_a_regex(
    cloud: FakeCloud, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "init", "--name", "phone")
    code, _, err = run(capsys, "forget", "rec_bad", "--permanent", "--yes")
    assert code == 2
    assert "'rec_bad' is not a well-formed id" in err and "'rec_' followed by" in err
    assert "pattern" not in err and "^" not in err
