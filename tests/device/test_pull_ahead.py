"""The next pulled page is fetched while this one is applied (``device.pull_ahead``).

Each test would fail if the fetch ahead stopped overlapping the apply, if a page that
failed to apply moved the cursor or lost a record for the next sync, if a one-page
sync started a thread, or if a fetch ahead's error were swallowed instead of met where
the loop would have met it."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from device import pull_ahead, store
from device import sync as sync_module
from device.agent import DeviceAgent
from device.errors import ResyncRequired
from device.pull_ahead import PagesAhead
from device.sync import SyncSession
from protocol.messages import PullResponse
from tests.device.conftest import MakeAgent
from tests.device.fake_cloud import FakeCloud
from tests.device.test_sync_page import SENTENCES as PAGE_SENTENCES

SENTENCES = [*PAGE_SENTENCES, "Our cat Bramble sleeps on the radiator all winter."]
PAGE = 3  # changes per pulled page in these tests: several pages per sync
WAIT = 30.0  # seconds a condition may take on a loaded machine (never slept through)


def _enrolled(make_agent: MakeAgent, cloud: FakeCloud, name: str, seed: int) -> DeviceAgent:
    agent = make_agent(name, seed=seed, cloud=cloud)
    agent.enroll(cloud.new_code())
    return agent


def _phone_with_records(make_agent: MakeAgent, cloud: FakeCloud) -> DeviceAgent:
    phone = _enrolled(make_agent, cloud, "phone", 1)
    for i, text in enumerate(SENTENCES):
        phone.say(text, f"c{i}")
        phone.remember(text, f"c{i}")
    phone.sync()
    return phone


def _texts(agent: DeviceAgent) -> list[str]:
    return sorted(r.text for r in agent.list_records())


class PullLog:
    """The cursor of every pull request the cloud saw, and a condition to wait on."""

    def __init__(self, cloud: FakeCloud) -> None:
        self.cursors: list[str | None] = []
        self.seen = threading.Condition()
        inner = cloud.transport.handler  # type: ignore[attr-defined]

        def handler(request: Any) -> Any:
            if request.url.path == "/v1/pull":
                with self.seen:
                    self.cursors.append(json.loads(request.content).get("cursor"))
                    self.seen.notify_all()
            return inner(request)

        cloud.transport.handler = handler  # type: ignore[attr-defined]

    def wait_for(self, cursor: str) -> bool:
        with self.seen:
            return self.seen.wait_for(lambda: cursor in self.cursors, timeout=WAIT)


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sync_module, "MAX_PULL_PAGE", PAGE)


def test_the_next_page_is_requested_while_this_one_is_applied(
    make_agent: MakeAgent, cloud: FakeCloud, small_pages: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    phone = _phone_with_records(make_agent, cloud)
    laptop = _enrolled(make_agent, cloud, "laptop", 2)
    log = PullLog(cloud)
    overlapped: list[bool] = []
    apply_page = SyncSession._apply_page

    def applying(self: SyncSession, page: PullResponse, *, resyncing: bool) -> None:
        if page.has_more:  # the request for the page after it is made before this commits
            overlapped.append(log.wait_for(page.cursor))
        apply_page(self, page, resyncing=resyncing)

    monkeypatch.setattr(SyncSession, "_apply_page", applying)
    report = laptop.sync()
    assert len(overlapped) >= 3 and all(overlapped), overlapped
    assert report.pulled > 3 * PAGE
    assert _texts(laptop) == _texts(phone)


def test_a_page_that_fails_to_apply_keeps_its_cursor_and_the_next_sync_brings_the_rest(
    make_agent: MakeAgent, cloud: FakeCloud, small_pages: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    phone = _phone_with_records(make_agent, cloud)
    laptop = _enrolled(make_agent, cloud, "laptop", 2)
    apply_page = SyncSession._apply_page
    applied: list[str] = []

    def failing_second(self: SyncSession, page: PullResponse, *, resyncing: bool) -> None:
        if len(applied) == 1:
            applied.append("failed")
            raise RuntimeError("the second page fails to apply")
        apply_page(self, page, resyncing=resyncing)
        applied.append(page.cursor)

    monkeypatch.setattr(SyncSession, "_apply_page", failing_second)
    with pytest.raises(RuntimeError, match="second page"):
        laptop.sync()
    # the page fetched ahead of the failed one was dropped: the cursor is the first page's
    assert store.get_meta(laptop._db).pull_cursor == applied[0]
    monkeypatch.setattr(SyncSession, "_apply_page", apply_page)
    laptop.sync()
    assert _texts(laptop) == _texts(phone)


def test_a_one_page_sync_starts_no_thread(
    make_agent: MakeAgent, cloud: FakeCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    phone = _phone_with_records(make_agent, cloud)
    laptop = _enrolled(make_agent, cloud, "laptop", 2)
    laptop.sync()
    phone.say("My train to Ostrava leaves at seven.", "c-new")
    phone.remember("My train to Ostrava leaves at seven.", "c-new")
    phone.sync()
    pools: list[object] = []
    real = pull_ahead.ThreadPoolExecutor

    def counting(*args: Any, **kwargs: Any) -> Any:
        pools.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(pull_ahead, "ThreadPoolExecutor", counting)
    report = laptop.sync()
    assert report.pulled > 0
    assert pools == []


def test_resync_required_for_the_page_fetched_ahead_starts_the_resync(
    make_agent: MakeAgent, cloud: FakeCloud, small_pages: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _phone_with_records(make_agent, cloud)
    laptop = _enrolled(make_agent, cloud, "laptop", 2)
    resyncs: list[str] = []

    def refused(self: SyncSession, cursor: str) -> PullResponse:
        raise ResyncRequired("resync_required", f"cursor {cursor} is below the floor", 409)

    monkeypatch.setattr(SyncSession, "_next_page", refused)
    monkeypatch.setattr(SyncSession, "resync", lambda self: resyncs.append("resync"))
    laptop.sync()
    assert resyncs == ["resync"]


def test_take_raises_the_fetch_error_and_close_drops_an_answer_in_flight() -> None:
    page = PullResponse(changes=[], cursor="c1", has_more=True)

    def refused(cursor: str) -> PullResponse:
        raise ResyncRequired("resync_required", cursor, 409)

    with PagesAhead(refused) as ahead:
        ahead.after(page)
        with pytest.raises(ResyncRequired, match="c1"):
            ahead.take()
    release = threading.Event()
    fetched: list[str] = []

    def slow(cursor: str) -> PullResponse:
        release.wait(WAIT)
        fetched.append(cursor)
        return page

    ahead = PagesAhead(slow)
    ahead.after(page)
    with pytest.raises(RuntimeError, match="already being fetched"):
        ahead.after(page)
    release.set()
    ahead.close()  # waits for the fetch in flight
    assert fetched == ["c1"]
    with pytest.raises(RuntimeError, match="no page"):
        ahead.take()
    last = PullResponse(changes=[], cursor="c2", has_more=False)
    ahead.after(last)  # nothing after the last page
    with pytest.raises(RuntimeError, match="no page"):
        ahead.take()
