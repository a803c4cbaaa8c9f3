"""Each invariant check PASSes on a good state and FAILs, naming the culprit, on a
deliberately broken one. The states are real: devices and the cloud (uvicorn on
loopback) are driven through ``simulator.driver``; breakage is written straight into
the stores, the way a bug would leave them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from simulator import invariants
from simulator.pytest_plugin import Invariants
from simulator.report import Check
from simulator.sealed import SealedFleet
from simulator.trace import ConcurrentEdit, IssuedOp, StaleEdit
from simulator.walls import WallsDigest, _fold, compare, take_digest, walls_check

pytestmark = pytest.mark.e2e

KEPT = "My friend Kalomi lives in Lima."
FORGOTTEN = "My friend Rutevo keeps bees near Oslo."
CORRECTED = "My friend Kalomi moved to Quito last spring."


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def memsync_store(request: pytest.FixtureRequest) -> str:
    if request.param == "sqlite":
        return "sqlite"
    new_database: Callable[[], str] = request.getfixturevalue("postgres_database")
    return new_database()


@dataclass
class World:
    run: Invariants
    fleet: SealedFleet
    kept: str  # record id, corrected once, live everywhere
    forgotten: str  # record id, forgotten on the laptop, shredded everywhere


def _good_world(run: Invariants) -> World:
    fleet = run.fleet
    assert isinstance(fleet, SealedFleet)
    user = fleet.add_user("ada")
    phone, laptop = fleet.add_device(user, "phone"), fleet.add_device(user, "laptop")
    kept = run.remember(phone, KEPT)
    gone = run.remember(phone, FORGOTTEN)
    run.sync(phone)
    run.sync(laptop)
    run.correct(laptop, kept, CORRECTED)
    run.forget(laptop, gone)
    run.sync(laptop)
    run.sync(phone)
    run.sync(laptop)
    return World(run, fleet, kept, gone)


@pytest.fixture
def world(memsync_invariants: Invariants) -> World:
    return _good_world(memsync_invariants)


def _by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def _cloud_sql(world: World, sql: str, **params: object) -> None:
    with world.fleet.cloud.operator.store.engine.begin() as conn:
        conn.execute(text(sql), params)


def test_a_good_state_passes_every_check(world: World) -> None:
    checks = world.run.checks()
    assert [c.name for c in checks if not c.passed] == [], checks
    named = _by_name(checks)
    assert "2 device(s)" in named[invariants.CONVERGED].detail
    assert "1 forgotten record(s)" in named[invariants.FORGOTTEN_GONE].detail
    assert world.fleet.walls().passed


def test_converged_fails_naming_the_device_and_record(world: World) -> None:
    phone = world.fleet.users[next(iter(world.fleet.users))].devices[0]
    phone.agent._debug_db().execute(
        "UPDATE records SET lifecycle = 'not_in_use' WHERE record_id = ?", (world.kept,)
    )
    check = invariants.converged(world.fleet, world.run.trace)
    assert not check.passed
    assert f"ada-{world.fleet.run_id}/phone record {world.kept}" in check.detail
    assert "lifecycle not_in_use, cloud active" in check.detail


def test_converged_fails_when_a_device_still_queues_ops(world: World) -> None:
    phone = next(world.fleet.devices())
    phone.go_offline()
    world.run.remember(phone, "My friend Zegapo runs a bakery in Cork.")
    world.run.trace.synced(f"ada-{world.fleet.run_id}/phone", 99)  # claims it synced last
    check = invariants.converged(world.fleet, world.run.trace)
    assert not check.passed and re.search(r"/phone still queues \d+ op\(s\)", check.detail)


def test_an_acknowledged_op_missing_in_the_cloud_fails(world: World) -> None:
    correction = next(op for op in world.run.trace.issued if op.kind == "correct")
    assert invariants.no_acknowledged_op_lost(world.fleet, world.run.trace).passed
    _cloud_sql(world, "DELETE FROM applied_ops WHERE op_id = :op", op=correction.op_id)
    check = invariants.no_acknowledged_op_lost(world.fleet, world.run.trace)
    assert not check.passed
    assert f"op {correction.op_id}" in check.detail and "no receipt for it" in check.detail


def test_an_op_that_was_never_answered_fails(world: World) -> None:
    world.run.trace.issue(IssuedOp("op_never_sent", "ada/phone", "correct", world.kept, 7))
    check = invariants.no_acknowledged_op_lost(world.fleet, world.run.trace)
    assert not check.passed
    assert "op op_never_sent (correct of" in check.detail and "never answered" in check.detail


def test_an_effect_claimed_twice_fails(world: World) -> None:
    """Two applied ops answering for the same version: one effect applied twice."""
    correction = next(op for op in world.run.trace.issued if op.kind == "correct")
    _, receipt = world.run.trace.receipts[correction.op_id]
    space = world.fleet.users[next(iter(world.fleet.users))].space_id
    _cloud_sql(
        world,
        "INSERT INTO applied_ops (space_id, op_id, device_id, receipt, stored_at) "
        "SELECT space_id, 'op_replayed', device_id, receipt, stored_at FROM applied_ops "
        "WHERE space_id = :space AND op_id = :op",
        space=space,
        op=correction.op_id,
    )
    assert receipt.versions == [1, 2]
    check = invariants.applied_once(world.fleet, world.run.trace)
    assert not check.passed
    assert f"record {world.kept} v2: made by 2 ops" in check.detail


def test_a_version_no_op_answers_for_fails(world: World) -> None:
    correction = next(op for op in world.run.trace.issued if op.kind == "correct")
    _cloud_sql(world, "DELETE FROM applied_ops WHERE op_id = :op", op=correction.op_id)
    del world.run.trace.receipts[correction.op_id]
    for handle in world.fleet.devices():
        handle.agent._debug_db().execute(
            "DELETE FROM receipts WHERE op_id = ?", (correction.op_id,)
        )
    check = invariants.applied_once(world.fleet, world.run.trace)
    assert not check.passed
    assert f"record {world.kept}: version(s) [2] were made by no applied op" in check.detail


def test_forgotten_text_left_in_a_device_database_fails(world: World) -> None:
    laptop = list(world.fleet.devices())[1]
    db = laptop.agent._debug_db()
    db.execute("CREATE TABLE scratch_copy (t TEXT)")
    db.execute("INSERT INTO scratch_copy VALUES (?)", (FORGOTTEN,))
    check = invariants.forgotten_unreadable(world.fleet, world.run.trace)
    assert not check.passed
    assert f"ada-{world.fleet.run_id}/laptop: found" in check.detail
    assert f"{world.forgotten} v1 text" in check.detail and "decrypted" in check.detail


def test_a_forgotten_data_key_left_in_the_cloud_store_fails(world: World) -> None:
    key = next(v for k, v in world.run.trace.forgotten[world.forgotten].needles.items()
               if k.startswith("data key"))  # fmt: skip
    space = world.fleet.users[next(iter(world.fleet.users))].space_id
    _cloud_sql(world, "UPDATE spaces SET account_key = :k WHERE space_id = :s", k=key, s=space)
    check = invariants.forgotten_unreadable(world.fleet, world.run.trace)
    assert not check.passed and "cloud record store: found" in check.detail


def test_a_device_listed_pending_after_it_shredded_fails(world: World) -> None:
    assert invariants.pending_exact(world.fleet, world.run.trace).passed
    _cloud_sql(world, "UPDATE forget_pending SET acked_at = NULL")
    check = invariants.pending_exact(world.fleet, world.run.trace)
    assert not check.passed
    assert "at the end: the cloud lists" in check.detail
    assert f"pending for {world.forgotten}, but it holds nothing of it" in check.detail


def test_a_device_still_holding_a_forgotten_record_unlisted_fails(world: World) -> None:
    """The safety side, as sampled at each step of a run."""
    user = world.fleet.users[next(iter(world.fleet.users))]
    phone, laptop = user.devices
    third = world.run.remember(phone, "My friend Dovoxi plays the cello in Graz.")
    world.run.sync(phone)
    world.run.sync(laptop)
    phone.go_offline()
    world.run.forget(laptop, third)
    world.run.sync(laptop)
    assert invariants.sample_pending(world.fleet, world.run.trace, 1) == []
    _cloud_sql(world, "UPDATE forget_pending SET acked_at = CURRENT_TIMESTAMP")
    problems = invariants.sample_pending(world.fleet, world.run.trace, 2)
    assert problems == [
        f"step 2: ada-{world.fleet.run_id}/phone still holds record {third} but the cloud "
        "does not list it pending"
    ]
    assert not invariants.pending_exact(world.fleet, world.run.trace).passed


def test_conflicts_must_be_kept_and_flagged(world: World) -> None:
    """Two corrections of one record registered as a race: both are kept (the devices
    synced in between), so the check turns on the flag alone."""
    user = world.fleet.users[next(iter(world.fleet.users))]
    phone, laptop = user.devices
    first = world.run.correct(phone, world.kept, "My friend Kalomi teaches chess in Perth.")
    world.run.sync(phone)
    world.run.sync(laptop)
    second = world.run.correct(laptop, world.kept, "My friend Kalomi repairs bicycles in Graz.")
    world.run.sync(laptop)
    world.run.sync(phone)
    edit = ConcurrentEdit(
        world.kept,
        user.space_id,
        (
            (first.device, first.op_id, first.text or ""),
            (second.device, second.op_id, second.text or ""),
        ),
        3,
    )
    world.run.trace.concurrent.append(edit)
    check = invariants.conflicts_kept(world.fleet, world.run.trace)
    assert not check.passed
    assert f"record {world.kept}: concurrent corrections by" in check.detail
    assert "nothing flags the conflict" in check.detail
    _cloud_sql(
        world,
        "UPDATE records SET conflicts = :c WHERE record_id = :r",
        c=json.dumps([world.forgotten]),
        r=world.kept,
    )
    assert invariants.conflicts_kept(world.fleet, world.run.trace).passed


def test_concurrent_offline_corrections_are_kept_and_flagged(world: World) -> None:
    user = world.fleet.users[next(iter(world.fleet.users))]
    phone, laptop = user.devices
    world.run.concurrent_edit(
        phone,
        laptop,
        world.kept,
        ("My friend Kalomi grows tomatoes outside Nara.", "My friend Kalomi lives in Porto."),
    )
    world.run.sync_until_quiet()
    check = invariants.conflicts_kept(world.fleet, world.run.trace)
    assert check.passed, check.detail


def test_a_stale_edit_is_refused_and_resurrects_nothing(world: World) -> None:
    user = world.fleet.users[next(iter(world.fleet.users))]
    phone, laptop = user.devices
    third = world.run.remember(phone, "My friend Wahije runs a bakery in Tartu.")
    world.run.sync(phone)
    world.run.sync(laptop)
    edit = world.run.stale_edit(phone, laptop, third, "My friend Wahije moved to Cork.")
    assert edit is not None
    world.run.sync_until_quiet()
    check = invariants.stale_edits_refused(world.fleet, world.run.trace)
    assert check.passed, check.detail
    assert "1 offline edit(s)" in check.detail


def test_an_edit_applied_to_a_live_record_is_caught_as_a_resurrection(world: World) -> None:
    correction = next(op for op in world.run.trace.issued if op.kind == "correct")
    space = world.fleet.users[next(iter(world.fleet.users))].space_id
    world.run.trace.stale.append(
        StaleEdit(world.kept, space, correction.device, correction.op_id, 5)
    )
    check = invariants.stale_edits_refused(world.fleet, world.run.trace)
    assert not check.passed
    assert f"edit {correction.op_id} of forgotten record {world.kept} was APPLIED" in (check.detail)
    assert f"record {world.kept} came back in the cloud: active" in check.detail


def test_walls_fail_naming_the_space_and_table_that_changed(
    memsync_invariants: Invariants,
) -> None:
    fleet = memsync_invariants.fleet
    assert isinstance(fleet, SealedFleet)
    cloud = fleet.cloud
    other, _code = cloud.operator.add_user(f"bystander-{fleet.run_id}")
    fleet.walls_before = take_digest(cloud.operator)  # the bystander existed before the run
    _good_world(memsync_invariants)
    check = fleet.walls()
    assert check.passed and "1 other space(s) unchanged" in check.detail, check.detail
    with cloud.operator.store.engine.begin() as conn:
        conn.execute(
            text("UPDATE spaces SET next_seq = next_seq + 1 WHERE space_id = :s"), {"s": other}
        )
    check = fleet.walls()
    assert not check.passed
    assert f"space {other}, record store:spaces" in check.detail
    with cloud.operator.store.engine.begin() as conn:
        conn.execute(
            text("UPDATE spaces SET next_seq = next_seq - 1 WHERE space_id = :s"), {"s": other}
        )
    assert fleet.walls().passed
    cloud.operator.key_store.create_data_key(other)
    check = fleet.walls()
    assert not check.passed and f"space {other}, key store:data_keys" in check.detail
    # the fixture checks the walls again at teardown: put the key store back
    fleet.walls_before = take_digest(cloud.operator)


# --- the digest's rules, for any rows ------------------------------------------------

_rows = st.lists(
    st.tuples(
        st.sampled_from(["sp_a", "sp_b", "sp_c"]),
        st.sampled_from(["record store:records", "key store:data_keys"]),
        st.binary(min_size=1, max_size=8),
    ),
    max_size=12,
    unique_by=lambda r: r[2],
)


def _digest(rows: list[tuple[str, str, bytes]]) -> WallsDigest:
    return WallsDigest(_fold(iter((f"{s}\x00{t}", b) for s, t, b in rows)))


@settings(max_examples=200, deadline=None)
@given(rows=_rows, data=st.data())
def test_the_digest_ignores_row_order_and_names_any_changed_table(
    rows: list[tuple[str, str, bytes]], data: st.DataObject
) -> None:
    before = _digest(rows)
    shuffled = data.draw(st.permutations(rows))
    assert compare(before, _digest(shuffled), own=[]) == []
    if not rows:
        return
    i = data.draw(st.integers(0, len(rows) - 1))
    space, table, row = rows[i]
    changed = [*rows[:i], (space, table, row + b"!"), *rows[i + 1 :]]
    problems = compare(before, _digest(changed), own=[])
    assert len(problems) == 1 and problems[0].startswith(f"space {space}, {table}:")
    assert compare(before, _digest(changed), own=[space]) == []  # the run's own space
    check = walls_check(before, _digest(changed), own=[])
    assert not check.passed and space in check.detail


def test_forget_to_shred_is_timed_on_the_injected_clock(world: World) -> None:
    ticks = iter(range(100, 1000, 7))
    world.run.clock = lambda: float(next(ticks))
    user = world.fleet.users[next(iter(world.fleet.users))]
    phone, laptop = user.devices
    record = world.run.remember(phone, "My friend Xifuga repairs bicycles in Bergen.")
    world.run.sync(phone)
    world.run.sync(laptop)
    phone.go_offline()
    world.run.step = 4
    world.run.forget(laptop, record)
    world.run.sync(laptop)
    assert world.run.observe() == []  # committed at tick 100; the phone still holds it
    phone.go_online()
    world.run.step = 6
    world.run.sync(phone)
    world.run.observe()  # tick 107: nobody holds it any more
    timing = next(t for t in world.run.timings() if t.record_id == record)
    assert (timing.forgotten_step, timing.committed_step, timing.shredded_step) == (4, 4, 6)
    assert timing.seconds == 7.0
