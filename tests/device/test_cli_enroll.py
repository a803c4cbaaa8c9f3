"""Issue 23 item 3: enrollment a new user can retry, an account key set later, and an
export folder made when missing (``memsync device …`` in-process, the fake cloud at the
device's transport seam)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from device import cli
from device.agent import DeviceAgent
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
