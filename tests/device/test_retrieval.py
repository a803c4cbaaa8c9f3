"""Local retrieval and the user's views: corrections and newer statements win,
retractions stay, conflicts come together, exceptions, personalization off, explain,
confidence classes, "for now" questions and staleness, as-of reads, history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from device import effects, search, store
from device.agent import DeviceAgent
from device.views import RecallHit
from protocol.model import (
    ContentType,
    EpistemicState,
    LifeArea,
    LifecycleState,
    RecordContent,
    RelationNote,
    SourceKind,
    StatementRelation,
    TimeKind,
)
from protocol.rules import CreateRecord, Effect, FlagSuperseded
from tests.device.conftest import MakeAgent, TickingClock
from tests.device.test_memory_ops import observed, told


def texts(hits: list[RecallHit]) -> list[str]:
    return [h.text for h in hits]


def test_correction_wins_and_old_body_never_retrieved(make_agent: MakeAgent) -> None:
    agent = make_agent()
    record = told(agent, "My favorite color is blue.")
    agent.say("Actually, my favorite color is orange, not blue. My favorite color is orange.", "c2")
    agent.correct(record, "My favorite color is orange.", "c2")
    hits = agent.recall("What is my favorite color? blue")
    assert texts(hits) == ["My favorite color is orange."]
    assert all("blue" not in h.line for h in hits)
    history = agent.record_history(record)
    assert [(v.version, v.current, v.epistemic_state) for v in history] == [
        (1, False, "invalid"), (2, True, "said"),
    ]  # fmt: skip
    assert history[0].note.startswith("corrected on 2026-03-01; no longer active")
    assert history[0].text == "My favorite color is blue."  # the chain is the user's history


def test_newer_statement_on_same_subject_wins_without_correct(make_agent: MakeAgent) -> None:
    agent = make_agent()
    iced = told(agent, "I drink my coffee iced.")
    hot = told(agent, "I drink my coffee hot now.", "c2")
    # the newer statement is current; what it replaced comes back beside it, outdated
    hits = agent.recall("how do I drink my coffee")
    assert [(h.text, h.current, h.outdated) for h in hits] == [
        ("I drink my coffee hot now.", True, False),
        ("I drink my coffee iced.", False, True),
    ]
    assert hits[0].line.endswith("| CURRENT: replaces line 2 (said 2026-03-01 at 09:30)]")
    assert hits[1].line.endswith("| OUTDATED: replaced by line 1]")
    assert hits[1].pulled_in_by == hot
    views = {v.record_id: v for v in agent.what_do_you_know()}
    assert views[iced].superseded_by == hot and views[iced].lifecycle == "active"
    assert "OUTDATED: you said something newer" in (views[iced].line or "")
    assert "newer on the same subject" in agent.explain(iced)
    # if the newer one is not in use, the older statement is the one that stands
    agent.dont_use(hot)
    assert texts(agent.recall("coffee")) == ["I drink my coffee iced."]


def test_retractions_never_lost_and_restated_fact_is_active_again(make_agent: MakeAgent) -> None:
    agent = make_agent()
    coffee = told(agent, "I drink my coffee iced.")
    sister = told(agent, "My sister lives in Oslo.")
    agent.dont_use(coffee)
    agent.dont_use(sister)
    again = told(agent, "I drink my coffee iced.", "c3")
    states = {v.record_id: v.lifecycle for v in agent.what_do_you_know()}
    assert states == {coffee: "not_in_use", sister: "not_in_use", again: "active"}
    assert [h.record_id for h in agent.recall("coffee iced")] == [again]
    assert agent.recall("sister Oslo") == []


def test_conflict_retrieved_together_and_flagged(make_agent: MakeAgent) -> None:
    agent = make_agent()
    said = told(agent, "I live in Berlin.")
    episode = agent.say("Calendar: meetings all week in the Munich office.", "c2")
    calendar = agent.infer(
        observed(
            episode,
            "I live in Munich.",
            EpistemicState.OBSERVED,
            source_kind=SourceKind.CONNECTED_SOURCE,
        )
    ).record_id
    hits = agent.recall("Berlin")
    assert [(h.record_id, h.conflict) for h in hits] == [(said, True), (calendar, True)]
    assert hits[1].pulled_in_by == said
    assert hits[0].line.endswith("| CONFLICT: disagrees with line 2]")
    assert hits[1].line.endswith("| CONFLICT: disagrees with line 1]")
    views = {v.record_id: v for v in agent.what_do_you_know()}
    assert views[said].conflicts_with == (calendar,) and views[calendar].conflicts_with == (said,)
    assert "conflicts with 1 other record" in agent.explain(said)


def test_one_off_exception_leaves_the_lasting_record(make_agent: MakeAgent) -> None:
    agent = make_agent()
    lasting = told(agent, "I drink my coffee iced.")
    today = told(agent, "I drink my coffee hot today.", "c2", time_kind=TimeKind.ONE_OFF)
    views = {v.record_id: v for v in agent.what_do_you_know()}
    assert views[lasting].superseded_by is None and views[lasting].conflicts_with == ()
    assert views[today].time_kind == "one_off"
    assert sorted(h.record_id for h in agent.recall("coffee")) == sorted([lasting, today])


def test_personalization_off_and_task_area(make_agent: MakeAgent) -> None:
    agent = make_agent()
    work = told(agent, "My manager is called Ines.", life_areas=[LifeArea.WORK])
    general = told(agent, "My name is Ada.")
    assert agent.recall("manager Ines name Ada", personalized=False) == []
    assert {h.record_id for h in agent.recall("manager Ines name Ada")} == {work, general}
    assert [h.record_id for h in agent.recall("manager Ines name Ada", area=LifeArea.HEALTH)] == [
        general
    ]


def test_explain_said_quote_versus_inference(make_agent: MakeAgent) -> None:
    agent = make_agent()
    said = told(agent, "I grew up in Duluth.")
    assert agent.explain(said) == (
        'You told me so: on 2026-03-01 you wrote: "I grew up in Duluth.". Confidence: You told me.'
    )
    episode = agent.say("Another americano please.", "c2")
    inferred = agent.infer(observed(episode, "Prefers an americano.")).record_id
    sentence = agent.explain(inferred)
    assert sentence.startswith("I inferred this from your behaviour: 3 of 3 distinct source(s)")
    assert "It is not something you said." in sentence and "you wrote" not in sentence
    agent.forget_permanently(said)
    assert agent.explain(said) == "Permanently forgotten; it cannot be brought back."


def test_confidence_class_in_every_line(make_agent: MakeAgent) -> None:
    agent = make_agent()
    told(agent, "I like green tea.")
    episode = agent.say("Green tea again.", "c2")
    agent.infer(observed(episode, "Likes green tea in the evening."))
    agent.infer(
        observed(episode, "Green tea may be for a guest.", EpistemicState.HYPOTHESIS),
    )
    lines = {h.text: h.line for h in agent.recall("green tea")}
    lines.update({h.text: h.line for h in agent.recall("Is the green tea for a guest?")})
    # no --type: the detector's content type
    assert lines["I like green tea."].endswith("[preference | said | You told me]")
    assert lines["Likes green tea in the evening."] == (
        "[inferred, not your words] I inferred this from your behaviour (3 of 3 observations): "
        "Likes green tea in the evening.  "
        "[personal_fact | inferred | I think so]"
    )
    assert lines["Green tea may be for a guest."].endswith("| hypothesis | I'm not sure]")
    assert not lines["Green tea may be for a guest."].startswith("On ")


def test_for_now_question_then_not_sure_after_14_days(make_agent: MakeAgent) -> None:
    clock = TickingClock()
    agent = make_agent(clock=clock)
    end = datetime(2026, 4, 1, tzinfo=UTC)
    record = told(
        agent, "I am learning Spanish for now.", time_kind=TimeKind.FOR_NOW, expected_end=end
    )
    assert agent.due_questions() == []
    [fresh] = agent.recall("Spanish")
    assert fresh.confidence == "You told me"
    clock.now = end + timedelta(hours=1)
    assert agent.due_questions() == [(record, "Still doing this? I am learning Spanish for now.")]
    [due] = agent.recall("Spanish")
    assert due.confidence == "You told me"
    clock.now = end + timedelta(days=14, hours=1)
    [stale] = agent.recall("Spanish")
    assert stale.confidence == "I'm not sure" and "| I'm not sure]" in stale.line
    assert stale.rank < fresh.rank  # decay only lowers priority; the record stays
    assert [v.lifecycle for v in agent.what_do_you_know()] == ["active"]


def test_as_of_before_and_after_a_correction(make_agent: MakeAgent) -> None:
    clock = TickingClock()
    agent = make_agent(clock=clock)
    before_anything = clock.now
    record = told(agent, "My favorite color is blue.")
    between = clock.now + timedelta(minutes=1)
    clock.now += timedelta(days=2)
    agent.say("My favorite color is orange.", "c2")
    agent.correct(record, "My favorite color is orange.", "c2")
    clock.now += timedelta(days=1)
    agent.dont_use(record)
    assert agent.as_of(before_anything) == []
    [then] = agent.as_of(between)
    assert (then.text, then.version, then.lifecycle) == ("My favorite color is blue.", 1, "active")
    [now] = agent.as_of(clock.now + timedelta(seconds=5))
    assert (now.text, now.version, now.lifecycle) == (
        "My favorite color is orange.", 2, "not_in_use",
    )  # fmt: skip
    agent.forget_permanently(record)
    [skeleton] = agent.as_of(clock.now + timedelta(seconds=5))
    assert skeleton.is_skeleton and skeleton.text is None
    assert agent.as_of(between) == []  # forgotten content is never shown, not even as of then


def test_what_do_you_know_lists_everything(make_agent: MakeAgent) -> None:
    agent = make_agent()
    said = told(agent, "I grew up in Duluth.")
    off = told(agent, "I like jazz.")
    agent.dont_use(off)
    episode = agent.say("Ordered another americano.", "c2")
    inferred = agent.infer(observed(episode, "Prefers an americano.")).record_id
    gone = told(agent, "My locker code is 4471.")
    agent.forget_permanently(gone)
    views = {v.record_id: v for v in agent.what_do_you_know()}
    assert set(views) == {said, off, inferred, gone}
    assert (views[off].lifecycle, views[off].in_use) == ("not_in_use", False)
    assert views[inferred].epistemic_state == "inferred" and views[inferred].in_use
    assert views[gone].is_skeleton and views[gone].text is None
    assert views[gone].content_type is None and views[gone].source_kind is None


# --- the current statement, found by the outdated one's words (issue 17) -------------------

ROME, OSLO = "I live in Rome.", "Actually, we moved, it's Oslo now."


def test_the_old_words_find_the_current_statement_first(make_agent: MakeAgent) -> None:
    agent = make_agent()
    rome = told(agent, ROME, subject="where I live")
    oslo = told(agent, OSLO, "c2", subject="where I live")
    assert {v.record_id: v.superseded_by for v in agent.what_do_you_know()}[rome] == oslo
    for query in ("Where do I live?", "Do I live in Rome?"):
        hits = agent.recall(query)
        assert [(h.record_id, h.current, h.outdated) for h in hits] == [
            (oslo, True, False),
            (rome, False, True),
        ], query
        assert hits[0].line == (
            f'On 2026-03-01 at 09:30 you wrote: "{OSLO}"  '
            "[personal_fact | said | You told me | CURRENT: replaces line 2 "
            "(said 2026-03-01 at 09:30)]"
        )
        assert hits[1].line == (
            f'On 2026-03-01 at 09:30 you wrote: "{ROME}"  '
            "[personal_fact | said | You told me | OUTDATED: replaced by line 1]"
        )
        assert hits[0].rank > 0 and hits[1].pulled_in_by == oslo
    # the block a model reads says which is current without comparing dates
    block = agent.retrieve("Where do I live?").block
    assert "1. On 2026-03-01 at 09:30 you wrote" in block and "CURRENT: replaces line 2" in block
    assert (
        "2. On 2026-03-01 at 09:30 you wrote" in block and "OUTDATED: replaced by line 1" in block
    )
    # a successor that is not in use re-activates nothing: the old statement stands again
    agent.dont_use(oslo)
    assert [(h.record_id, h.current, h.outdated) for h in agent.recall("Where do I live?")] == [
        (rome, False, False)
    ]


def create(agent: DeviceAgent, record_id: str, content: RecordContent, *more: Effect) -> str:
    """Write a record the way the rules' effects do, for content no operation makes yet
    (a context sentence, relation notes: the relation engine will fill them)."""
    db = agent._debug_db()
    ctx = effects.Context(db, agent.random_bytes, agent.now(), store.get_meta(db).binding_space)
    with db.atomic():
        for effect in (CreateRecord(record_id, 1, LifecycleState.ACTIVE, content), *more):
            effects.perform(ctx, None, effect)  # type: ignore[arg-type]
    return record_id


PLAY, WAIT = "The school play is on the 7th.", "No wait, it's on the 17th."


def test_a_follow_up_is_found_by_its_context_and_shown_with_both_sentences(
    make_agent: MakeAgent,
) -> None:
    clock = TickingClock()
    agent = make_agent(clock=clock)
    told(agent, "I drink my coffee iced.")
    play = agent.say(PLAY, "c1")
    play_at = clock.now - timedelta(seconds=1)
    clock.now += timedelta(minutes=2)
    wait = agent.say(WAIT, "c1")
    wait_at = clock.now - timedelta(seconds=1)
    record = create(
        agent,
        "rec_00000000000000000000000017",
        RecordContent(
            text=WAIT,
            content_type=ContentType.EVENT,
            source_episode_ids=[wait, play],
            conversation_id="c1",
            said_at=wait_at,
            context_text=PLAY,
            context_said_at=play_at,
        ),
    )
    [hit] = agent.recall("When is the school play?")
    assert hit.record_id == record and hit.text == WAIT
    # its context's words are its words (protocol searchable_text); the line shows the
    # index's own bm25 score, never one normalised by the query's best (issue 20)
    raw = search.lexical_hits(agent._debug_db(), "When is the school play?")
    assert record in raw and hit.lexical == round(raw[record], 4)
    assert record in search.lexical_hits(agent._debug_db(), "school play")
    assert hit.line == (
        f'On 2026-03-01 at 09:30 you wrote: "{PLAY}" then at 09:32: "No wait, it\'s on the 17th."'
        "  [event | said | You told me]"
    )
    assert [h.record_id for h in agent.recall("school play")] == [record]  # by its words too


def test_explain_says_what_a_correction_replaced_and_what_replaced_the_old(
    make_agent: MakeAgent,
) -> None:
    clock = TickingClock()
    agent = make_agent(clock=clock)
    rome = told(agent, ROME)
    clock.now += timedelta(hours=5, minutes=3)
    episode = agent.say(OSLO, "c2")
    said = clock.now - timedelta(seconds=1)
    note = RelationNote(
        kind=StatementRelation.CORRECTION, record_id=rome, evidence="same subject: home", at=said
    )
    oslo = create(
        agent,
        "rec_00000000000000000000000002",
        RecordContent(text=OSLO, source_episode_ids=[episode], said_at=said, relations=[note]),
        FlagSuperseded(rome, "rec_00000000000000000000000002"),
    )
    assert agent.explain(oslo) == (
        f'You told me so: on 2026-03-01 you wrote: "{OSLO}". Confidence: You told me. '
        f'You corrected this on 2026-03-01 at 14:33: "{OSLO}" replaces "{ROME}" '
        "(same subject: home)."
    )
    assert agent.explain(rome).endswith(
        "You said something newer on the same subject on 2026-03-01 at 14:33: "
        f'"{OSLO}" replaces it, so I use that instead.'
    )
    assert [(h.record_id, h.current, h.outdated) for h in agent.recall("Where do I live?")] == [
        (oslo, True, False),
        (rome, False, True),
    ]
    agent.forget_permanently(rome)
    after = agent.explain(oslo)
    assert "replaces a record that was permanently forgotten" in after and "Rome" not in after
    assert [h.record_id for h in agent.recall("Where do I live? Rome Oslo")] == [oslo]
