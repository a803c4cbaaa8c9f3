"""``cloud.live``: waiting pulls woken by changes, in-process and across processes
(PostgreSQL LISTEN/NOTIFY), and the vector cache dropping what another process forgot."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloud.config import CloudConfig
from cloud.live import CHANNEL, ChangeNotifier, WaitOutcome, libpq_url
from cloud.service import CloudService
from protocol.messages import PullRequest
from tests.cloud.conftest import MASTER_KEY, SENTENCE, TYPED, Ops, applied, new_user, push

SPACE = "sp_aaaaaaaaaaaaaaaaaaaaaaaa"
OTHER = "sp_bbbbbbbbbbbbbbbbbbbbbbbb"
DEADLINE = 10.0  # seconds; generous: a lost wake-up would show as this timeout


class Feed:
    """A change feed position that the test moves."""

    def __init__(self) -> None:
        self.seq = 0
        self.reads = 0

    async def position(self) -> int:
        self.reads += 1
        return self.seq


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, DEADLINE + 5))


def _in_thread(fn: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=fn)
    thread.start()
    return thread


# --- in-process waking ---------------------------------------------------------------


def test_a_feed_already_past_the_cursor_answers_at_once() -> None:
    notifier, feed = ChangeNotifier(), Feed()
    feed.seq = 3
    assert run(notifier.wait(SPACE, "dev_a", 2, DEADLINE, feed.position)) is WaitOutcome.CHANGED
    assert notifier.waiting == 0


def test_a_change_between_the_check_and_the_wait_is_not_lost() -> None:
    """The commit lands right after the waiter read the old position: it subscribed
    first, so the commit's ``changed`` still wakes it (else it would time out)."""
    notifier, feed = ChangeNotifier(), Feed()

    async def position() -> int:
        seen = await feed.position()
        if feed.reads == 1:  # a push commits in a worker thread just after this read
            feed.seq = 1
            _in_thread(lambda: notifier.changed(SPACE)).join()
        return seen

    assert run(notifier.wait(SPACE, "dev_a", 0, DEADLINE, position)) is WaitOutcome.CHANGED
    assert feed.reads == 2


def test_a_commit_in_another_thread_wakes_the_waiter() -> None:
    notifier, feed = ChangeNotifier(), Feed()

    async def scenario() -> WaitOutcome:
        waiting = asyncio.create_task(notifier.wait(SPACE, "dev_a", 0, DEADLINE, feed.position))
        while notifier.waiting == 0:
            await asyncio.sleep(0)
        feed.seq = 1
        await asyncio.to_thread(notifier.changed, SPACE)
        return await waiting

    assert run(scenario()) is WaitOutcome.CHANGED


def test_a_change_to_another_space_only_makes_it_look_again() -> None:
    notifier, feed = ChangeNotifier(), Feed()

    async def scenario() -> WaitOutcome:
        waiting = asyncio.create_task(notifier.wait(SPACE, "dev_a", 0, DEADLINE, feed.position))
        while notifier.waiting == 0:
            await asyncio.sleep(0)
        notifier.changed(OTHER)
        notifier.changed(SPACE)  # woken, but the feed has not moved: it waits on
        while feed.reads < 2:
            await asyncio.sleep(0)
        assert not waiting.done()
        feed.seq = 1
        notifier.changed(SPACE)
        return await waiting

    assert run(scenario()) is WaitOutcome.CHANGED
    assert feed.reads == 3


def test_the_wait_times_out_on_the_injected_clock() -> None:
    ticks = iter([100.0, 100.2, 101.0])  # deadline 100.5: the second look is past it
    notifier, feed = ChangeNotifier(clock=lambda: next(ticks)), Feed()

    async def scenario() -> WaitOutcome:
        waiting = asyncio.create_task(notifier.wait(SPACE, "dev_a", 0, 0.5, feed.position))
        while notifier.waiting == 0:
            await asyncio.sleep(0)
        notifier.changed(SPACE)  # a look at an unchanged feed, after which time is up
        return await waiting

    assert run(scenario()) is WaitOutcome.TIMED_OUT
    assert notifier.waiting == 0


def test_the_wait_times_out_in_real_time() -> None:
    notifier, feed = ChangeNotifier(), Feed()
    assert run(notifier.wait(SPACE, "dev_a", 0, 0.05, feed.position)) is WaitOutcome.TIMED_OUT


def test_a_newer_pull_by_the_same_device_ends_the_older_wait() -> None:
    notifier, feed = ChangeNotifier(), Feed()

    async def scenario() -> tuple[WaitOutcome, WaitOutcome]:
        first = asyncio.create_task(notifier.wait(SPACE, "dev_a", 0, DEADLINE, feed.position))
        other = asyncio.create_task(notifier.wait(SPACE, "dev_b", 0, DEADLINE, feed.position))
        while notifier.waiting < 2:
            await asyncio.sleep(0)
        notifier.supersede(SPACE, "dev_a")
        ended = await first
        assert not other.done()  # another device's wait is untouched
        feed.seq = 1
        notifier.changed(SPACE)
        return ended, await other

    assert run(scenario()) == (WaitOutcome.SUPERSEDED, WaitOutcome.CHANGED)


def test_the_wait_ends_when_the_client_goes_away() -> None:
    notifier, feed = ChangeNotifier(), Feed()

    async def scenario() -> WaitOutcome:
        gone = asyncio.Event()
        waiting = asyncio.create_task(
            notifier.wait(SPACE, "dev_a", 0, DEADLINE, feed.position, gone.wait())
        )
        while notifier.waiting == 0:
            await asyncio.sleep(0)
        gone.set()
        return await waiting

    assert run(scenario()) is WaitOutcome.CANCELLED
    assert notifier.waiting == 0


def test_close_ends_every_wait() -> None:
    notifier, feed = ChangeNotifier(), Feed()

    async def scenario() -> list[WaitOutcome]:
        waits = [
            asyncio.create_task(notifier.wait(SPACE, f"dev_{n}", 0, DEADLINE, feed.position))
            for n in "ab"
        ]
        while notifier.waiting < 2:
            await asyncio.sleep(0)
        await asyncio.to_thread(notifier.close)
        return list(await asyncio.gather(*waits))

    assert run(scenario()) == [WaitOutcome.CLOSED, WaitOutcome.CLOSED]
    assert run(notifier.wait(SPACE, "dev_a", 0, DEADLINE, feed.position)) is WaitOutcome.CLOSED


def test_callbacks_hear_every_change_and_a_failing_one_is_contained() -> None:
    notifier = ChangeNotifier()
    heard: list[str | None] = []

    def broken(space_id: str | None) -> None:
        raise RuntimeError("a cache's trouble")

    notifier.on_change(broken)
    notifier.on_change(heard.append)
    notifier.changed(SPACE)
    notifier.wake_all()
    assert heard == [SPACE, None]


# --- the service: pushes announce, pulls wait ------------------------------------------


def test_a_push_that_moves_the_feed_wakes_a_waiting_pull(service: CloudService, ops: Ops) -> None:
    phone, laptop = new_user(service, "ada", "phone", "laptop")
    after = service.last_seq(phone.space_id)

    async def scenario() -> WaitOutcome:
        async def position() -> int:
            return await asyncio.to_thread(service.last_seq, phone.space_id)

        waiting = asyncio.create_task(
            service.live.wait(laptop.space_id, laptop.device_id, after, DEADLINE, position)
        )
        while service.live.waiting == 0:
            await asyncio.sleep(0)
        await asyncio.to_thread(
            lambda: applied(push(service, phone, ops.episode("ep_aaaaaaaaaaaaaaaa", TYPED, "c1")))
        )
        return await waiting

    assert run(scenario()) is WaitOutcome.CHANGED
    page = service.pull(laptop.space_id, laptop.device_id, PullRequest(cursor=None))
    assert [c.kind for c in page.changes] == ["episode"]


def test_a_push_that_changes_nothing_announces_nothing(service: CloudService, ops: Ops) -> None:
    (phone,) = new_user(service, "ada", "phone")
    episode = ops.episode("ep_aaaaaaaaaaaaaaaa", TYPED, "c1")
    applied(push(service, phone, episode))
    heard: list[str | None] = []
    service.live.on_change(heard.append)
    push(service, phone, episode)  # a replay: duplicate, no change row
    assert heard == []
    applied(push(service, phone, ops.episode("ep_bbbbbbbbbbbbbbbb", TYPED, "c2")))
    assert heard == [phone.space_id]


# --- PostgreSQL: NOTIFY on commit, the listener, and other processes' caches -----------


@pytest.fixture
def pg_url(postgres_database: Callable[[], str]) -> str:
    return postgres_database()


@pytest.fixture
def listening(pg_url: str) -> Iterator[tuple[ChangeNotifier, list[str | None], threading.Event]]:
    """A notifier listening on a PostgreSQL database, and what its callback heard."""
    notifier = ChangeNotifier(listen_url=pg_url)
    heard: list[str | None] = []
    cond = threading.Condition()
    connected = threading.Event()

    def record(space_id: str | None) -> None:
        with cond:
            heard.append(space_id)
            cond.notify_all()
        if space_id is None:
            connected.set()

    notifier.on_change(record)
    notifier.ensure_listening()
    assert connected.wait(DEADLINE), "the listener never connected"
    try:
        yield notifier, heard, connected
    finally:
        notifier.close()


def _until(predicate: Callable[[], bool]) -> bool:
    """Wait (up to the deadline) for a condition the listener thread makes true."""
    done = threading.Event()
    for _ in range(int(DEADLINE / 0.01)):
        if predicate():
            return True
        done.wait(0.01)
    return predicate()


@pytest.mark.postgres
def test_notify_is_delivered_only_when_the_transaction_commits(
    pg_url: str, listening: tuple[ChangeNotifier, list[str | None], threading.Event]
) -> None:
    notifier, heard, _ = listening
    with psycopg.connect(libpq_url(pg_url), autocommit=True) as conn:
        with conn.transaction():
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, SPACE))
            # a committed notification sent after it arrives, and this one has not
            with psycopg.connect(libpq_url(pg_url), autocommit=True) as other:
                other.execute("SELECT pg_notify(%s, %s)", (CHANNEL, OTHER))
            assert _until(lambda: OTHER in heard)
            assert SPACE not in heard
        assert _until(lambda: SPACE in heard)
        with conn.transaction():
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, "sp_rolled_back_aaaaaaaaa"))
            raise psycopg.Rollback()
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, SPACE))
    assert _until(lambda: heard.count(SPACE) == 2)
    assert "sp_rolled_back_aaaaaaaaa" not in heard
    assert notifier.listener is not None and notifier.listener.connections == 1


@pytest.mark.postgres
def test_the_listener_reconnects_after_its_connection_drops(
    pg_url: str, listening: tuple[ChangeNotifier, list[str | None], threading.Event]
) -> None:
    notifier, heard, connected = listening
    listener = notifier.listener
    assert listener is not None and listener.backend_pid is not None
    connected.clear()
    with psycopg.connect(libpq_url(pg_url), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (listener.backend_pid,))
        assert connected.wait(DEADLINE), "the listener did not reconnect"
        assert listener.connections == 2
        admin.execute("SELECT pg_notify(%s, %s)", (CHANNEL, SPACE))
    assert _until(lambda: SPACE in heard)


@pytest.mark.postgres
def test_close_stops_the_listener_thread(
    listening: tuple[ChangeNotifier, list[str | None], threading.Event],
) -> None:
    notifier, _, _ = listening
    listener = notifier.listener
    assert listener is not None
    notifier.close()
    assert not listener._thread.is_alive()
    assert not listener.connected.is_set()


def _two_processes(pg_url: str, tmp_path: Path) -> tuple[CloudService, CloudService]:
    config = CloudConfig(
        store_url=pg_url,
        key_store_path=tmp_path / "keys.db",
        master_key=MASTER_KEY,
        indexing="manual",  # the tests say which process indexes, and when
    )
    return CloudService(config), CloudService(config)


@pytest.mark.postgres
def test_a_push_in_one_process_wakes_a_pull_waiting_in_another(
    pg_url: str, tmp_path: Path, ops: Ops
) -> None:
    a, b = _two_processes(pg_url, tmp_path)
    try:
        phone, laptop = new_user(a, "ada", "phone", "laptop")
        after = b.last_seq(laptop.space_id)

        async def scenario() -> WaitOutcome:
            async def position() -> int:
                return await asyncio.to_thread(b.last_seq, laptop.space_id)

            waiting = asyncio.create_task(
                b.live.wait(laptop.space_id, laptop.device_id, after, DEADLINE, position)
            )
            while b.live.waiting == 0 or b.live.listener is None:
                await asyncio.sleep(0)
            listener = b.live.listener
            await asyncio.to_thread(listener.connected.wait, DEADLINE)
            await asyncio.to_thread(
                lambda: applied(push(a, phone, ops.episode("ep_aaaaaaaaaaaaaaaa", TYPED, "c1")))
            )
            return await waiting

        assert run(scenario()) is WaitOutcome.CHANGED
        assert a.live.listener is None  # a process that never waited never listened
    finally:
        a.close()
        b.close()


@pytest.mark.postgres
def test_a_forget_in_one_process_drops_the_vectors_another_process_cached(
    pg_url: str, tmp_path: Path, ops: Ops
) -> None:
    a, b = _two_processes(pg_url, tmp_path)
    try:
        (phone,) = new_user(a, "ada", "phone")
        space = phone.space_id
        record = "rec_aaaaaaaaaaaaaaaa"
        applied(
            push(
                a,
                phone,
                ops.episode("ep_aaaaaaaaaaaaaaaa", TYPED, "c1"),
                ops.remember(record, SENTENCE, ["ep_aaaaaaaaaaaaaaaa"], "c1"),
                ops.episode("ep_bbbbbbbbbbbbbbbb", "I drink tea every morning.", "c2"),
                ops.remember(
                    "rec_bbbbbbbbbbbbbbbb",
                    "I drink tea every morning.",
                    ["ep_bbbbbbbbbbbbbbbb"],
                    "c2",
                ),
            )
        )
        b.index_catch_up(space)
        assert set(b.search.vector_hits(space, "favorite number")) == {
            record,
            "rec_bbbbbbbbbbbbbbbb",
        }
        assert record in b.search._cache[space].ids  # process B holds its vector
        listener = b.live.listener
        assert listener is not None, "caching vectors starts the listener"
        assert listener.connected.wait(DEADLINE)

        applied(push(a, phone, ops.forget(record)))  # process A forgets it

        assert _until(lambda: record not in b.search._cache[space].ids)
        cached = b.search._cache[space]
        assert (record, 1) not in cached.packed
        assert cached.ids == ("rec_bbbbbbbbbbbbbbbb",)
        # the next query refreshes the incomplete cache and still finds the other record
        assert set(b.search.vector_hits(space, "tea")) == {"rec_bbbbbbbbbbbbbbbb"}
    finally:
        a.close()
        b.close()


def test_a_change_notice_drops_forgotten_vectors_without_opening_new_ones(
    tmp_path: Path, ops: Ops
) -> None:
    """What the notice does, on two services sharing one SQLite file (no NOTIFY there,
    so the test delivers the notice): B drops A's forgotten vector and opens nothing."""
    config = CloudConfig(
        store_url=f"sqlite:///{tmp_path / 'records.db'}",
        key_store_path=tmp_path / "keys.db",
        master_key=MASTER_KEY,
    )
    a, b = CloudService(config), CloudService(config)
    try:
        (phone,) = new_user(a, "ada", "phone")
        space, record, tea = phone.space_id, "rec_aaaaaaaaaaaaaaaa", "rec_bbbbbbbbbbbbbbbb"
        applied(
            push(
                a,
                phone,
                ops.episode("ep_aaaaaaaaaaaaaaaa", TYPED, "c1"),
                ops.remember(record, SENTENCE, ["ep_aaaaaaaaaaaaaaaa"], "c1"),
            )
        )
        b.index_catch_up(space)
        b.search.vector_hits(space, "favorite number")
        before = b.search._cache[space]
        assert before.ids == (record,)
        applied(
            push(
                a,
                phone,
                ops.episode("ep_bbbbbbbbbbbbbbbb", "I drink tea every morning.", "c2"),
                ops.remember(tea, "I drink tea every morning.", ["ep_bbbbbbbbbbbbbbbb"], "c2"),
            )
        )
        a.index_catch_up(space)  # A indexes the new record...
        applied(push(a, phone, ops.forget(record)))  # ...and forgets the old one
        assert b.search._cache[space] is before  # B heard nothing yet
        b.search.drop_unindexed(space)
        after = b.search._cache[space]
        assert after.ids == () and after.packed == {}  # dropped, and nothing new opened
        assert after.generation == before.generation  # marked incomplete
        b.search.drop_unindexed(space)  # a second notice for the same state: no work
        assert b.search._cache[space] is after
        assert set(b.search.vector_hits(space, "tea")) == {tea}  # a query refreshes it
    finally:
        a.close()
        b.close()


@settings(max_examples=60, deadline=None)
@given(
    spurious=st.integers(min_value=0, max_value=3),
    other_spaces=st.integers(min_value=0, max_value=3),
    commit_from_thread=st.booleans(),
)
def test_whatever_wakes_it_first_a_waiter_ends_exactly_when_its_feed_moves(
    spurious: int, other_spaces: int, commit_from_thread: bool
) -> None:
    """Rule: a waiter returns ``changed`` once its own space's feed moves, however many
    wake-ups (its space unchanged, other spaces) come first, and the commit may land
    right after any of its reads."""
    notifier, feed = ChangeNotifier(), Feed()
    commit_after_read = spurious + 1

    async def position() -> int:
        seen = await feed.position()
        if feed.reads == commit_after_read:
            feed.seq = 1  # committed just after this read: only the wake-up can tell
            if commit_from_thread:
                await asyncio.to_thread(notifier.changed, SPACE)
            else:
                notifier.changed(SPACE)
        return seen

    async def scenario() -> WaitOutcome:
        waiting = asyncio.create_task(notifier.wait(SPACE, "dev_a", 0, DEADLINE, position))
        for _ in range(other_spaces):
            while notifier.waiting == 0:
                await asyncio.sleep(0)
            notifier.changed(OTHER)
        reads = 0
        for _ in range(spurious):  # wake-ups while the feed has not moved
            while feed.reads == reads:
                await asyncio.sleep(0)
            reads = feed.reads
            notifier.changed(SPACE)
        return await waiting

    assert run(scenario()) is WaitOutcome.CHANGED
    assert feed.reads == commit_after_read + 1
    assert notifier.waiting == 0
