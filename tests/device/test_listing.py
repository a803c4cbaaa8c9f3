"""``memsync device list`` / ``know`` read through the store alone (issue 23 item 1):
the same answer as the agent's, without loading the agent, the sync client, numpy or
the wire messages; a database that needs its migrations goes through the agent's open.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from device import listing, online_cli
from device.agent import DeviceAgent
from device.migrations import Migration
from protocol import messages
from tests.device.conftest import PASSPHRASE, TickingClock, seeded

ROOT = Path(__file__).resolve().parents[2]
LIST_JSON = ("device", "list", "--json", "--dir")
NOT_FOR_A_LISTING = ("device.agent", "device.client", "httpx", "numpy", "protocol.messages")

_CHILD = """
import json, sys
from memsync.cli import main
code = main(sys.argv[1:])
print(json.dumps({{"code": code, "loaded": [m for m in {names!r} if m in sys.modules]}}))
"""


def _device(folder: Path) -> DeviceAgent:
    agent = DeviceAgent.create(
        folder, PASSPHRASE, device_name="phone", clock=TickingClock(), random_bytes=seeded(7)
    )
    for n, text in enumerate(("I grew up in Duluth.", "I like green tea.")):
        agent.say(text, f"c{n}")
        agent.remember(text, f"c{n}")
    return agent


def test_the_reader_answers_what_the_agent_answers(tmp_path: Path) -> None:
    folder = tmp_path / "dev"
    with _device(folder) as agent:
        agent.forget_permanently(agent.list_records()[0].record_id)
    now = datetime(2026, 6, 1, tzinfo=UTC)
    with DeviceAgent.open(folder, PASSPHRASE, clock=lambda: now) as agent:
        expected = agent.what_do_you_know()
    records = listing.open_records(folder, PASSPHRASE, clock=lambda: now)
    try:
        assert isinstance(records, listing.Reader)  # up to date: no agent
        assert records.list_records() == records.what_do_you_know() == expected
        assert any(v.is_skeleton for v in expected) and any(v.text for v in expected)
    finally:
        records.close()


def test_a_database_that_needs_a_migration_is_opened_by_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "dev"
    _device(folder).close()
    newer = Migration(id=listing.MIGRATIONS[-1].id + 1, name="a later one", statements=())
    monkeypatch.setattr(listing, "MIGRATIONS", (*listing.MIGRATIONS, newer))
    records = listing.open_records(folder, PASSPHRASE)
    try:
        assert isinstance(records, DeviceAgent)  # its open migrates, as every open did
        assert len(records.list_records()) == 2
    finally:
        records.close()


def test_list_in_a_fresh_process_loads_no_agent_client_numpy_or_wire_messages(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "dev"
    _device(folder).close()
    done = subprocess.run(
        [sys.executable, "-c", _CHILD.format(names=NOT_FOR_A_LISTING), *LIST_JSON, str(folder)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MEMSYNC_PASSPHRASE": PASSPHRASE},
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    answer = json.loads(lines[-1])
    assert answer == {"code": 0, "loaded": []}, done.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "memsync", "device", "list", "--dir", str(folder)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MEMSYNC_PASSPHRASE": PASSPHRASE},
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert "I grew up in Duluth." in listed.stdout and "I like green tea." in listed.stdout


def test_the_cli_live_wait_limit_is_the_protocols() -> None:
    assert online_cli.MAX_PULL_WAIT == messages.MAX_PULL_WAIT
