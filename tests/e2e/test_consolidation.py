"""End to end: a device says things, its candidates reach a real cloud, the consolidator
worker runs once (``memsync cloud worker --once``), and a second device learns the
records; forgetting a record forgets what was derived from it, everywhere.

Real uvicorn on loopback, real SQLCipher devices, the device agent's Python API.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cloud.cli import register
from cloud.config import CloudConfig
from device.views import RecordView
from protocol.model import LifecycleState
from simulator.cloud_runner import RunningCloud
from simulator.fleet import DeviceHandle, Fleet

pytestmark = pytest.mark.e2e


def _worker_once(cloud: RunningCloud) -> None:
    """``memsync cloud worker --once`` against the running cloud's stores."""
    parser = argparse.ArgumentParser(prog="memsync")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(
        [
            "cloud",
            "worker",
            "--once",
            "--worker-id",
            "e2e",
            "--store",
            cloud.config.store_url,
            "--keys",
            str(cloud.config.key_store_path),
        ]
    )
    assert args.func(args) == 0


@pytest.fixture
def pair(cloud: RunningCloud, tmp_path: Path) -> Iterator[tuple[DeviceHandle, DeviceHandle]]:
    fleet = Fleet(cloud, tmp_path / "devices")
    ada = fleet.add_user("ada")
    yield fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
    fleet.close()


def _by_text(handle: DeviceHandle) -> dict[str, RecordView]:
    return {v.text: v for v in handle.agent.list_records() if v.text is not None}


def _scenario(cloud: RunningCloud, phone: DeviceHandle, laptop: DeviceHandle) -> None:
    said = phone.agent.say_detected(
        "I go swimming every Tuesday. What time is it? I was diagnosed with asthma last year.",
        "morning-chat",
    )
    assert [d.candidate for d in said.sentences] == [True, False, True]
    phone.agent.end_session("morning-chat")
    for order in ["americano"] * 6:
        phone.agent.observe("coffee order", order, source="app:cafe")
    phone.agent.sync()
    _worker_once(cloud)
    laptop.agent.sync()
    phone.agent.sync()

    learned = _by_text(laptop)
    swim = learned["I go swimming every Tuesday."]
    assert swim.background and swim.lifecycle_state is LifecycleState.ACTIVE
    recently = {v.record_id for v in laptop.agent.recently_learned()}
    assert swim.record_id in recently  # "recently learned" on the second device too
    assert swim.epistemic_state == "said"
    asthma = learned["I was diagnosed with asthma last year."]
    assert asthma.lifecycle_state is LifecycleState.CANDIDATE  # sensitive: waits for the user
    assert asthma.sensitivity == "health"
    observed = learned["6 of the last 6 coffee orders were americano."]
    inferred = learned["Usually chooses americano for coffee order."]
    assert inferred.derived_from == (observed.record_id,)
    assert observed.epistemic_state == "observed" and inferred.epistemic_state == "inferred"
    assert set(_by_text(phone)) >= set(learned)  # the phone learns them on its next sync
    # and notes which record each of its candidates became (the question was never one)
    marks = phone.agent._debug_db().all(
        "SELECT sentence, record_id FROM candidates WHERE episode_id = ? ORDER BY sentence",
        (said.episode_id,),
    )
    assert [(m["sentence"], m["record_id"]) for m in marks] == [
        (0, swim.record_id),
        (2, asthma.record_id),
    ]

    # forgetting the observation forgets the inference, in the cloud and on both devices
    laptop.agent.forget_permanently(observed.record_id)
    laptop.agent.sync()
    phone.agent.sync()
    laptop.agent.sync()
    for record_id in (observed.record_id, inferred.record_id):
        status = cloud.operator.record_status(phone.agent.space_id or "", record_id)
        assert status.lifecycle_state is LifecycleState.FORGOTTEN
        for handle in (phone, laptop):
            (view,) = [v for v in handle.agent.list_records() if v.record_id == record_id]
            assert view.is_skeleton and view.text is None
    assert "I go swimming every Tuesday." in _by_text(phone)  # only what derives from it goes
    assert cloud.operator.pending(phone.agent.space_id or "").forgets[0].pending == []


def test_said_candidates_and_behaviour_are_consolidated_and_forgotten_everywhere(
    pair: tuple[DeviceHandle, DeviceHandle], cloud: RunningCloud
) -> None:
    phone, laptop = pair
    _scenario(cloud, phone, laptop)


@pytest.mark.postgres
def test_consolidation_on_postgresql(postgres_database: Callable[[], str], tmp_path: Path) -> None:
    config = CloudConfig(store_url=postgres_database(), key_store_path=tmp_path / "keys.db")
    with RunningCloud(config) as cloud:
        fleet = Fleet(cloud, tmp_path / "devices")
        try:
            ada = fleet.add_user("ada")
            _scenario(cloud, fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop"))
        finally:
            fleet.close()
