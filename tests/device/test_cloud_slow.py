"""A slow cloud is not an unreachable one (issue 20): a read timeout on a request that
reached the cloud is ``CloudSlow`` (an ``Offline``), mapped once in ``device.client``;
a connection that never got there stays a plain ``Offline``. Nothing is lost either way.
"""

from __future__ import annotations

import pytest

from device.errors import CloudSlow, Offline
from tests.device.conftest import MakeAgent
from tests.device.fake_cloud import FakeCloud
from tests.device.test_sync import TYPED, enrolled


def test_a_read_timeout_is_slow_and_the_push_it_lost_is_recognised(
    make_agent: MakeAgent, cloud: FakeCloud
) -> None:
    phone = enrolled(make_agent, cloud)
    phone.say(TYPED, "c1")
    phone.remember("I grew up in Duluth.", "c1")
    queued = phone.pending_ops()
    cloud.fail_after.append("/v1/push")  # the cloud commits; its answer does not come
    with pytest.raises(CloudSlow) as slow:
        phone.sync()
    assert isinstance(slow.value, Offline)
    message = str(slow.value)
    assert "is slow" in message and "POST /v1/push" in message
    assert "nothing was lost" in message and "cannot reach" not in message
    assert slow.value.path == "/v1/push" and slow.value.timeout == 10.0
    assert phone.pending_ops() == queued  # kept until a receipt is stored
    report = phone.sync()
    assert report.duplicates == queued and phone.pending_ops() == 0


def test_a_connection_that_never_got_there_is_offline_not_slow(
    make_agent: MakeAgent, cloud: FakeCloud
) -> None:
    phone = enrolled(make_agent, cloud)
    phone.say(TYPED, "c1")
    cloud.fail_before.append("/v1/push")
    with pytest.raises(Offline, match="cannot reach the cloud") as offline:
        phone.sync()
    assert not isinstance(offline.value, CloudSlow)
