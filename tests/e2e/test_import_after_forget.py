"""An old export never undoes a permanent forget, through the real cloud (uvicorn,
httpx): a package written before the forget, imported again on the device that forgot,
on one that heard the forget, and on one enrolled after it, brings back none of the
forgotten words, and everything else it holds is imported or counted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from device.agent import DeviceAgent
from protocol.export.importing import ALREADY_HELD, FORGOTTEN_SINCE
from simulator.cloud_runner import RunningCloud
from simulator.fleet import Fleet

ACCOUNT = "correct horse battery staple"
SECRET = "My locker code is 4417."
KEPT = "I grew up in Duluth."


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[RunningCloud]:
    with RunningCloud.sqlite(tmp_path / "cloud") as running:
        yield running


def _words(agent: DeviceAgent) -> list[str]:
    """Every text the device can show: records of any lifecycle, waiting candidates."""
    texts = [v.text or "" for v in agent.what_do_you_know()]
    texts += [v.text or "" for v in agent.waiting_for_confirmation()]
    return texts


def test_an_old_export_does_not_bring_forgotten_words_back(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        ada = fleet.add_user("ada")
        phone = fleet.add_device(ada, "phone", account_passphrase=ACCOUNT)
        tablet = fleet.add_device(ada, "tablet", account_passphrase=ACCOUNT)
        a = phone.agent
        a.say(KEPT, "c1")
        a.remember(KEPT, "c1")
        a.say(SECRET, "c2")
        secret = a.remember(SECRET, "c2").record_id
        assert a.sync().refused == []
        tablet.agent.sync()
        out = tmp_path / "out"
        out.mkdir()
        package = a.export(out, ACCOUNT).package_path
        assert SECRET in package.read_text()  # written before the forget

        a.forget_permanently(secret)
        assert a.sync().refused == []
        tablet.agent.sync()  # hears the forget
        for device in (phone, tablet):
            report = device.agent.import_package(package)
            notes = dict(report.not_imported)
            assert notes[FORGOTTEN_SINCE] >= 1, notes  # the record (and its episode)
            assert notes[ALREADY_HELD] >= 1, notes  # what it still holds is not added twice
            assert report.record_ids == (), report
            assert not any("4417" in t for t in _words(device.agent))
            assert device.agent.sync().refused == []
        assert not any("4417" in t for t in _words(tablet.agent))

        laptop = fleet.add_device(ada, "laptop", account_passphrase=ACCOUNT)
        laptop.agent.sync()  # enrolled after the forget: it never held the record
        report = laptop.agent.import_package(package)
        assert dict(report.not_imported)[FORGOTTEN_SINCE] >= 1, report  # it has the skeleton
        assert laptop.agent.sync().refused == []
        laptop.agent.sync()
        assert not any("4417" in t for t in _words(laptop.agent)), report
        phone.agent.sync()
        assert not any("4417" in t for t in _words(phone.agent))
    finally:
        fleet.close()
