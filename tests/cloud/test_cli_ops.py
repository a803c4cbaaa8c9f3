"""``memsync cloud users`` / ``devices`` and the one-line errors of a store that cannot
be opened (``cloud.cli_ops``, ``cloud.store.reach``), on both record stores.

What would break each test: a listing that shows a credential or memory content, or
misses a revoked or ended state; a missing or unreachable database that prints a
traceback, shows the password, or exits other than 2.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cloud.account_end import EndReason
from cloud.config import CloudConfig
from cloud.service import CloudService
from memsync.cli import main
from tests.cloud.conftest import SENTENCE, TYPED, Ops, enroll, push

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def master_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("MEMSYNC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MEMSYNC_MASTER_KEY", "33" * 32)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers  # a worker command installs its log handler
    root.setLevel(level)


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once it is closed


def test_users_and_devices_list_ids_dates_and_states_only(
    store_url: str, tmp_path: Path, ops: Ops, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = tmp_path / "keys.db"
    where = ["--store", store_url, "--keys", str(keys)]
    assert main(["cloud", "users", *where]) == 0
    assert capsys.readouterr().out.strip() == "no users"

    service = CloudService(CloudConfig(store_url=store_url, key_store_path=keys))
    try:
        alice, code = service.add_user("alice")
        phone = enroll(service, code, "phone")
        laptop = enroll(service, service.new_enrollment_code(alice), "laptop")
        push(
            service,
            phone,
            ops.episode("ep_aaaaaaaa01", TYPED),
            ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
        )
        service.revoke_device(alice, laptop.device_id)
        bob, bob_code = service.add_user("bob")
        bobs_phone = enroll(service, bob_code, "bob-phone")
        service.end_space(bob, EndReason.DELETED)
    finally:
        service.close()

    assert main(["cloud", "users", "--json", *where]) == 0
    out = capsys.readouterr().out
    users = {u["space_id"]: u for u in json.loads(out)["users"]}
    assert users[alice]["name"] == "alice"
    assert (users[alice]["devices"], users[alice]["revoked_devices"]) == (2, 1)
    assert users[alice]["ended_at"] is None
    assert users[bob]["name"] == bob  # an ended space keeps only its id as its name
    assert users[bob]["end_reason"] == "deleted" and users[bob]["devices"] == 1

    assert main(["cloud", "devices", "--json", "--user", "alice", *where]) == 0
    listed = json.loads(capsys.readouterr().out)["devices"]
    by_id = {d["device_id"]: d for d in listed}
    assert set(by_id) == {phone.device_id, laptop.device_id}
    assert by_id[phone.device_id]["last_seen"] is not None  # it pushed
    assert by_id[laptop.device_id]["revoked_at"] is not None
    assert all(d["space_id"] == alice for d in listed)

    assert main(["cloud", "devices", *where]) == 0  # every space's, as a table
    table = capsys.readouterr().out
    assert table.splitlines()[0].split() == [
        "SPACE", "ID", "DEVICE", "ID", "NAME", "ENROLLED", "LAST", "SEEN", "REVOKED", "WIPED",
    ]  # fmt: skip
    for device in (phone, laptop, bobs_phone):
        assert device.device_id in table
    assert main(["cloud", "users", *where]) == 0
    users_table = capsys.readouterr().out
    assert "alice" in users_table and "(deleted)" in users_table

    everything = out + json.dumps(listed) + table + users_table
    for secret in (phone.credential, laptop.credential, code, SENTENCE, "rec_aaaaaaaa01"):
        assert secret not in everything

    assert main(["cloud", "devices", "--user", "nobody", *where]) == 1
    assert "no user or space named 'nobody'" in capsys.readouterr().err


COMMANDS = [
    ["cloud", "serve"],
    ["cloud", "users"],
    ["cloud", "devices"],
    ["cloud", "add-user", "carol"],
    ["cloud", "worker", "--once"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[1])
def test_an_unreachable_postgresql_is_one_line_and_exit_2(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = _closed_port()
    url = f"postgresql://memsync:hunter2@127.0.0.1:{port}/memsync"
    assert main([*command, "--store", url, "--keys", str(tmp_path / "k.db")]) == 2
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if line.startswith("memsync cloud:")]
    assert len(said) == 1 and "Traceback" not in err, err  # (a worker logs its start first)
    assert f"postgresql://memsync:***@127.0.0.1:{port}/memsync cannot be opened" in said[0]
    assert "connection refused" in err.lower() and "hunter2" not in err
    assert not (tmp_path / "k.db").exists()  # nothing was created


@pytest.mark.postgres
@pytest.mark.parametrize("command", COMMANDS[:4], ids=lambda c: c[1])
def test_a_missing_postgresql_database_is_one_line_and_exit_2(
    command: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    postgres_database: Callable[[], str],
) -> None:
    existing = postgres_database()  # this server answers; its sibling database does not exist
    url = existing.replace("postgresql://postgres@", "postgresql://postgres:pw@") + "_absent"
    assert main([*command, "--store", url, "--keys", str(tmp_path / "k.db")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    name = url.rsplit("/", 1)[1]
    assert err.startswith("memsync cloud: the record store postgresql://postgres:***@")
    assert f'database "{name}" does not exist' in err and ":pw@" not in err


def test_the_real_process_prints_no_traceback(tmp_path: Path) -> None:
    port = _closed_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "memsync.cli", "cloud", "serve",
         "--store", f"postgresql://postgres@127.0.0.1:{port}/memsync",
         "--keys", str(tmp_path / "k.db")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert done.stdout == ""
