"""A database written by the walking skeleton (migration 1 only) opens under migrations
2 and 3: its queue survives and still pushes, its records join the subject index, and
its word table gives way to the search indexes, filled when the agent opens."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from device import keys, store
from device.agent import DeviceAgent
from device.db import DB_FILENAME, Database
from device.migrations import MIGRATIONS, applied, migrate
from protocol.ids import make_id
from protocol.messages import EpisodeContent
from protocol.model import RecordContent
from tests.device.conftest import PASSPHRASE, TickingClock, seeded
from tests.device.fake_cloud import FakeCloud

TYPED = "I drink my coffee iced."
AT = datetime(2026, 2, 1, 8, 0, tzinfo=UTC).isoformat()


def skeleton_database(directory: Path) -> tuple[str, str]:
    """What the walking skeleton left: an episode and a said record, both still queued."""
    rand = seeded(11)
    db = Database.create(directory / DB_FILENAME, PASSPHRASE)
    migrate(db, AT, MIGRATIONS[:1])
    space = make_id("sp", rand(16))
    episode, record = make_id("ep", rand(16)), make_id("rec", rand(16))
    with db.atomic():
        store.insert_meta(
            db,
            device_name="old",
            cloud_url="https://cloud.test",
            local_space=space,
            private_key=rand(32),
            created_at=AT,
        )
        ep = EpisodeContent(conversation_id="c1", text=TYPED).model_dump_json().encode()
        sealed = keys.seal_new(rand, space, "episode", episode, 1, ep)
        store.put_key(db, sealed.key_id, sealed.dek, "local")
        store.insert_episode(
            db, episode_id=episode, conversation_id="c1", typed_at=AT, bound_space=space,
            key_id=sealed.key_id, sealed=sealed.sealed, sync_state="pending",
        )  # fmt: skip
        content = RecordContent(text=TYPED, source_episode_ids=[episode], conversation_id="c1")
        item = keys.seal_new(rand, space, "record", record, 1, content.model_dump_json().encode())
        store.put_key(db, item.key_id, item.dek, "local")
        store.insert_record(
            db, record_id=record, lifecycle="active", current_version=1, sync_state="pending"
        )
        store.insert_version(
            db, record_id=record, version=1, supersedes=None, epistemic_state="said",
            recorded_at=AT, bound_space=space, key_id=item.key_id, sealed=item.sealed,
        )  # fmt: skip
        db.executemany(  # migration 1's word index
            "INSERT INTO recall_words (record_id, word) VALUES (?, ?)",
            [(record, w) for w in ("i", "drink", "my", "coffee", "iced")],
        )
        old_ops: list[tuple[str, str | None, str | None, dict[str, Any]]] = [
            ("add_episode", None, episode, {"episode_id": episode, "conversation_id": "c1",
                                             "typed_at": AT}),
            ("remember", record, None, {"record_id": record, "conversation_id": "c1",
                                        "source_episode_ids": [episode]}),
        ]  # fmt: skip
        for n, (kind, rid, eid, fields) in enumerate(old_ops):
            op_id = make_id("op", bytes([n + 1]) * 10)
            body = {"kind": kind, "op_id": op_id, "made_at": AT, **fields}
            db.execute(
                "INSERT INTO op_queue (op_id, kind, record_id, episode_id, op_json, queued_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (op_id, kind, rid, eid, json.dumps(body), AT),
            )
    db.close()
    return episode, record


def test_skeleton_database_migrates_and_keeps_its_queue(tmp_path: Path) -> None:
    _, record = skeleton_database(tmp_path)
    cloud = FakeCloud()
    agent = DeviceAgent.open(
        tmp_path,
        PASSPHRASE,
        transport=cloud.transport,
        clock=TickingClock(),
        random_bytes=seeded(3),
    )
    db = agent._debug_db()
    assert applied(db) == [m.id for m in MIGRATIONS]
    assert not db.all("SELECT name FROM sqlite_master WHERE name = 'recall_words'")
    assert agent.pending_ops() == 2
    # migration 3's indexes were filled when the agent opened: found by meaning
    assert [h.record_id for h in agent.recall("How do I take my coffee?")] == [record]
    [view] = agent.what_do_you_know()
    assert (view.record_id, view.text, view.confidence) == (record, TYPED, "You told me")
    # the backfilled subject index lets a newer statement on the subject win
    marks = len(agent.say_detected("I drink my coffee hot now.", "c2").candidates)
    hot = agent.remember("I drink my coffee hot now.", "c2").record_id
    hits = agent.recall("coffee")
    assert [(h.record_id, h.current, h.outdated) for h in hits] == [
        (hot, True, False),
        (record, False, True),
    ]
    # the skeleton's queued ops (no initiated_by) still push and apply
    agent.enroll(cloud.new_code())
    report = agent.sync()
    assert report.refused == [] and report.applied == 4 + marks
    agent.close()
