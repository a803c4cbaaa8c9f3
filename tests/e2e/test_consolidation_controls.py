"""End to end (issue 17): consolidation never undoes the user. The phone remembers
and corrects (and retracts) in a conversation before it ends, the consolidator worker
runs (``memsync cloud worker --once``), and the laptop sees only what the user decided.

Real uvicorn on loopback, real SQLCipher devices, the device agent's Python API.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.model import LifecycleState
from simulator.cloud_runner import RunningCloud
from simulator.fleet import DeviceHandle, Fleet
from tests.e2e.test_consolidation import _worker_once

pytestmark = pytest.mark.e2e

ROME = "I live in Rome."
MILAN = "I live in Milan."
VEGAN = "I am vegan."


@pytest.fixture
def pair(cloud: RunningCloud, tmp_path: Path) -> Iterator[tuple[DeviceHandle, DeviceHandle]]:
    fleet = Fleet(cloud, tmp_path / "devices")
    ada = fleet.add_user("ada")
    yield fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
    fleet.close()


def test_a_correction_before_the_session_ended_is_what_the_other_device_sees(
    pair: tuple[DeviceHandle, DeviceHandle], cloud: RunningCloud
) -> None:
    phone, laptop = pair
    chat = "moving-chat"
    said = phone.agent.say_detected(ROME, chat)
    assert [d.candidate for d in said.sentences] == [True]
    home = phone.agent.remember(ROME, chat).record_id
    assert home is not None
    phone.agent.say_detected(MILAN, chat)
    phone.agent.correct(home, MILAN, chat)
    phone.agent.say_detected(VEGAN, chat)
    diet = phone.agent.remember(VEGAN, chat).record_id
    assert diet is not None
    phone.agent.dont_use(diet)
    phone.agent.end_session(chat)
    phone.agent.sync()
    _worker_once(cloud)
    laptop.agent.sync()
    phone.agent.sync()

    for handle in (laptop, phone):
        views = handle.agent.list_records()
        current = sorted((v.text, v.lifecycle_state) for v in views)
        assert current == [(VEGAN, LifecycleState.NOT_IN_USE), (MILAN, LifecycleState.ACTIVE)]
        assert {v.record_id for v in views} == {home, diet}
    # the candidates the consolidator dropped or finished made no record
    status = cloud.operator.record_status(phone.agent.space_id or "", home)
    assert status.lifecycle_state is LifecycleState.ACTIVE
