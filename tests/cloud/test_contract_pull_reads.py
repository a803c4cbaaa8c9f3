"""The store reads a pull page makes set-at-a-time (issue 21), run against every record
store: each many-at-once read answers what its one-at-a-time read answers, for every id
it is given, missing ones absent, and its IN-lists are chunked so no statement passes
SQLite's bound-parameter limit however many ids a page names.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from cloud.service import CloudService
from tests.cloud.conftest import SENTENCE, TYPED, Ops, applied, new_user, push

MANY = 1_100  # ids past two whole chunks of 500 (or of 250 pairs)


@contextmanager
def _statements(service: CloudService) -> Iterator[list[str]]:
    seen: list[str] = []

    def note(*args: Any) -> None:
        seen.append(args[2])

    event.listen(service.store.engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(service.store.engine, "before_cursor_execute", note)


def _space(service: CloudService, ops: Ops, forget: bool = True) -> tuple[str, str]:
    """A space with three versions, two artifacts (one of two parents) and, unless told,
    a forget of one record; (its id, its device's id)."""
    (phone,) = new_user(service, "ada", "phone")
    applied(
        push(
            service,
            phone,
            ops.episode("ep_00000001", TYPED),
            ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_00000001"]),
            ops.remember("rec_bbbbbbbb01", "I drink tea every morning.", ["ep_00000001"]),
            ops.correct("rec_bbbbbbbb01", "I drink tea every morning.", ["ep_00000001"]),
            ops.artifact("art_aaaaaaaa01", ["rec_bbbbbbbb01", "rec_aaaaaaaa01"], "x"),
            ops.artifact("art_aaaaaaaa02", ["rec_bbbbbbbb01"], "y"),
        )
    )
    (other,) = new_user(service, "bob", "phone")
    applied(push(service, other, ops.episode("ep_00000009", TYPED)))
    if forget:
        applied(push(service, phone, ops.forget("rec_aaaaaaaa01")))
    return phone.space_id, phone.device_id


def test_version_rows_answers_what_version_answers(service: CloudService, ops: Ops) -> None:
    sp, _ = _space(service, ops)
    real = [("rec_aaaaaaaa01", 1), ("rec_bbbbbbbb01", 1), ("rec_bbbbbbbb01", 2)]
    asked = real + [("rec_bbbbbbbb01", 3)] + [(f"rec_zz{i:08d}", 1) for i in range(MANY)]
    with service.store.session() as s:
        expected = {key: s.version(sp, *key) for key in real}
        with _statements(service) as seen:
            got = s.version_rows(sp, asked)
        assert got == expected and None not in expected.values()
        assert len(seen) == -(-len(asked) // 250)  # 250 pairs (500 parameters) a statement
        assert s.version_rows("sp_nobodynobodynobodynobod", real) == {}
        assert s.version_rows(sp, []) == {}


def test_parents_of_many_answers_what_parents_of_answers(service: CloudService, ops: Ops) -> None:
    sp, _ = _space(service, ops, forget=False)
    ids = ["art_aaaaaaaa01", "art_aaaaaaaa02"] + [f"art_zz{i:08d}" for i in range(MANY)]
    with service.store.session() as s:
        with _statements(service) as seen:
            got = s.parents_of_many(sp, "artifact", ids)
        assert got == {i: s.parents_of(sp, "artifact", i) for i in ids[:2]}
        assert got["art_aaaaaaaa01"] == ["rec_bbbbbbbb01", "rec_aaaaaaaa01"]  # their order
        assert len(seen) == -(-len(ids) // 500)
        assert s.parents_of_many(sp, "record", ids) == {}


def test_forget_events_answers_what_forget_event_answers(service: CloudService, ops: Ops) -> None:
    sp, device_id = _space(service, ops)
    with service.store.session() as s:
        real = sorted(s.unacked_events(sp, device_id))
        assert real, "the forget made no event"
        asked = real + list(range(10**9, 10**9 + MANY))
        with _statements(service) as seen:
            got = s.forget_events(sp, asked)
        assert got == {e: s.forget_event(sp, e) for e in real}
        assert all(got[e].keys for e in real)
        assert len(seen) == 2 * -(-len(asked) // 500)  # the events and their keys
        assert s.forget_events("sp_nobodynobodynobodynobod", real) == {}


def test_data_keys_answers_what_data_key_answers(service: CloudService, ops: Ops) -> None:
    sp, _ = _space(service, ops)
    with service.store.session() as s:
        rows = s.changes_after(sp, 0, 1_000)
        versions = s.version_rows(
            sp, [(r.record_id or "", r.version or 0) for r in rows if r.kind == "record_version"]
        )
        key_ids = [v.key_id for v in versions.values()]
    keys = service.key_store
    asked = key_ids + [f"key_zz{i:08d}" for i in range(MANY)]
    expected = {k: d for k in key_ids if (d := keys.data_key(sp, k)) is not None}
    assert keys.data_keys(sp, asked) == expected
    assert len(expected) == 2  # the forgotten record's key is destroyed, the others are not
    assert keys.data_keys("sp_nobodynobodynobodynobod", key_ids) == {}  # a space's own keys
