"""Consolidation never undoes the user (issue 17): a correction, a "don't use" or a
forget made before the session ended stays what the user decided once the
consolidator has run, on both record stores; a restatement typed later comes back."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, select

from cloud.consolidator.worker import Outcome
from cloud.service import CloudService
from cloud.store import schema as t
from protocol.consolidation.accounted import words_of
from protocol.detection import Detector
from protocol.operations import ReceiptStatus
from tests.cloud import test_consolidator as base
from tests.cloud.conftest import Device, applied, new_user, push
from tests.cloud.test_consolidator import Work, catch_up, contents, items, worker

# the consolidator tests' fixtures
detector = base.detector
work = base.work
user = base.user

ROME = "I live in Rome."
MILAN = "I live in Milan."


def texts(service: CloudService, device: Device) -> list[tuple[str, str, str]]:
    """Every live record the device learns: (record id, lifecycle, current text)."""
    return sorted((rid, life, c.text) for rid, (life, c) in contents(service, device).items())


def states(service: CloudService, device: Device) -> dict[tuple[str, int | None], str]:
    return {i.key: i.state for i in items(service, device.space_id, "candidate")}


def test_a_correction_before_the_session_ended_is_not_reverted(
    service: CloudService, detector: Detector, work: Work, user: tuple[Device, Device]
) -> None:
    phone, laptop = user
    applied(
        push(
            service,
            phone,
            work.episode("ep_rome000001", ROME),
            work.mark("ep_rome000001", 0),
            work.remember("rec_rome0001", ROME, ["ep_rome000001"]),
            work.episode("ep_milan00001", f"Sorry, my mistake. {MILAN}"),
            work.mark("ep_milan00001", 1),
            work.correct("rec_rome0001", MILAN, ["ep_milan00001"]),
            work.end(),
        )
    )
    report = worker(service, detector).run_session_end()
    assert report.written == []
    assert texts(service, laptop) == [("rec_rome0001", "active", MILAN)]
    # the old sentence is dropped naming the record, the new one is that record
    found = {i.key: i for i in items(service, phone.space_id, "candidate")}
    assert found["ep_rome000001", 0].state == "dropped"
    assert found["ep_milan00001", 1].state == "done"
    assert found["ep_milan00001", 1].record_id == "rec_rome0001"
    # running it again changes nothing
    assert worker(service, detector).run_session_end().claimed == 0
    assert texts(service, laptop) == [("rec_rome0001", "active", MILAN)]


def test_a_dont_use_before_the_session_ended_is_not_reverted(
    service: CloudService, detector: Detector, work: Work, user: tuple[Device, Device]
) -> None:
    phone, laptop = user
    applied(
        push(
            service,
            phone,
            work.episode("ep_rome000002", ROME),
            work.mark("ep_rome000002", 0),
            work.remember("rec_rome0002", ROME, ["ep_rome000002"]),
            work.simple("dont_use", "rec_rome0002"),
            work.end(),
        )
    )
    report = worker(service, detector).run_session_end()
    assert report.written == [] and report.outcomes[Outcome.DROPPED] == 1
    assert texts(service, laptop) == [("rec_rome0002", "not_in_use", ROME)]
    assert states(service, phone) == {("ep_rome000002", 0): "dropped"}


def test_the_same_words_said_earlier_in_the_conversation_stay_retracted(
    service: CloudService, detector: Detector, work: Work, user: tuple[Device, Device]
) -> None:
    phone, laptop = user
    applied(
        push(
            service,
            phone,
            work.episode("ep_rome000003", ROME),  # said once...
            work.mark("ep_rome000003", 0),
            work.episode("ep_rome000004", f"Yes. {ROME}"),  # ...and again, remembered
            work.mark("ep_rome000004", 1),
            work.remember("rec_rome0003", ROME, ["ep_rome000004"]),
            work.simple("dont_use", "rec_rome0003"),  # then retracted
            work.end(),
        )
    )
    assert worker(service, detector).run_session_end().written == []
    assert texts(service, laptop) == [("rec_rome0003", "not_in_use", ROME)]


def test_a_forget_before_the_session_ended_drops_the_candidates_with_its_words(
    service: CloudService, detector: Detector, work: Work, user: tuple[Device, Device]
) -> None:
    phone, laptop = user
    applied(
        push(
            service,
            phone,
            work.episode("ep_rome000005", ROME),  # an earlier episode, same words
            work.mark("ep_rome000005", 0),
            work.episode("ep_rome000006", f"{ROME} I play the piano."),
            work.mark("ep_rome000006", 0),
            work.mark("ep_rome000006", 1),
            work.remember("rec_rome0005", ROME, ["ep_rome000006"]),
            work.episode("ep_coffee0001", "I drink my coffee black."),
            work.mark("ep_coffee0001", 0),
        )
    )
    applied(push(service, phone, work.forget("rec_rome0005"), work.end()))
    report = worker(service, detector).run_session_end()
    # the forgotten words never come back; an unrelated sentence still does
    assert [c for _, _, c in texts(service, laptop)] == ["I drink my coffee black."]
    assert len(report.written) == 1
    assert states(service, phone) == {
        ("ep_rome000005", 0): "dropped",
        ("ep_rome000006", 0): "dropped",
        ("ep_rome000006", 1): "dropped",  # its episode was destroyed with the record
        ("ep_coffee0001", 0): "done",
    }


def test_a_short_remembered_sentence_is_kept_once(
    service: CloudService, detector: Detector, work: Work, user: tuple[Device, Device]
) -> None:
    phone, laptop = user
    applied(
        push(
            service,
            phone,
            work.episode("ep_vegan00001", "I am vegan."),
            work.mark("ep_vegan00001", 0),
            work.remember("rec_vegan001", "I am vegan.", ["ep_vegan00001"]),
            work.end(),
        )
    )
    report = worker(service, detector).run_session_end()
    assert report.written == [] and report.outcomes[Outcome.DONE] == 1
    assert [r for r, _, _ in texts(service, laptop)] == ["rec_vegan001"]
    (item,) = items(service, phone.space_id, "candidate")
    assert item.record_id == "rec_vegan001"


def test_a_retracted_statement_restated_later_comes_back(
    service: CloudService, detector: Detector, work: Work, user: tuple[Device, Device]
) -> None:
    phone, laptop = user
    applied(
        push(
            service,
            phone,
            work.episode("ep_rome000007", ROME),
            work.mark("ep_rome000007", 0),
            work.remember("rec_rome0007", ROME, ["ep_rome000007"]),
            work.simple("dont_use", "rec_rome0007"),
            work.end(),
        )
    )
    assert worker(service, detector).run_session_end().written == []
    # a later conversation: the same words, and in the one after, new words
    applied(
        push(
            service,
            phone,
            work.episode("ep_rome000008", ROME, "conv-2"),
            work.mark("ep_rome000008", 0),
            work.end("conv-2"),
        )
    )
    again = worker(service, detector).run_session_end()
    assert len(again.written) == 1
    applied(
        push(
            service,
            phone,
            work.episode("ep_rome000009", "My home is in Rome.", "conv-3"),
            work.mark("ep_rome000009", 0),
            work.end("conv-3"),
        )
    )
    worded = worker(service, detector).run_session_end()
    assert len(worded.written) == 1
    live = {c for _, life, c in texts(service, laptop) if life != "not_in_use"}
    assert live == {ROME, "My home is in Rome."}
    assert ("rec_rome0007", "not_in_use", ROME) in texts(service, laptop)


def test_the_same_words_restated_after_a_dont_use_in_the_same_conversation_come_back(
    service: CloudService, detector: Detector, work: Work, user: tuple[Device, Device]
) -> None:
    phone, laptop = user
    applied(
        push(
            service,
            phone,
            work.episode("ep_rome000010", ROME),
            work.remember("rec_rome0010", ROME, ["ep_rome000010"]),
            work.simple("dont_use", "rec_rome0010"),
            work.episode("ep_rome000011", f"Well, actually. {ROME}"),  # typed after it
            work.mark("ep_rome000011", 1),
            work.end(),
        )
    )
    assert len(worker(service, detector).run_session_end().written) == 1
    assert sorted(life for _, life, _ in texts(service, laptop)) == ["active", "not_in_use"]


def test_the_history_index_keeps_every_version_and_goes_with_a_forget(
    service: CloudService, detector: Detector, work: Work, user: tuple[Device, Device]
) -> None:
    phone, _ = user
    applied(
        push(
            service,
            phone,
            work.episode("ep_rome000012", ROME),
            work.remember("rec_rome0012", ROME, ["ep_rome000012"]),
            work.episode("ep_milan00012", MILAN),
            work.correct("rec_rome0012", MILAN, ["ep_milan00012"]),
        )
    )

    def rows() -> list[str]:
        c = t.history_index.c
        with service.store.engine.connect() as conn:
            found = conn.execute(select(c.token).where(c.record_id == "rec_rome0012"))
            return [r[0] for r in found]

    tokens = rows()
    # two words keys and two episode keys, blinded (no plaintext words or ids)
    assert len(tokens) == 4
    assert not any("rome" in tok.lower() or "ep_" in tok for tok in tokens)
    applied(push(service, phone, work.forget("rec_rome0012")))
    assert rows() == []


def test_a_record_older_than_the_history_index_is_indexed_by_its_next_control(
    service: CloudService, detector: Detector, work: Work, user: tuple[Device, Device]
) -> None:
    phone, laptop = user
    applied(
        push(
            service,
            phone,
            work.episode("ep_rome000013", ROME),
            work.mark("ep_rome000013", 0),
            work.remember("rec_rome0013", ROME, ["ep_rome000013"]),
            work.episode("ep_milan00013", MILAN),
            work.correct("rec_rome0013", MILAN, ["ep_milan00013"]),
        )
    )
    c = t.history_index.c
    with service.store.engine.begin() as conn:  # as if written before migration 13
        conn.execute(delete(t.history_index).where(c.record_id == "rec_rome0013"))
    applied(push(service, phone, work.simple("dont_use", "rec_rome0013"), work.end()))
    with service.store.engine.connect() as conn:
        rows = conn.execute(select(c.token).where(c.record_id == "rec_rome0013")).all()
    assert len(rows) == 4  # both versions' words and episodes
    assert worker(service, detector).run_session_end().written == []
    assert texts(service, laptop) == [("rec_rome0013", "not_in_use", MILAN)]


def test_a_record_older_than_the_history_index_keeps_its_old_words_when_corrected(
    service: CloudService, detector: Detector, work: Work, user: tuple[Device, Device]
) -> None:
    phone, laptop = user
    applied(
        push(
            service,
            phone,
            work.episode("ep_rome000014", ROME),
            work.mark("ep_rome000014", 0),
            work.remember("rec_rome0014", ROME, ["ep_rome000014"]),
        )
    )
    c = t.history_index.c
    with service.store.engine.begin() as conn:  # as if written before migration 13
        conn.execute(delete(t.history_index).where(c.record_id == "rec_rome0014"))
    applied(
        push(
            service,
            phone,
            work.episode("ep_milan00014", MILAN),
            work.correct("rec_rome0014", MILAN, ["ep_milan00014"]),
            work.end(),
        )
    )
    with service.store.engine.connect() as conn:
        rows = conn.execute(select(c.token).where(c.record_id == "rec_rome0014")).all()
    assert len(rows) == 4  # the old version's words and episode too
    assert worker(service, detector).run_session_end().written == []
    assert texts(service, laptop) == [("rec_rome0014", "active", MILAN)]


# --- the property ------------------------------------------------------------------------

POOL = (ROME, MILAN, "I am vegan.", "I play the piano.", "I drink my coffee black.")
_users = itertools.count(1)

Step = tuple[str, int, int]  # (control, record index, episode index)
steps = st.lists(
    st.tuples(
        st.sampled_from(["remember", "correct", "dont_use", "use_again", "forget"]),
        st.integers(0, 2),
        st.integers(0, 5),
    ),
    max_size=10,
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    said=st.lists(st.integers(0, len(POOL) - 1), min_size=1, max_size=6),
    controls=steps,
    runs=st.integers(1, 2),
)
def test_consolidation_never_changes_what_a_control_decided(
    service: CloudService, detector: Detector, said: list[int], controls: list[Step], runs: int
) -> None:
    """Whatever the user said, remembered, corrected, retracted, used again or forgot
    before the session ended, consolidating that session (once or twice) leaves every
    controlled record's lifecycle and current text as the control left it, and makes no
    record with a controlled record's words from the same episode, nor any record with
    a forgotten record's words."""
    work = Work()
    n = next(_users)
    phone, laptop = new_user(service, f"prop{n}", "phone", "laptop")
    episodes = [f"ep_p{n:04d}e{i:03d}" for i in range(len(said))]
    for episode, sentence in zip(episodes, said, strict=True):
        applied(push(service, phone, work.episode(episode, POOL[sentence]), work.mark(episode, 0)))
    records = [f"rec_p{n:05d}r{i}" for i in range(4)]
    controlled: set[str] = set()
    had: dict[str, set[tuple[str, str]]] = {r: set() for r in records}  # (words, episode)
    forgotten: set[str] = set()  # the words of every record forgotten
    for control, r, e in controls:
        record, episode = records[r], episodes[e % len(episodes)]
        text = POOL[said[e % len(episodes)]]
        if control == "remember":
            op = work.remember(record, text, [episode])
        elif control == "correct":
            op = work.correct(record, text, [episode])
        elif control == "forget":
            op = work.forget(record)
        else:
            op = work.simple(control, record)
        receipt = push(service, phone, op).receipts[0]
        if receipt.status is not ReceiptStatus.APPLIED:
            continue
        if control in ("remember", "correct"):
            had[record].add((words_of(text), episode))
        if control != "remember":
            controlled.add(record)
        if control == "forget":
            forgotten |= {words for words, _ in had[record]}
        catch_up(service, phone)
    applied(push(service, phone, work.end()))
    before = contents(service, laptop)
    said_words = {pair for record in controlled for pair in had[record]}
    for _ in range(runs):
        worker(service, detector).run_session_end()
    after = contents(service, laptop)
    for rid in controlled:
        old = before.get(rid)
        new = after.get(rid)
        assert (old and (old[0], old[1].text)) == (new and (new[0], new[1].text)), rid
    for rid, (_life, content) in after.items():
        if rid in before:
            continue
        words = words_of(content.text)
        assert words not in forgotten, (rid, content.text)
        for episode in content.source_episode_ids:
            assert (words, episode) not in said_words, (rid, content.text)
