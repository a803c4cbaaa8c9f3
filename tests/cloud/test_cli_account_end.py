"""``memsync cloud delete-account``, ``account-status``, ``close``, ``service-status`` and
``enforce-closing`` through argparse, on both stores."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cloud.cli import register
from cloud.config import CloudConfig
from cloud.service import CloudService
from tests.cloud.conftest import MASTER_KEY, FakeClock, Ops, applied, enroll, push


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="memsync")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


@pytest.fixture
def where(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("MEMSYNC_MASTER_KEY", MASTER_KEY.hex())
    return ["--store", store_url, "--keys", str(tmp_path / "cloud" / "keys.db")]


def _service(where: list[str]) -> CloudService:
    return CloudService(CloudConfig(store_url=where[1], key_store_path=Path(where[3])))


def test_delete_account_and_account_status(
    where: list[str], ops: Ops, capsys: pytest.CaptureFixture[str]
) -> None:
    service = _service(where)
    try:
        space_id, code = service.add_user("alice")
        phone = enroll(service, code, "phone")
        laptop = enroll(service, service.new_enrollment_code(space_id), "laptop")
        applied(push(service, phone, ops.episode("ep_aaaaaaaa01", "I like tea.")))
    finally:
        service.close()

    assert _run(["cloud", "account-status", "alice", *where]) == 0
    assert "has not ended" in capsys.readouterr().out
    assert _run(["cloud", "delete-account", "alice", *where]) == 1
    refusal = capsys.readouterr().err
    assert space_id in refusal and "cannot be undone" in refusal and "--yes" in refusal
    assert "2 device(s)" in refusal
    assert _run(["cloud", "account-status", "alice", "--json", *where]) == 0
    assert json.loads(capsys.readouterr().out) == {"space_id": space_id, "ended": False}

    assert _run(["cloud", "delete-account", "alice", "--yes", *where]) == 0
    out = capsys.readouterr().out
    assert "every key of its memory is destroyed" in out
    assert "pending devices: 2" in out and phone.device_id in out and laptop.device_id in out
    # the name is gone with the account; the space id still finds it
    assert _run(["cloud", "account-status", "alice", *where]) == 1
    assert "alice" in capsys.readouterr().err
    assert _run(["cloud", "account-status", space_id, "--json", *where]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["ended"] and shown["reason"] == "deleted" and shown["keys_destroyed_at"]
    assert sorted(d["device_name"] for d in shown["pending"]) == ["laptop", "phone"]

    service = _service(where)
    try:
        service.confirm_wipe(laptop.credential)
    finally:
        service.close()
    assert _run(["cloud", "account-status", space_id, *where]) == 0
    out = capsys.readouterr().out
    assert "pending devices: 1" in out and laptop.device_id not in out


def test_close_service_status_and_enforce_closing(
    where: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    service = _service(where)
    try:
        space_id, _code = service.add_user("alice")
    finally:
        service.close()
    assert _run(["cloud", "service-status", "--json", *where]) == 0
    assert json.loads(capsys.readouterr().out)["mode"] == "open"

    assert _run(["cloud", "close", "--on", "2020-01-01T00:00:00Z", *where]) == 1
    assert "not in the future" in capsys.readouterr().err
    assert _run(["cloud", "close", "--on", "2099-03-01T00:00:00", *where]) == 1
    assert "time zone" in capsys.readouterr().err
    on = datetime.now(UTC) + timedelta(days=60)
    until = on + timedelta(days=30)
    argv = ["cloud", "close", "--on", on.isoformat(), "--export-until", until.isoformat()]
    assert _run([*argv, *where]) == 0
    out = capsys.readouterr().out
    assert "mode:         closing" in out and f"closes at:    {on.isoformat()}" in out
    assert _run(["cloud", "service-status", "--json", *where]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["mode"] == "closing"
    assert datetime.fromisoformat(shown["export_until"]) == until

    assert _run(["cloud", "enforce-closing", *where]) == 0
    assert "not closed: no account was ended" in capsys.readouterr().out
    assert _run(["cloud", "close", "--cancel", *where]) == 0
    assert "cancelled" in capsys.readouterr().out
    assert _run(["cloud", "service-status", *where]) == 0
    assert "mode:         open" in capsys.readouterr().out
    assert _run(["cloud", "close", "--cancel", *where]) == 1
    assert "nothing to cancel" in capsys.readouterr().err
    assert _run(["cloud", "account-status", space_id, "--json", *where]) == 0
    assert json.loads(capsys.readouterr().out)["ended"] is False


def test_enforce_closing_once_the_service_closed(
    where: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # announced long ago (by a process whose clock says 2020), so closed today
    then = FakeClock(datetime(2020, 1, 1, tzinfo=UTC))
    past = CloudService(CloudConfig(store_url=where[1], key_store_path=Path(where[3]), clock=then))
    try:
        space_id, _code = past.add_user("alice")
        past.announce_closing(datetime(2020, 2, 1, tzinfo=UTC), datetime(2020, 3, 1, tzinfo=UTC))
    finally:
        past.close()
    assert _run(["cloud", "enforce-closing", "--json", *where]) == 0
    assert json.loads(capsys.readouterr().out) == {"mode": "closed", "open_accounts": 0}
    assert _run(["cloud", "account-status", space_id, "--json", *where]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["reason"] == "service_shutdown" and shown["keys_destroyed_at"]
    assert _run(["cloud", "add-user", "bob", *where]) == 1
    assert "closed" in capsys.readouterr().err
