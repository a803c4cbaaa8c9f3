"""Compaction of the change feed and the resync answer, on every record store.

Compaction deletes only rows that carry nothing any more; it never drops a key
destruction that a registered, unrevoked device holding the content has not
acknowledged. A pull whose cursor is below the feed floor is answered
``resync_required`` and changes nothing; a cursor-less pull is never refused.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cloud.cli import config_from_args, register
from cloud.errors import NotFound, ResyncRequired
from cloud.service import CloudService, decode_cursor, encode_cursor
from cloud.store import schema as t
from protocol.messages import AckRequest, KeyDestruction, PullRequest
from protocol.model import LifecycleState
from tests.cloud.conftest import (
    SENTENCE,
    TYPED,
    Device,
    Feed,
    Ops,
    applied,
    enroll,
    feed,
    new_user,
    pull_all,
    push,
)

OTHER = "I drink tea every morning."


def _feed_kinds(service: CloudService, space_id: str) -> list[tuple[int, str]]:
    with service.store.session(space_id) as s:
        return [(row.seq, row.kind) for row in s.changes_after(space_id, 0, 1_000_000)]


def _destructions_in_feed(service: CloudService, space_id: str) -> set[int]:
    with service.store.session(space_id) as s:
        rows = s.changes_after(space_id, 0, 1_000_000)
    return {row.event_id for row in rows if row.kind == "key_destruction" and row.event_id}


def _ack_all(service: CloudService, device: Device) -> list[int]:
    with service.store.session(device.space_id) as s:
        unacked = s.unacked_events(device.space_id, device.device_id)
    service.ack(device.space_id, device.device_id, AckRequest(event_ids=unacked))
    return unacked


def _cursor_after_full_pull(service: CloudService, device: Device) -> str:
    cursor: str | None = None
    while True:
        page = service.pull(device.space_id, device.device_id, PullRequest(cursor=cursor))
        cursor = page.cursor
        if not page.has_more:
            return cursor


def _view(f: Feed) -> dict[str, Any]:
    """What a device ends up holding from a full pull (the order of rows aside)."""
    return {
        "versions": {k: v.text for k, v in f.versions.items()},
        "states": {
            rid: (s.lifecycle_state, s.current_version, s.usage_restriction)
            for rid, s in f.states.items()
        },
        "episodes": {k: v.text for k, v in f.episodes.items()},
        "artifacts": {k: (parents, a.payload) for k, (parents, a) in f.artifacts.items()},
        "projects": f.projects,
        "destroyed": sorted(d.event_id for d in f.destroyed),
    }


def _busy_space(service: CloudService, ops: Ops) -> tuple[Device, Device, dict[str, str]]:
    """A space with corrections, state changes, projects, an artifact and a forget."""
    phone, laptop = new_user(service, "alice", "phone", "laptop")
    ids = {"kept": "rec_aaaaaaaa01", "gone": "rec_aaaaaaaa02", "ep": "ep_aaaaaaaa01"}
    applied(
        push(
            service,
            phone,
            ops.episode(ids["ep"], TYPED),
            ops.remember(ids["kept"], SENTENCE, [ids["ep"]]),
            ops.episode("ep_aaaaaaaa02", OTHER, "conv-2"),
            ops.remember(ids["gone"], OTHER, ["ep_aaaaaaaa02"], "conv-2"),
            ops.artifact("art_aaaaaaaa01", [ids["gone"]], "A summary of the tea."),
            ops.project("garden"),
        )
    )
    applied(
        push(
            service,
            phone,
            ops.simple("dont_use", ids["kept"]),
            ops.simple("use_again", ids["kept"]),
            ops.simple("restrict_usage", ids["kept"], restriction={"area": "work"}),
            ops.project("garden", open=False),
            ops.project("garden", open=True),
        )
    )
    pull_all(service, laptop)  # the laptop holds everything, the tea record included
    _ack_all(service, phone)
    applied(push(service, phone, ops.forget(ids["gone"])))
    _ack_all(service, phone)  # the phone shredded it; the laptop has not heard yet
    return phone, laptop, ids


# --- what compaction deletes and keeps -------------------------------------------------


def test_compaction_deletes_only_rows_that_carry_nothing(service: CloudService, ops: Ops) -> None:
    phone, laptop, ids = _busy_space(service, ops)
    space = phone.space_id
    before = _view(feed(service, phone))
    rows_before = _feed_kinds(service, space)

    report = service.compact(space)

    deleted = dict(report.deleted)
    # superseded states: the kept record's three older states, the forgotten one's state;
    # two older project changes; the forgotten record's version, episode and artifact
    assert deleted == {
        "artifact": 1,
        "episode": 1,
        "project": 2,
        "record_state": 4,
        "record_version": 1,
    }
    # the laptop held the tea record and has not acknowledged its destruction
    assert report.kept_destructions == 1
    assert _destructions_in_feed(service, space) == {
        seq for seq, kind in rows_before if kind == "key_destruction"
    }
    assert report.remaining == len(rows_before) - report.total_deleted
    assert report.previous_floor == 0
    deleted_seqs = {seq for seq, _ in rows_before} - {seq for seq, _ in _feed_kinds(service, space)}
    assert report.floor == max(deleted_seqs)
    # what a device learns from a full pull is exactly what it learned before
    assert _view(feed(service, phone)) == before
    # forget events, skeletons and pending rows are untouched
    assert _pending_devices(service, space) == {ids["gone"]: {laptop.device_id}}
    status = service.record_status(space, ids["gone"])
    assert status.lifecycle_state is LifecycleState.FORGOTTEN

    # once the laptop acknowledges, its key destruction goes too
    pull_all(service, laptop)
    assert _ack_all(service, laptop)
    again = service.compact(space)
    assert dict(again.deleted) == {"key_destruction": 1}
    assert again.kept_destructions == 0 and again.floor > report.floor
    assert _destructions_in_feed(service, space) == set()
    assert service.compact(space).total_deleted == 0  # idempotent


def _pending_devices(service: CloudService, space_id: str) -> dict[str | None, set[str]]:
    return {
        f.record_id: {d.device_id for d in f.pending} for f in service.pending(space_id).forgets
    }


def test_compaction_touches_nothing_outside_the_feed(service: CloudService, ops: Ops) -> None:
    phone, _laptop, _ids = _busy_space(service, ops)
    (other,) = new_user(service, "bob", "tablet")
    applied(push(service, other, ops.episode("ep_bbbbbbbb01", TYPED), ops.project("bees")))
    applied(push(service, other, ops.project("bees", open=False)))
    untouched = [
        t.forget_events,
        t.forget_keys,
        t.forget_pending,
        t.records,
        t.record_versions,
        t.episodes,
        t.artifacts,
        t.applied_ops,
        t.record_events,
        t.holdings,
        t.devices,
    ]

    def dump() -> dict[str, list[Any]]:
        with service.store.engine.connect() as conn:
            out = {
                table.name: sorted(map(tuple, conn.execute(table.select()).all()), key=repr)
                for table in untouched
            }
            out["bob's changes"] = sorted(
                map(
                    tuple,
                    conn.execute(
                        t.changes.select().where(t.changes.c.space_id == other.space_id)
                    ).all(),
                ),
                key=repr,
            )
        return out

    before = dump()
    service.compact(phone.space_id)
    assert dump() == before


def test_compacting_an_unknown_space_names_it(service: CloudService) -> None:
    with pytest.raises(NotFound, match="sp_doesnotexist01"):
        service.compact("sp_doesnotexist01")


# --- resync ----------------------------------------------------------------------------


def test_a_cursor_below_the_floor_gets_resync_required_and_changes_nothing(
    service: CloudService, ops: Ops
) -> None:
    phone, laptop, _ids = _busy_space(service, ops)
    space = phone.space_id
    behind = encode_cursor(3)  # a cursor issued early on (before the corrections)
    report = service.compact(space)
    assert report.floor > 3

    def state() -> dict[str, Any]:
        with service.store.engine.connect() as conn:
            return {
                table.name: sorted(map(tuple, conn.execute(table.select()).all()), key=repr)
                for table in (t.devices, t.holdings, t.forget_pending, t.changes, t.spaces)
            }

    before = state()
    with pytest.raises(ResyncRequired) as refused:
        service.pull(space, laptop.device_id, PullRequest(cursor=behind))
    message = str(refused.value)
    assert behind in message and f"seq {report.floor}" in message and "seq 3" in message
    assert refused.value.status == 410 and refused.value.code is not None
    assert refused.value.code.value == "resync_required"
    assert state() == before  # nothing changed: no holdings, not even last_seen

    # a cursor at the floor or above, and a cursor-less pull, are answered as usual
    at_floor = encode_cursor(report.floor)
    service.pull(space, laptop.device_id, PullRequest(cursor=at_floor))
    changes = pull_all(service, laptop)
    assert any(isinstance(c, KeyDestruction) for c in changes)
    service.pull(space, laptop.device_id, PullRequest(cursor=encode_cursor(0)))


def test_a_new_device_still_gets_everything_after_compaction(
    service: CloudService, ops: Ops
) -> None:
    phone, laptop, ids = _busy_space(service, ops)
    space = phone.space_id
    pull_all(service, laptop)
    _ack_all(service, laptop)
    seen_before = _view(feed(service, phone))
    report = service.compact(space)
    assert dict(report.deleted).get("key_destruction") == 1

    tablet = enroll(service, service.new_enrollment_code(space), "tablet")
    got = _view(feed(service, tablet))
    expected = {**seen_before, "destroyed": []}  # no device still needs that event
    assert got == expected
    assert ids["gone"] not in got["states"] and (ids["gone"], 1) not in got["versions"]
    assert got["states"][ids["kept"]][0] is LifecycleState.ACTIVE
    assert got["projects"] == {"garden": True}
    # the new device's cursor is at or above the floor, so its next pull is incremental
    cursor = _cursor_after_full_pull(service, tablet)
    assert decode_cursor(cursor) >= report.floor
    service.pull(space, tablet.device_id, PullRequest(cursor=cursor))


# --- the rule, over random histories ------------------------------------------------------

_DEVICES = 3
_who = st.integers(0, _DEVICES - 1)
_remember = st.tuples(st.just("remember"), _who)
_forget = st.tuples(st.just("forget"), _who, st.integers(0, 7))
_ack = st.tuples(st.just("ack"), _who, st.integers(0, 2**16))
# weighted towards histories that forget, acknowledge and compact
_step = st.one_of(
    _remember,
    _remember,
    _forget,
    _forget,
    _ack,
    _ack,
    st.tuples(st.just("pull"), _who),
    st.tuples(st.just("revoke"), _who),
    st.tuples(st.just("compact")),
)
_users = itertools.count()


def _check_compaction_rule(service: CloudService, devices: list[Device], revoked: set[int]) -> None:
    space = devices[0].space_id
    before = _destructions_in_feed(service, space)
    report = service.compact(space)
    after = _destructions_in_feed(service, space)
    assert after <= before
    with service.store.session(space) as s:
        owed = {
            i: set(s.unacked_events(space, d.device_id))
            for i, d in enumerate(devices)
            if i not in revoked
        }
    # every registered, unrevoked device's unacknowledged events are still in the feed
    for i, events in owed.items():
        assert events <= after, (i, events - after)
    # ... and every key destruction no such device owes is gone
    still_owed: set[int] = set().union(*owed.values())
    assert after == before & still_owed
    assert report.kept_destructions == len(after)
    if before - after:
        event("compaction deleted an acknowledged key destruction")
    if after:
        event("compaction kept an unacknowledged key destruction")
    if revoked and before - after:
        event("... with a revoked device among the holders")
    for event_id in before - after:  # a deleted event's seq is at or below the floor
        assert event_id <= report.floor


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(_step, min_size=4, max_size=30))
def test_compaction_never_drops_a_destruction_a_live_device_has_not_acked(
    service: CloudService, ops: Ops, steps: list[tuple[Any, ...]]
) -> None:
    devices = new_user(service, f"user{next(_users)}", *(f"d{i}" for i in range(_DEVICES)))
    space = devices[0].space_id
    revoked: set[int] = set()
    live: list[str] = []
    made = itertools.count(1)
    for step in steps:
        kind, who = step[0], step[1] if len(step) > 1 else 0
        device = devices[who]
        if kind == "compact":
            _check_compaction_rule(service, devices, revoked)
        elif who in revoked:
            continue
        elif kind == "remember":
            if _owes(service, device):
                continue  # its push would be refused pull_required
            n = next(made)
            episode, record = f"ep_h{n:09d}", f"rec_h{n:09d}"
            applied(
                push(
                    service,
                    device,
                    ops.episode(episode, TYPED, f"c{n}"),
                    ops.remember(record, SENTENCE, [episode], f"c{n}"),
                )
            )
            live.append(record)
        elif kind == "pull":
            pull_all(service, device)
        elif kind == "forget" and live:
            record = live.pop(step[2] % len(live))
            pull_all(service, device)
            _ack_all(service, device)
            applied(push(service, device, ops.forget(record)))
        elif kind == "ack":
            with service.store.session(space) as s:
                unacked = s.unacked_events(space, device.device_id)
            chosen = [e for bit, e in enumerate(unacked) if step[2] >> (bit % 16) & 1]
            service.ack(space, device.device_id, AckRequest(event_ids=chosen))
        elif kind == "revoke":
            service.revoke_device(space, device.device_id)
            revoked.add(who)
    _check_compaction_rule(service, devices, revoked)


def _owes(service: CloudService, device: Device) -> bool:
    with service.store.session(device.space_id) as s:
        return bool(s.unacked_events(device.space_id, device.device_id))


# --- the CLI -------------------------------------------------------------------------


def test_cli_compact_reports_what_it_did(
    store_url: str,
    tmp_path: Path,
    ops: Ops,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MEMSYNC_MASTER_KEY", raising=False)
    keys = tmp_path / "cli" / "keys.db"
    where = ["--store", store_url, "--keys", str(keys)]
    service = CloudService(config_from_args(_parse(["cloud", "pending", "--user", "x", *where])))
    try:
        phone, _laptop, _ids = _busy_space(service, ops)
    finally:
        service.close()

    assert _run(["cloud", "compact", "--user", "alice", "--json", *where]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["space_id"] == phone.space_id
    assert done["deleted"]["record_state"] == 4 and done["kept_key_destructions"] == 1
    assert done["previous_floor"] == 0 and done["floor"] > 0

    assert _run(["cloud", "compact", "--user", "alice", *where]) == 0
    shown = capsys.readouterr().out
    assert "deleted:   nothing" in shown and f"-> {done['floor']}" in shown

    assert _run(["cloud", "compact", "--user", "nobody", *where]) == 1
    assert "no user or space named 'nobody'" in capsys.readouterr().err


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="memsync")
    register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def _run(argv: list[str]) -> int:
    args = _parse(argv)
    code: int = args.func(args)
    return code
