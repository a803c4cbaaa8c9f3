"""A scripted conversation through the `memsync` CLI, as a user types it: two devices,
one offline, a real cloud on loopback (issue 3's "How it will be checked")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from simulator.cloud_runner import RunningCloud
from simulator.forensics import scan_device_database

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
PASSPHRASE = "device passphrase"


class Cli:
    def __init__(self, cloud: RunningCloud, home: Path) -> None:
        self.cloud = cloud
        self.env = {
            **os.environ,
            "MEMSYNC_PASSPHRASE": PASSPHRASE,
            "MEMSYNC_ACCOUNT_PASSPHRASE": "account passphrase",
            "MEMSYNC_STORE": cloud.config.store_url,
            "MEMSYNC_KEYS": str(cloud.config.key_store_path),
        }
        self.home = home

    def run(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "simulator.cli", *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=ROOT,
            timeout=120,
        )
        if ok:
            assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    def device(self, name: str, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("device", *args, "--dir", str(self.home / name), ok=ok)

    def json(self, name: str, *args: str) -> Any:
        return json.loads(self.device(name, *args, "--json").stdout)


def test_a_conversation_through_the_cli(cloud: RunningCloud, tmp_path: Path) -> None:
    cli = Cli(cloud, tmp_path)
    code = json.loads(cli.run("cloud", "add-user", "ada", "--json").stdout)["enrollment_code"]
    cli.device("phone", "init", "--name", "phone", "--cloud", cloud.url, "--code", code)
    code2 = json.loads(cli.run("cloud", "add-device", "--user", "ada", "--json").stdout)[
        "enrollment_code"
    ]
    cli.device("laptop", "init", "--name", "laptop", "--cloud", cloud.url, "--code", code2)

    # Offline on the phone (no sync): a fragment is refused, the whole sentence kept.
    cli.device(
        "phone",
        "say",
        "My favorite number is not 1729. I drink my coffee iced.",
        "--conversation",
        "c1",
    )
    refused = cli.device("phone", "remember", "1729", "--conversation", "c1", ok=False)
    assert refused.returncode == 2 and "fragment" in refused.stderr
    assert "Traceback" not in refused.stderr
    made = cli.json(
        "phone",
        "remember",
        "I drink my coffee iced.",
        "--conversation",
        "c1",
        "--type",
        "preference",
    )
    record = made["record_id"]
    cli.device("phone", "sync")
    cli.device("laptop", "sync")
    line = cli.device("laptop", "recall", "coffee").stdout
    assert 'you wrote: "I drink my coffee iced."' in line and "You told me" in line

    # The laptop corrects it; the phone, offline meanwhile, learns it at its next sync.
    cli.device("laptop", "say", "No. I drink my coffee hot.", "--conversation", "c2")
    corrected = cli.device(
        "laptop", "correct", record, "I drink my coffee hot.", "--conversation", "c2"
    ).stdout
    assert "Your correction was committed; the previous version is no longer active." in corrected
    cli.device("laptop", "sync")
    cli.device("phone", "sync")
    for name in ("phone", "laptop"):
        recalled = cli.device(name, "recall", "coffee").stdout
        assert "hot" in recalled and "iced" not in recalled
    why = cli.device("phone", "explain", record).stdout
    assert 'you wrote: "No. I drink my coffee hot."' in why and "version 2" in why

    # Don't use is reversible; forget is not, and reaches the other device.
    assert "won't use it" in cli.device("phone", "dont-use", record).stdout
    assert "Nothing found" in cli.device("phone", "recall", "coffee").stdout
    cli.device("phone", "use-again", record)
    cli.device("phone", "sync")
    keys_before = cli.json("laptop", "know")
    assert any(r["record_id"] == record for r in keys_before)
    forgot = cli.device("laptop", "forget", record, "--permanent", "--yes").stdout
    assert "Permanently forgotten; it cannot be brought back." in forgot
    cli.device("laptop", "sync")
    pending = json.loads(cli.run("cloud", "pending", "--user", "ada", "--json").stdout)
    assert [d["device_name"] for f in pending["forgets"] for d in f["pending"]] == ["phone"]
    cli.device("phone", "sync")
    assert "nothing pending" in cli.run("cloud", "pending", "--user", "ada").stdout
    for name in ("phone", "laptop"):
        skeleton = [r for r in cli.json(name, "know") if r["record_id"] == record]
        assert skeleton and skeleton[0]["lifecycle"] == "permanently_forgotten"
        scan = scan_device_database(
            tmp_path / name / "device.db",
            PASSPHRASE,
            {"iced": b"I drink my coffee iced.", "hot": b"I drink my coffee hot."},
        )
        assert scan.clean and scan.unreadable_pages == 0, (name, scan.hits)

    # Temporary mode writes nothing.
    before = (tmp_path / "phone" / "device.db").read_bytes()
    temporary = cli.device(
        "phone", "say", "Nobody should keep this.", "--conversation", "c9", "--temporary"
    )
    assert "nothing was logged" in temporary.stdout.lower()
    assert (tmp_path / "phone" / "device.db").read_bytes() == before
