"""``recall --cloud`` while the cloud's indexing is behind, offline, and slow (issue 20),
over real HTTP (uvicorn on loopback), on both record stores.

The slow indexer is injected at the seam: the cloud's embedder waits for a gate when the
background indexer's thread calls it, so indexing stays behind for as long as the test
says, deterministically; a recall that indexed inside the request would hang there and
the device's read timeout (10 s) would end it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import numpy as np
import pytest

from cloud.config import CloudConfig
from cloud.embedder import default_embedder
from device import cli as device_cli
from device.agent import DeviceAgent
from device.errors import CloudSlow, Offline
from simulator.cloud_runner import RunningCloud
from simulator.fleet import DeviceHandle, Fleet

INDEXER_THREAD = "memsync-indexer"  # cloud.indexer's background thread
PASSPORT = "My passport is in the blue drawer."
THINGS = ["bike", "guitar", "umbrella", "camera", "tent", "kettle", "ladder", "scarf"]
PLACES = ["attic", "garage", "cellar", "hallway", "shed", "closet", "office"]
SAID = [PASSPORT] + [f"The {t} is kept in the {p}." for t in THINGS for p in PLACES[:5]]


class GatedEmbedder:
    """The cloud's real embedder; a call from the background indexer waits for ``gate``."""

    def __init__(self) -> None:
        self.inner = default_embedder()
        self.model_id = self.inner.model_id
        self.gate = threading.Event()
        self.entered = threading.Event()

    def embed(self, texts: Sequence[str]) -> list[np.ndarray]:
        if threading.current_thread().name == INDEXER_THREAD:
            self.entered.set()
            assert self.gate.wait(300), "the test never let the indexer go on"
        return list(self.inner.embed(list(texts)))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def slow_indexing(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[RunningCloud, GatedEmbedder]]:
    gated = GatedEmbedder()
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'records.db'}"
    else:
        url = request.getfixturevalue("postgres_database")()
    config = CloudConfig(store_url=url, key_store_path=tmp_path / "keys.db", embedder=lambda: gated)
    try:
        with RunningCloud(config) as running:
            yield running, gated
    finally:
        gated.gate.set()


def _told(cloud: RunningCloud, root: Path) -> tuple[Fleet, DeviceHandle, dict[str, str]]:
    fleet = Fleet(cloud, root)
    phone = fleet.add_device(fleet.add_user("ada"), "phone")
    records = {}
    for i, sentence in enumerate(SAID):
        phone.agent.say(sentence, f"c{i}")
        records[sentence] = phone.agent.remember(sentence, f"c{i}").record_id
    phone.agent.sync()
    return fleet, phone, records


def test_a_recall_while_indexing_is_behind_answers_at_once_and_says_so(
    slow_indexing: tuple[RunningCloud, GatedEmbedder], tmp_path: Path
) -> None:
    cloud, gated = slow_indexing
    fleet, phone, records = _told(cloud, tmp_path / "devices")
    try:
        assert gated.entered.wait(120)  # the cloud's indexer is stuck inside its embedding
        behind = phone.agent.retrieve_from_cloud("Where is my passport?", fallback=False)
        assert behind.scope == "cloud" and behind.hits == ()
        assert f"has not indexed {len(SAID)} record(s) of your space yet" in behind.note
        # a protocol-3 device of the same space is served the answer it always got
        space_id = phone.agent.space_id
        assert space_id is not None
        old = DeviceAgent.create(
            tmp_path / "old-laptop",
            "passphrase of the old laptop",
            device_name="old-laptop",
            cloud_url=cloud.url,
            protocol_versions=(1, 3),
        )
        try:
            old.enroll(cloud.operator.new_enrollment_code(space_id))
            told_old = old.retrieve_from_cloud("Where is my passport?", fallback=False)
            assert old.protocol_version == 3 and told_old.scope == "cloud"
            assert told_old.hits == () and "not indexed" not in told_old.note
        finally:
            old.close()

        gated.gate.set()
        assert cloud.service is not None and cloud.service.indexer.wait_idle(300)
        caught_up = phone.agent.retrieve_from_cloud("Where is my passport?", fallback=False)
        assert caught_up.scope == "cloud" and "not indexed" not in caught_up.note
        assert caught_up.hits[0].record_id == records[PASSPORT]
    finally:
        fleet.close()


def test_offline_recall_cloud_falls_back_to_the_device_and_says_so(
    slow_indexing: tuple[RunningCloud, GatedEmbedder],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cloud, gated = slow_indexing
    gated.gate.set()
    fleet, phone, records = _told(cloud, tmp_path / "devices")
    try:
        phone.go_offline()
        with pytest.raises(Offline):
            phone.agent.retrieve_from_cloud("Where is my passport?", fallback=False)
        answer = phone.agent.retrieve_from_cloud("Where is my passport?")
        assert answer.scope == "device"
        assert answer.note.startswith("The cloud is unreachable (offline).")
        assert answer.note.endswith("Searched only what this device holds.")
        assert answer.hits[0].record_id == records[PASSPORT]

        # the CLI, with the cloud gone: the same answer and the same note
        phone.close()
        cloud.stop()
        monkeypatch.setenv("MEMSYNC_PASSPHRASE", phone.passphrase)
        argv = ["device", "recall", "--cloud", "Where is my passport?"]
        assert device_cli.main([*argv, "--dir", str(phone.directory)]) == 0
        out = capsys.readouterr().out
        assert records[PASSPORT] in out and PASSPORT in out
        assert "The cloud is unreachable (offline). Answered from this device instead." in out
        phone.reopen()
    finally:
        fleet.close()


class _SlowAt(httpx.BaseTransport):
    """Delivers every request; for ``path`` the answer then does not come in time."""

    def __init__(self, inner: httpx.BaseTransport, path: str) -> None:
        self.inner = inner
        self.path = path
        self.delivered = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.url.path != self.path:
            return response
        response.read()
        response.close()
        self.delivered += 1
        raise httpx.ReadTimeout("timed out waiting for the answer (injected)", request=request)


def test_a_slow_cloud_is_slow_not_unreachable_and_recall_falls_back(
    slow_indexing: tuple[RunningCloud, GatedEmbedder], tmp_path: Path
) -> None:
    cloud, gated = slow_indexing
    gated.gate.set()
    fleet, phone, records = _told(cloud, tmp_path / "devices")
    try:
        slow = _SlowAt(phone.transport.inner, "/v1/recall")
        phone.transport.inner = slow
        with pytest.raises(CloudSlow) as raised:
            phone.agent.retrieve_from_cloud("Where is my passport?", fallback=False)
        assert isinstance(raised.value, Offline)  # every caller of Offline copes with it
        message = str(raised.value)
        assert "is slow" in message and "nothing was lost" in message
        assert "/v1/recall" in message and "within 10 s" in message
        assert "cannot reach" not in message
        assert slow.delivered == 1  # the cloud did get the request

        answer = phone.agent.retrieve_from_cloud("Where is my passport?")
        assert answer.scope == "device" and slow.delivered == 2
        assert answer.note.startswith(
            "The cloud is slow (it did not answer within 10 s); nothing was lost."
        )
        assert answer.hits[0].record_id == records[PASSPORT]
        phone.agent.sync()  # other requests are untouched
    finally:
        fleet.close()
