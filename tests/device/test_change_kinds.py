"""A pulled change of a kind this device does not know is refused loudly, naming the
kind and the change's seq, and the cursor does not move past it (issue 24 item 1).

Two seams: the wire (the fake cloud's page gains a change of a new kind, so the page
does not parse) and the interpreter (a page that parsed carries an object no case of
``SyncSession._apply_change`` matches). Either way nothing of the page is stored, and
the next sync with an ordinary page applies it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from device.agent import DeviceAgent
from device.errors import ServerError, UnknownChangeKind
from device.sync import SyncSession
from protocol.messages import PullResponse
from tests.device.conftest import MakeAgent
from tests.device.fake_cloud import FakeCloud

TYPED = "My favorite number is not 1729. I grew up in Duluth."


def _cursor(agent: DeviceAgent) -> Any:
    return agent._debug_db().one("SELECT pull_cursor FROM meta")[0]


def _written(make_agent: MakeAgent, cloud: FakeCloud) -> None:
    phone = make_agent("phone", seed=1, cloud=cloud)
    phone.enroll(cloud.new_code())
    phone.say(TYPED, "c1")
    phone.remember("I grew up in Duluth.", "c1")
    phone.sync()


def test_an_unknown_kind_on_the_wire_refuses_the_page(
    make_agent: MakeAgent, cloud: FakeCloud
) -> None:
    _written(make_agent, cloud)
    newer = {"on": True}

    def handle(request: httpx.Request) -> httpx.Response:
        response = cloud.handle(request)
        if request.url.path != "/v1/pull" or not newer["on"] or response.status_code != 200:
            return response
        body = json.loads(response.content)
        assert body["changes"], "the page must carry real changes before the new one"
        body["changes"].append({"kind": "retention_hint", "seq": 9001, "record_id": "rec_x"})
        return httpx.Response(200, json=body, headers=response.headers)

    cloud.transport = httpx.MockTransport(handle)
    laptop = make_agent("laptop", seed=2, cloud=cloud)
    laptop.enroll(cloud.new_code())
    with pytest.raises(UnknownChangeKind, match="seq 9001 is of kind 'retention_hint'") as caught:
        laptop.sync()
    assert (caught.value.kind, caught.value.seq) == ("retention_hint", 9001)
    assert isinstance(caught.value, ServerError)  # callers that caught ServerError still do
    assert _cursor(laptop) is None
    assert laptop.list_records() == []
    assert laptop._debug_db().all("SELECT * FROM episodes") == []

    newer["on"] = False
    laptop.sync()
    assert _cursor(laptop) is not None
    assert laptop.recall("duluth")


@dataclass(frozen=True)
class _RetentionHint:
    """A change kind from a future protocol that somehow parsed."""

    seq: int
    kind: str = "retention_hint"


def test_a_change_no_case_matches_refuses_the_page(
    make_agent: MakeAgent, cloud: FakeCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    _written(make_agent, cloud)
    laptop = make_agent("laptop", seed=2, cloud=cloud)
    laptop.enroll(cloud.new_code())
    real_pull = SyncSession._pull_page

    def pull_with_a_stranger(self: SyncSession, cursor: str | None) -> PullResponse:
        page = real_pull(self, cursor)
        assert page.changes
        last = page.changes[-1].seq
        # after every real change: the real ones are applied first, then refused with it
        return page.model_copy(update={"changes": [*page.changes, _RetentionHint(last + 1)]})

    monkeypatch.setattr(SyncSession, "_pull_page", pull_with_a_stranger)
    with pytest.raises(UnknownChangeKind, match="is of kind 'retention_hint'") as caught:
        laptop.sync()
    assert caught.value.seq is not None and caught.value.seq > 0
    assert _cursor(laptop) is None
    assert laptop.list_records() == []
    assert laptop._debug_db().all("SELECT * FROM episodes") == []
    assert laptop.data_key_ids() == set()

    monkeypatch.setattr(SyncSession, "_pull_page", real_pull)
    laptop.sync()
    assert _cursor(laptop) is not None
    assert laptop.recall("duluth")
