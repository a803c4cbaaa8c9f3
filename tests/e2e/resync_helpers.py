"""What the resync tests share: a typed-then-remembered sentence, and a device's and the
cloud's view of records (lifecycle and current version) to compare them."""

from __future__ import annotations

from device.agent import DeviceAgent
from simulator.cloud_runner import RunningCloud
from simulator.fleet import DeviceHandle

View = dict[str, tuple[str, int | None]]


def remember(handle: DeviceHandle, sentence: str, conversation: str) -> str:
    """The user types ``sentence`` in ``conversation`` and asks to remember it."""
    handle.agent.say(sentence, conversation)
    return handle.agent.remember(sentence, conversation).record_id


def view(agent: DeviceAgent) -> View:
    return {v.record_id: (v.lifecycle, v.version) for v in agent.list_records()}


def cloud_view(cloud: RunningCloud, space_id: str, ids: set[str]) -> View:
    out = {}
    for record_id in ids:
        state = cloud.operator.record_status(space_id, record_id)
        out[record_id] = (state.lifecycle_state.value, state.version)
    return out
