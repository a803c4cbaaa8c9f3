"""A sensitive class kept only on the device never reaches the cloud, not even as
ciphertext: proved by recording every request the device sent to the real cloud
(uvicorn on loopback) and by reading the cloud's record store and key store files."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from protocol.model import Sensitivity
from simulator.cloud_runner import RunningCloud
from simulator.fleet import Fleet

pytestmark = pytest.mark.e2e


class Recording(httpx.BaseTransport):
    """Forwards to the real transport and keeps every request body it sent."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.sent: list[bytes] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request.read())
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def _cloud_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file())


def test_a_device_only_class_is_never_sent_nor_stored_in_the_cloud(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        ada = fleet.add_user("ada")
        phone = fleet.add_device(ada, "phone")
        recording = Recording(phone.transport.inner)
        phone.transport.inner = recording
        agent = phone.agent
        agent.keep_on_device(Sensitivity.HEALTH)
        kept = agent.say_detected("I take insulin every morning.", "c1")
        shared = agent.say_detected("I moved to Lisbon last year.", "c1")
        assert kept.device_only and not shared.device_only
        ended = agent.end_session("c1")
        local = ended[1].record_id
        agent.confirm(local)
        remembered = agent.remember("I take insulin every morning.", "c1").record_id
        agent.sync()
        laptop = fleet.add_device(ada, "laptop")
        laptop.agent.sync()

        sent = b"".join(recording.sent)
        assert b"Lisbon" in sent  # positive control: what is not kept did go
        secrets = [kept.episode_id, local, remembered]
        for needle in [b"insulin", *(s.encode() for s in secrets)]:
            assert needle not in sent, needle
        stored = _cloud_bytes(tmp_path / "cloud")
        assert shared.episode_id.encode() in stored  # positive control
        for needle in secrets:
            assert needle.encode() not in stored, needle
        with cloud.operator.store.session(ada.space_id) as s:
            assert set(s.episodes(ada.space_id, [kept.episode_id, shared.episode_id])) == {
                shared.episode_id
            }
            assert s.records(ada.space_id, [local, remembered]) == {}
        # the second device of the same user has none of it either
        held = {v.record_id for v in laptop.agent.what_do_you_know()}
        assert not held & {local, remembered}
        views = {v.record_id: v for v in agent.what_do_you_know()}
        assert views[local].device_only and views[remembered].device_only
    finally:
        fleet.close()
