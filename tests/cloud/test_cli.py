"""``memsync cloud add-user``, ``add-device`` and ``pending`` through argparse."""

from __future__ import annotations

import argparse
import json
import stat
from pathlib import Path

import pytest

from cloud.cli import register
from cloud.config import CloudConfig
from cloud.service import CloudService
from tests.cloud.conftest import SENTENCE, TYPED, Ops, enroll, push


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="memsync")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


def test_add_user_then_pending(
    store_url: str,
    tmp_path: Path,
    ops: Ops,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MEMSYNC_MASTER_KEY", raising=False)
    keys = tmp_path / "cloud" / "keys.db"
    where = ["--store", store_url, "--keys", str(keys)]
    assert _run(["cloud", "add-user", "alice", "--json", *where]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["space_id"].startswith("sp_") and len(made["enrollment_code"]) >= 8
    master = keys.parent / "master.key"
    assert stat.S_IMODE(master.stat().st_mode) == 0o600

    assert _run(["cloud", "add-user", "alice", *where]) == 1
    assert "already exists" in capsys.readouterr().err

    assert _run(["cloud", "pending", "--user", "alice", *where]) == 0
    assert capsys.readouterr().out.strip() == "nothing pending"

    assert _run(["cloud", "add-device", "--user", "alice", "--json", *where]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["space_id"] == made["space_id"]
    assert second["enrollment_code"] != made["enrollment_code"]
    assert _run(["cloud", "add-device", "--user", "nobody", *where]) == 1
    assert "nobody" in capsys.readouterr().err

    service = CloudService(CloudConfig(store_url=store_url, key_store_path=keys))
    try:
        phone = enroll(service, made["enrollment_code"], "phone")
        push(
            service,
            phone,
            ops.episode("ep_aaaaaaaa01", TYPED),
            ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
            ops.forget("rec_aaaaaaaa01"),
        )
    finally:
        service.close()

    assert _run(["cloud", "pending", "--user", made["space_id"], *where]) == 0
    out = capsys.readouterr().out
    assert "rec_aaaaaaaa01" in out and phone.device_id in out and "phone" in out
    assert _run(["cloud", "pending", "--user", "alice", "--json", *where]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["forgets"][0]["pending"][0]["device_id"] == phone.device_id

    assert _run(["cloud", "pending", "--user", "nobody", *where]) == 1
    assert "nobody" in capsys.readouterr().err


def test_store_and_keys_default_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMSYNC_STORE", str(tmp_path / "env" / "records.db"))
    monkeypatch.setenv("MEMSYNC_KEYS", str(tmp_path / "env" / "keys.db"))
    monkeypatch.setenv("MEMSYNC_MASTER_KEY", "11" * 32)
    assert _run(["cloud", "add-user", "carol"]) == 0
    assert (tmp_path / "env" / "records.db").exists() and (tmp_path / "env" / "keys.db").exists()
    assert not (tmp_path / "env" / "master.key").exists()
    assert "space id:" in capsys.readouterr().out


def test_a_bad_master_key_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMSYNC_MASTER_KEY", "abcd")
    where = ["--store", str(tmp_path / "r.db"), "--keys", str(tmp_path / "k.db")]
    assert _run(["cloud", "add-user", "dave", *where]) == 1
    assert "MEMSYNC_MASTER_KEY must be 32 bytes" in capsys.readouterr().err


def test_two_services_share_one_master_key_file(store_url: str, tmp_path: Path) -> None:
    config = CloudConfig(store_url=store_url, key_store_path=tmp_path / "k" / "keys.db")
    first = CloudService(config)
    second = CloudService(config)
    try:
        space_id, code = first.add_user("erin")
        phone = enroll(second, code)
        assert phone.space_id == space_id
        key_id, dek = first.key_store.create_data_key(space_id)
        assert second.key_store.data_key(space_id, key_id) == dek
        second.key_store.destroy([key_id])
        assert first.key_store.data_key(space_id, key_id) is None
    finally:
        first.close()
        second.close()
