"""The end of an account on the device: when the cloud says the account ended (410
``account_ended``) the device wipes its whole copy, queued changes included, confirms it
and raises ``AccountEnded``; ``delete_account`` proves the account passphrase and does
the same; a closing service's notice reaches the sync report, and a push the closed
service refuses (503) leaves the queue as it was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from device import cli
from device.errors import AccountEnded, DeviceRevoked, Refused
from protocol import strongauth
from protocol.messages import (
    CLOSING_HEADER,
    DeleteAccountRequest,
    DeleteAccountResponse,
    ErrorBody,
    ErrorCode,
    PendingDevice,
    WipedResponse,
)
from tests.device.conftest import PASSPHRASE, MakeAgent
from tests.device.fake_cloud import NOW, FakeCloud
from tests.device.sqlcipher_pages import decrypted_pages, index_needles
from tests.device.test_memory_ops import told

ACCOUNT = "the account passphrase, long enough"
WORD = b"Quokkamarmalade"
NOTICE = "closes_at=2027-03-01T00:00:00Z; export_until=2027-04-01T00:00:00Z"


def _error(status: int, code: ErrorCode, message: str) -> httpx.Response:
    return httpx.Response(status, content=ErrorBody(code=code, message=message).model_dump_json())


class EndingCloud:
    """The fake cloud behind a switch: ``ended`` (every route 410 but ``/v1/wiped``),
    ``closing`` (every answer carries the notice), ``closed`` (pushes answer 503), and
    ``POST /v1/account/delete`` checked against the registered account key."""

    def __init__(self, cloud: FakeCloud) -> None:
        self.cloud = cloud
        self.ended: str | None = None
        self.closing = False
        self.closed = False
        self.wiped: list[str] = []
        self.wipe_fails = 0
        self.transport = httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        response = self._answer(request, path)
        if self.closing:
            response.headers[CLOSING_HEADER] = NOTICE
        return response

    def _answer(self, request: httpx.Request, path: str) -> httpx.Response:
        credential = request.headers.get("authorization", "").removeprefix("Bearer ")
        device = self.cloud.devices.get(credential)
        if path == "/v1/wiped" and device is not None and self.ended is not None:
            if self.wipe_fails:
                self.wipe_fails -= 1
                raise httpx.ConnectError("wipe confirmation lost (simulated)", request=request)
            self.wiped.append(device.device_id)
            return httpx.Response(
                200,
                content=WipedResponse(device_id=device.device_id, wiped_at=NOW).model_dump_json(),
            )
        if self.ended is not None and path != "/v1/enroll":
            return _error(410, ErrorCode.ACCOUNT_ENDED, self.ended)
        if path == "/v1/push" and self.closed:
            return _error(503, ErrorCode.SERVICE_CLOSED, "the memsync service closed at X")
        if path == "/v1/account/delete" and device is not None:
            return self._delete(json.loads(request.content), device.device_id)
        return self.cloud.handle(request)

    def _delete(self, body: dict[str, Any], device_id: str) -> httpx.Response:
        request = DeleteAccountRequest.model_validate(body)
        key = self.cloud.ledger.account_key
        space = self.cloud.space_id
        if key is None or not strongauth.verify_delete_account(
            key, request.proof, space, request.request_id
        ):
            return _error(403, ErrorCode.STRONG_AUTH_REQUIRED, "the proof does not verify")
        self.ended = f"the account of space {space} ended at {NOW.isoformat()}: deleted"
        pending = [
            PendingDevice(device_id=d.device_id, device_name=d.name)
            for d in self.cloud.devices.values()
        ]
        answer = DeleteAccountResponse(space_id=space, ended_at=NOW, pending=pending)
        return httpx.Response(200, content=answer.model_dump_json())


@pytest.fixture
def ending(cloud: FakeCloud) -> EndingCloud:
    return EndingCloud(cloud)


def _agent(make_agent: MakeAgent, ending: EndingCloud, name: str = "phone", seed: int = 1) -> Any:
    agent = make_agent(name, seed=seed, cloud=ending)
    agent.enroll(ending.cloud.new_code(), account_passphrase=ACCOUNT)
    return agent


def _credential(agent: Any) -> str | None:
    row = agent._debug_db().one("SELECT credential FROM meta")
    return None if row[0] is None else str(row[0])


def test_an_ended_account_wipes_the_copy_and_its_queue(
    make_agent: MakeAgent, ending: EndingCloud
) -> None:
    agent = _agent(make_agent, ending)
    text = f"I hide the {WORD.decode()} jar behind the flour."
    synced = told(agent, text)
    agent.sync()
    queued = told(agent, "My favourite colour is teal.")  # queued, never sent
    assert agent.pending_ops() > 0
    needles = [
        *agent.data_keys_for(synced),
        *agent.data_keys_for(queued),
        *index_needles(agent._debug_db(), text, [synced]),
    ]
    pages = decrypted_pages(agent.db_path, PASSPHRASE)
    assert all(any(n in page for page in pages) for n in needles)  # positive control
    space = agent.space_id
    ending.ended = f"the account of space {space} ended at 2026-03-02T12:00:00+00:00: deleted"

    with pytest.raises(AccountEnded) as info:
        agent.sync()

    message = str(info.value)
    assert f"space {space} ended at 2026-03-02" in message and "deleted" in message
    assert "queued change(s) never sent" in message and "the cloud was told" in message
    assert agent.list_records() == [] and agent.pending_ops() == 0
    assert agent.data_key_ids() == set()
    assert ending.wiped == [agent.device_id] and _credential(agent) is None
    pages = decrypted_pages(agent.db_path, PASSPHRASE)
    assert not any(n in page for n in needles for page in pages)
    assert not isinstance(info.value, DeviceRevoked)


def test_a_lost_wipe_confirmation_is_sent_at_the_next_call(
    make_agent: MakeAgent, ending: EndingCloud
) -> None:
    agent = _agent(make_agent, ending)
    told(agent, "I like tea.")
    agent.sync()
    ending.ended = "the account of space x ended: the service shut down"
    ending.wipe_fails = 1
    with pytest.raises(AccountEnded, match="could not be told yet"):
        agent.sync()
    assert agent.list_records() == [] and _credential(agent) is not None
    with pytest.raises(AccountEnded, match="the cloud was told"):
        agent.retrieve_from_cloud("tea")
    assert ending.wiped == [agent.device_id] and _credential(agent) is None


def test_deleting_the_account_from_the_device(make_agent: MakeAgent, ending: EndingCloud) -> None:
    phone = _agent(make_agent, ending)
    laptop = _agent(make_agent, ending, "laptop", seed=2)
    told(phone, "I like tea.")
    phone.sync()
    told(phone, "I like coffee.")  # queued
    sent = len(ending.cloud.requests)
    with pytest.raises(Refused, match="account passphrase is wrong"):
        phone.delete_account("not the passphrase")
    assert len(ending.cloud.requests) == sent and ending.ended is None  # nothing sent
    assert phone.pending_ops() > 0 and len(phone.list_records()) == 2

    result = phone.delete_account(ACCOUNT)

    assert result.space_id == phone.space_id and result.ended_at == NOW.isoformat()
    assert result.wiped_records == 2 and result.wiped_queued > 0 and result.confirmed
    assert result.pending == ((laptop.device_id, "laptop"),)
    assert phone.list_records() == [] and phone.pending_ops() == 0
    assert ending.wiped == [phone.device_id]
    # the laptop hears it when it next reaches the cloud
    with pytest.raises(AccountEnded, match="deleted"):
        laptop.sync()
    assert laptop.list_records() == [] and ending.wiped == [phone.device_id, laptop.device_id]


def test_a_closing_service_is_reported_and_a_closed_one_holds_the_queue(
    make_agent: MakeAgent, ending: EndingCloud
) -> None:
    agent = _agent(make_agent, ending)
    told(agent, "I like tea.")
    assert agent.sync().closing is None and agent.closing_notice is None
    ending.closing = True
    told(agent, "I like coffee.")
    report = agent.sync()
    assert report.closing == NOTICE and agent.closing_notice == NOTICE
    assert report.push_held is None and agent.pending_ops() == 0

    ending.closed = True
    told(agent, "I like cocoa.")
    queued = agent.pending_ops()
    report = agent.sync()
    assert report.push_held is not None and "closed" in report.push_held
    assert report.pushed == 0 and agent.pending_ops() == queued  # the queue stays
    assert report.closing == NOTICE


def test_the_cli_deletes_an_account_only_with_yes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMSYNC_PASSPHRASE", "cli pass'phrase")
    monkeypatch.setenv("MEMSYNC_ACCOUNT_PASSPHRASE", ACCOUNT)
    monkeypatch.setenv("MEMSYNC_DEVICE_DIR", str(tmp_path / "dev"))
    assert cli.main(["device", "init", "--name", "phone"]) == 0
    capsys.readouterr()
    assert cli.main(["device", "delete-account"]) == 2
    err = capsys.readouterr().err
    assert "cannot be undone" in err and "--yes" in err and "Traceback" not in err
    assert cli.main(["device", "delete-account", "--yes"]) == 2
    assert "not enrolled" in capsys.readouterr().err


def test_the_closing_notice_reads_as_a_sentence() -> None:
    text = cli.closing_notice(NOTICE)
    assert "closes on 2027-03-01T00:00:00+00:00" in text
    assert "export stays open until 2027-04-01T00:00:00+00:00" in text
    assert "unreadable" in text
    assert "not a header" in cli.closing_notice("not a header")
