"""The consolidator's pure rules: time expressions, areas, sensitivity, content type and
behaviour observations (docs/consolidation-rules.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.confidence import ConfidenceClass
from protocol.consolidation.areas import life_areas
from protocol.consolidation.extract import (
    ChainExtractor,
    Extraction,
    Extractor,
    Hints,
    RuleExtractor,
)
from protocol.consolidation.observations import (
    BehaviourEvent,
    ObservedEvent,
    Reading,
    event_text,
    parse_event,
    plural,
    summarise,
)
from protocol.consolidation.sensitivity import find_sensitive, sensitivity_of
from protocol.consolidation.timeexpr import TimeReading, read_time
from protocol.model import ContentType, LifeArea, Sensitivity, SourceKind, TimeKind
from protocol.timeline import DEFAULT_FOR_NOW

# A Tuesday afternoon.
SAID_AT = datetime(2026, 3, 10, 15, 0, tzinfo=UTC)
K = TimeKind


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


def end(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, 23, 59, 59, tzinfo=UTC)


DEFAULT_END = SAID_AT + DEFAULT_FOR_NOW

# sentence, kind, valid_from, valid_until, expected_end
TIME_CASES: list[tuple[str, TimeKind, datetime | None, datetime | None, datetime | None]] = [
    # permanent
    ("I'm allergic to peanuts.", K.PERMANENT, None, None, None),
    ("I have been vegetarian since 2015.", K.PERMANENT, day(2015, 1, 1), None, None),
    ("I don't work on Fridays.", K.PERMANENT, None, None, None),  # a routine, not a date
    ("I take the bus every Monday.", K.PERMANENT, None, None, None),
    ("I'm used to waking up early.", K.PERMANENT, None, None, None),  # not "used to"
    ("I drink my coffee hot now.", K.PERMANENT, None, None, None),  # a change, lasting
    ("I may go to the gym.", K.PERMANENT, None, None, None),  # "may" the verb
    ("I have 2 dogs and 2000 books.", K.PERMANENT, None, None, None),
    ("I love Christmas.", K.PERMANENT, None, None, None),
    ("I was born on 1990-04-02.", K.PERMANENT, day(1990, 4, 2), None, None),
    ("My birthday is on March 3.", K.PERMANENT, None, None, None),  # recurs, not one-off
    ("I've lived in Oslo for three years.", K.PERMANENT, day(2023, 3, 10), None, None),
    ("I have been vegetarian since I was 12.", K.PERMANENT, None, None, None),
    # past
    ("I used to smoke.", K.PAST, None, None, None),
    ("I didn't use to like coffee.", K.PAST, None, None, None),
    ("I moved to Lisbon last year.", K.PAST, day(2025, 1, 1), end(2025, 12, 31), None),
    ("I stopped eating meat in 2019.", K.PAST, day(2019, 1, 1), end(2019, 12, 31), None),
    ("I lived in Berlin until 2019.", K.PAST, None, day(2019, 1, 1), None),
    ("I lived in Berlin from 2015 to 2019.", K.PAST, day(2015, 1, 1), day(2019, 1, 1), None),
    ("When I was a kid I lived in Spain.", K.PAST, None, None, None),
    ("I grew up in Duluth.", K.PAST, None, None, None),
    ("Two weeks ago I started a new job.", K.PAST, day(2026, 2, 24), end(2026, 2, 24), None),
    ("We went to Spain last summer.", K.PAST, day(2025, 6, 1), end(2025, 8, 31), None),
    ("I started a new job on Monday.", K.PAST, day(2026, 3, 9), end(2026, 3, 9), None),
    ("I was in Paris until the 12th.", K.PAST, None, end(2026, 2, 12), None),
    ("I quit my job in May.", K.PAST, day(2025, 5, 1), end(2025, 5, 31), None),
    # for now
    ("For now I'm working from home.", K.FOR_NOW, None, None, DEFAULT_END),
    ("Currently I'm reading Dune.", K.FOR_NOW, None, None, DEFAULT_END),
    ("These days I drink green tea.", K.FOR_NOW, None, None, DEFAULT_END),
    ("At the moment I'm training for a marathon.", K.FOR_NOW, None, None, DEFAULT_END),
    ("I'm on a diet this month.", K.FOR_NOW, None, None, end(2026, 3, 31)),
    ("I'm in Paris until the 12th.", K.FOR_NOW, None, None, end(2026, 3, 12)),
    ("I'm in Paris until 12 March.", K.FOR_NOW, None, None, end(2026, 3, 12)),
    (
        "I'm staying with my parents for the next two weeks.",
        K.FOR_NOW,
        None,
        None,
        SAID_AT + timedelta(weeks=2),
    ),
    ("I'm in Paris for two weeks.", K.FOR_NOW, None, None, SAID_AT + timedelta(weeks=2)),
    ("I'm staying with my parents until June.", K.FOR_NOW, None, None, day(2026, 6, 1)),
    # "until March" said in March: the end of this March
    ("I'm staying with my parents until March.", K.FOR_NOW, None, None, day(2026, 4, 1)),
    ("We're on holiday until Sunday.", K.FOR_NOW, None, None, end(2026, 3, 15)),
    # seasonal
    ("We go skiing every winter.", K.SEASONAL, None, None, None),
    ("I visit my parents in the holidays.", K.SEASONAL, None, None, None),
    ("Each Christmas we bake cookies.", K.SEASONAL, None, None, None),
    ("Every summer I rent a boat.", K.SEASONAL, None, None, None),
    ("I go to Crete every summer since 2015.", K.SEASONAL, day(2015, 1, 1), None, None),
    ("We go hiking in the summer.", K.SEASONAL, None, None, None),
    # one-off
    ("I'm seeing the dentist tomorrow.", K.ONE_OFF, day(2026, 3, 11), end(2026, 3, 11), None),
    (
        "I'm seeing the dentist next Friday.",
        K.ONE_OFF,
        day(2026, 3, 20),  # the Friday of next week
        end(2026, 3, 20),
        None,
    ),
    ("I'm seeing the dentist on Friday.", K.ONE_OFF, day(2026, 3, 13), end(2026, 3, 13), None),
    ("The wedding is on March 3.", K.ONE_OFF, day(2027, 3, 3), end(2027, 3, 3), None),
    ("The wedding is on 2026-12-05.", K.ONE_OFF, day(2026, 12, 5), end(2026, 12, 5), None),
    ("My exam is on the 5th of May.", K.ONE_OFF, day(2026, 5, 5), end(2026, 5, 5), None),
    ("Dinner with Ana tonight.", K.ONE_OFF, day(2026, 3, 10), end(2026, 3, 10), None),
    ("Make it hot today.", K.ONE_OFF, day(2026, 3, 10), end(2026, 3, 10), None),
    ("We're going camping this weekend.", K.ONE_OFF, day(2026, 3, 14), end(2026, 3, 15), None),
    ("I'm flying to Rome in two weeks.", K.ONE_OFF, day(2026, 3, 24), end(2026, 3, 24), None),
    # A future year is a one-off event in that year; the time job turns it past later.
    ("I will retire in 2030.", K.ONE_OFF, day(2030, 1, 1), end(2030, 12, 31), None),
    ("I'm moving to Berlin next month.", K.ONE_OFF, day(2026, 4, 1), end(2026, 4, 30), None),
    ("I'm going to Spain in the summer.", K.ONE_OFF, day(2026, 6, 1), end(2026, 8, 31), None),
    ("I'll see my family at Christmas.", K.ONE_OFF, day(2026, 12, 25), end(2026, 12, 25), None),
    ("I booked a flight for next Friday.", K.ONE_OFF, day(2026, 3, 20), end(2026, 3, 20), None),
    (
        "I'll be in Tokyo from June 3 to June 10.",
        K.ONE_OFF,
        day(2026, 6, 3),
        end(2026, 6, 10),
        None,
    ),
]


@pytest.mark.parametrize(("sentence", "kind", "valid_from", "valid_until", "expected"), TIME_CASES)
def test_read_time(
    sentence: str,
    kind: TimeKind,
    valid_from: datetime | None,
    valid_until: datetime | None,
    expected: datetime | None,
) -> None:
    reading = read_time(sentence, said_at=SAID_AT)
    assert (reading.time_kind, reading.valid_from, reading.valid_until, reading.expected_end) == (
        kind,
        valid_from,
        valid_until,
        expected,
    ), reading
    if kind is not K.PERMANENT or valid_from is not None:
        assert reading.cue, "a reading the sentence decided names its words"


def test_cues_name_the_deciding_words() -> None:
    assert read_time("I have been vegetarian since 2015.", said_at=SAID_AT).cue == "since 2015"
    assert read_time("I'm in Paris until the 12th.", said_at=SAID_AT).cue == "until the 12th"
    assert read_time("I used to smoke.", said_at=SAID_AT).cue == "used to"
    assert read_time("I'm allergic to peanuts.", said_at=SAID_AT).cue is None


def test_hint_decides_only_when_the_sentence_is_silent() -> None:
    silent = read_time("I'm working from home.", said_at=SAID_AT, hint=K.FOR_NOW)
    assert silent.time_kind is K.FOR_NOW and silent.expected_end == DEFAULT_END
    assert silent.cue is None
    dated = read_time("I'm seeing the dentist tomorrow.", said_at=SAID_AT, hint=K.PERMANENT)
    assert dated.time_kind is K.ONE_OFF


def test_said_at_in_another_zone_is_read_in_utc() -> None:
    from datetime import timezone

    local = SAID_AT.astimezone(timezone(timedelta(hours=-5)))
    assert read_time("See you tomorrow.", said_at=local) == read_time(
        "See you tomorrow.", said_at=SAID_AT
    )


def test_naive_said_at_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        read_time("tomorrow", said_at=datetime(2026, 3, 10))


def test_impossible_dates_are_ignored() -> None:
    reading = read_time("My exam is on the 31st of February.", said_at=SAID_AT)
    assert reading.time_kind is K.PERMANENT


SAID_ATS = st.datetimes(
    min_value=datetime(1971, 1, 1), max_value=datetime(2200, 12, 31), timezones=st.just(UTC)
)
TIME_WORDS = st.sampled_from(
    [
        "since", "until", "from", "to", "in", "on", "next", "last", "this", "every", "ago",
        "for", "the", "12th", "2019", "2030", "march", "may", "friday", "fridays", "summer",
        "winter", "tomorrow", "yesterday", "tonight", "weekend", "week", "month", "year",
        "two", "weeks", "days", "used", "I", "was", "have", "been", "will", "now",
        "currently", "christmas", "2026-02-29", "31st", "of", "february", "born", "a",
    ]
)  # fmt: skip


def _check(reading: TimeReading, said_at: datetime) -> None:
    if reading.valid_from and reading.valid_until:
        assert reading.valid_until >= reading.valid_from
    if reading.time_kind is K.FOR_NOW:
        assert reading.expected_end is not None
    for value in (reading.valid_from, reading.valid_until, reading.expected_end):
        assert value is None or value.tzinfo is not None


@settings(max_examples=300)
@given(text=st.text(max_size=200), said_at=SAID_ATS, hint=st.none() | st.sampled_from(K))
def test_read_time_never_raises_on_any_text(
    text: str, said_at: datetime, hint: TimeKind | None
) -> None:
    _check(read_time(text, said_at=said_at, hint=hint), said_at)


@settings(max_examples=300)
@given(words=st.lists(TIME_WORDS, max_size=12), said_at=SAID_ATS)
def test_read_time_on_time_words(words: list[str], said_at: datetime) -> None:
    _check(read_time(" ".join(words), said_at=said_at), said_at)


@given(
    said_at=SAID_ATS,
    what=st.sampled_from(
        ["friday", "monday", "sunday", "week", "weekend", "month", "year", "summer", "march"]
    ),
)
def test_next_is_always_after_said_at(said_at: datetime, what: str) -> None:
    reading = read_time(f"I'm seeing Ana next {what}.", said_at=said_at)
    assert reading.time_kind is K.ONE_OFF
    assert reading.valid_from is not None and reading.valid_from > said_at


@given(said_at=SAID_ATS, n=st.integers(1, 12), unit=st.sampled_from(["days", "weeks"]))
def test_in_n_units_is_that_day(said_at: datetime, n: int, unit: str) -> None:
    reading = read_time(f"I'm flying home in {n} {unit}.", said_at=said_at)
    target = (said_at + timedelta(**{unit: n})).date()
    assert reading.time_kind is K.ONE_OFF
    assert reading.valid_from is not None and reading.valid_from.date() == target


# --- areas ---------------------------------------------------------------------------

AREA_CASES = [
    ("I'm allergic to peanuts.", ContentType.CONSTRAINT, [LifeArea.HEALTH]),
    ("My name is Ana.", ContentType.PERSONAL_FACT, [LifeArea.GENERAL]),
    ("My time zone is CET.", ContentType.PERSONAL_FACT, [LifeArea.GENERAL]),
    ("I see the sky.", ContentType.PERSONAL_FACT, [LifeArea.GENERAL]),
    ("My boss wants the report by Friday.", ContentType.PERSONAL_FACT, [LifeArea.WORK]),
    ("My sister lives in Oslo.", ContentType.RELATIONSHIP, [LifeArea.RELATIONSHIPS]),
    ("I'm paying off my mortgage.", ContentType.GOAL, [LifeArea.FINANCE]),
    ("I prefer a window seat on flights.", ContentType.PREFERENCE, [LifeArea.TRAVEL]),
    ("I'm learning Spanish at school.", ContentType.GOAL, [LifeArea.LEARNING]),
]


@pytest.mark.parametrize(("sentence", "content_type", "expected"), AREA_CASES)
def test_life_areas(sentence: str, content_type: ContentType, expected: list[LifeArea]) -> None:
    areas = life_areas(sentence, content_type)
    assert areas[: len(expected)] == expected, areas


def test_working_from_home_is_work_and_home() -> None:
    assert set(life_areas("For now I'm working from home.", ContentType.ROUTINE)) == {
        LifeArea.WORK,
        LifeArea.HOME,
    }


@given(text=st.text(max_size=200), content_type=st.sampled_from(ContentType))
def test_life_areas_one_to_three_distinct_and_deterministic(
    text: str, content_type: ContentType
) -> None:
    areas = life_areas(text, content_type)
    assert 1 <= len(areas) <= 3
    assert len(set(areas)) == len(areas)
    assert areas == life_areas(text, content_type)
    if content_type is ContentType.RELATIONSHIP:
        assert LifeArea.RELATIONSHIPS in areas


# --- sensitivity ---------------------------------------------------------------------

SENSITIVE_CASES = [
    ("I'm allergic to peanuts.", Sensitivity.HEALTH),
    ("I take medication for my anxiety.", Sensitivity.HEALTH),
    ("I was diagnosed with diabetes last year.", Sensitivity.HEALTH),
    ("I see a therapist on Tuesdays.", Sensitivity.HEALTH),
    ("I'm pregnant.", Sensitivity.HEALTH),
    ("I go to church every Sunday.", Sensitivity.RELIGIOUS_BELIEF),
    ("I'm an atheist.", Sensitivity.RELIGIOUS_BELIEF),
    ("I voted for the Greens.", Sensitivity.POLITICAL_OPINION),
    ("I'm gay.", Sensitivity.SEX_LIFE),
    ("My family is of Korean descent.", Sensitivity.ETHNIC_ORIGIN),
    ("I'm a member of the trade union.", Sensitivity.TRADE_UNION),
    ("My DNA test showed a BRCA1 mutation.", Sensitivity.GENETIC),
    ("I unlock my laptop with my fingerprint.", Sensitivity.BIOMETRIC),
    ("My salary is 60k.", Sensitivity.FINANCIAL_DETAIL),
    ("I have 20k of credit card debt.", Sensitivity.FINANCIAL_DETAIL),
    ("My credit score is 710.", Sensitivity.FINANCIAL_DETAIL),
]
NORMAL_CASES = [
    "I'm sick of waiting.",
    "I'm sick and tired of meetings.",
    "Oh my god, I love this cafe.",
    "A bit of retail therapy never hurts.",
    "I like my coffee hot.",
    "I'm going to a birthday party.",
    "I ran a 10k race on Sunday.",
    "I'll call you.",
]


@pytest.mark.parametrize(("sentence", "expected"), SENSITIVE_CASES)
def test_sensitive_classes(sentence: str, expected: Sensitivity) -> None:
    assert sensitivity_of(sentence, None) is expected
    assert sensitivity_of(sentence, Sensitivity.NORMAL) is expected
    assert find_sensitive(sentence)[0].cue


@pytest.mark.parametrize("sentence", NORMAL_CASES)
def test_idioms_are_not_sensitive(sentence: str) -> None:
    assert sensitivity_of(sentence, None) is Sensitivity.NORMAL, find_sensitive(sentence)


@given(text=st.text(max_size=200), hint=st.none() | st.sampled_from(Sensitivity))
def test_sensitivity_raises_never_lowers(text: str, hint: Sensitivity | None) -> None:
    result = sensitivity_of(text, hint)
    if hint is not None and hint is not Sensitivity.NORMAL:
        assert result is hint  # a sensitive hint is kept
    found = find_sensitive(text)
    if found:
        assert result is not Sensitivity.NORMAL


def test_a_sensitive_hint_is_kept_even_if_the_lexicon_finds_another() -> None:
    assert sensitivity_of("My salary is 60k.", Sensitivity.HEALTH) is Sensitivity.HEALTH


# --- extraction ----------------------------------------------------------------------

TYPE_CASES = [
    ("I love sushi.", ContentType.PREFERENCE),
    ("I don't like olives.", ContentType.PREFERENCE),
    ("I usually run in the morning.", ContentType.ROUTINE),
    ("I want to run a marathon.", ContentType.GOAL),
    ("I'm allergic to peanuts.", ContentType.CONSTRAINT),
    ("I don't eat pork.", ContentType.CONSTRAINT),
    ("I don't work on Fridays.", ContentType.CONSTRAINT),
    ("My wife loves sushi.", ContentType.RELATIONSHIP),
    ("My brother lives in Oslo.", ContentType.RELATIONSHIP),
    ("I think remote work is better.", ContentType.OPINION),
    ("I'm seeing the dentist next Friday.", ContentType.EVENT),
    ("I live in Lisbon.", ContentType.PERSONAL_FACT),
]


@pytest.mark.parametrize(("sentence", "expected"), TYPE_CASES)
def test_rule_extractor_content_type(sentence: str, expected: ContentType) -> None:
    extraction = RuleExtractor().extract(sentence, said_at=SAID_AT, hints=Hints())
    assert extraction.content_type is expected


def test_rule_extractor_takes_the_hints() -> None:
    hints = Hints(
        content_type=ContentType.GOAL, sensitivity=Sensitivity.HEALTH, time_kind=K.FOR_NOW
    )
    extraction = RuleExtractor().extract("I walk to work.", said_at=SAID_AT, hints=hints)
    assert extraction.content_type is ContentType.GOAL
    assert extraction.sensitivity is Sensitivity.HEALTH
    assert extraction.time.time_kind is K.FOR_NOW
    assert extraction.type_cue is None


def test_rule_extractor_fills_every_field() -> None:
    extraction = RuleExtractor().extract("I'm allergic to peanuts.", said_at=SAID_AT, hints=Hints())
    assert extraction == Extraction(
        content_type=ContentType.CONSTRAINT,
        time=TimeReading(K.PERMANENT, None, None, None, None),
        life_areas=(LifeArea.HEALTH,),
        sensitivity=Sensitivity.HEALTH,
        subject=None,
        type_cue="allergic",
    )


class _Forgetful:
    """A stand-in for a model extractor that says everything is a normal opinion."""

    name = "forgetful"

    def extract(self, sentence: str, *, said_at: datetime, hints: Hints) -> Extraction:
        base = RuleExtractor().extract(sentence, said_at=said_at, hints=Hints())
        return Extraction(
            content_type=ContentType.OPINION,
            time=base.time,
            life_areas=base.life_areas,
            sensitivity=Sensitivity.NORMAL,
            subject="x",
        )


def test_chain_refines_in_order_and_never_lowers_sensitivity() -> None:
    rules: Extractor = RuleExtractor()
    chain = ChainExtractor([rules, _Forgetful()])
    assert chain.name == "chain(rules-v1,forgetful)"
    result = chain.extract("I'm allergic to peanuts.", said_at=SAID_AT, hints=Hints())
    assert result.content_type is ContentType.OPINION  # the later extractor refined it
    assert result.sensitivity is Sensitivity.HEALTH  # but could not lower sensitivity
    # A rules step after a model step takes the model's content type as its hint.
    after = ChainExtractor([_Forgetful(), rules]).extract(
        "I love sushi.", said_at=SAID_AT, hints=Hints()
    )
    assert after.content_type is ContentType.OPINION


def test_chain_needs_an_extractor() -> None:
    with pytest.raises(ValueError):
        ChainExtractor([])


@given(text=st.text(max_size=200), said_at=SAID_ATS)
def test_rule_extractor_never_raises(text: str, said_at: datetime) -> None:
    extraction = RuleExtractor().extract(text, said_at=said_at, hints=Hints())
    assert 1 <= len(extraction.life_areas) <= 3


# --- behaviour observations ----------------------------------------------------------

PART = st.text(min_size=1, max_size=40).filter(
    lambda s: s.strip() and ": " not in s and len(s.splitlines()) == 1 and s == s.splitlines()[0]
)


@given(subject=PART, value=PART)
def test_event_text_round_trips(subject: str, value: str) -> None:
    text = event_text(subject, value)
    assert parse_event(text) == BehaviourEvent(subject, value)


@given(text=st.text(max_size=80))
def test_parse_event_is_the_exact_inverse(text: str) -> None:
    event = parse_event(text)
    if event is not None:
        assert event_text(event.subject, event.value) == text


@pytest.mark.parametrize(
    ("subject", "value", "why"),
    [
        ("", "americano", "empty"),
        ("  ", "americano", "empty"),
        ("coffee", "", "empty"),
        ("order: morning", "americano", "cannot contain"),
        ("coffee", "a: b", "cannot contain"),
        ("coffee\norder", "americano", "one line"),
        ("coffee", "ameri\rcano", "one line"),
    ],
)
def test_event_text_refuses(subject: str, value: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        event_text(subject, value)


def test_event_text_example() -> None:
    assert event_text("morning coffee order", "americano") == "morning coffee order: americano"
    assert parse_event("no separator here") is None


T0 = datetime(2026, 3, 1, 8, 10, tzinfo=UTC)


def ep(i: int) -> str:
    return f"ep_{i:010d}"


def events(
    values: list[str], subject: str = "morning coffee order", first: int = 0
) -> list[ObservedEvent]:
    return [
        ObservedEvent(ep(first + i), subject, v, T0 + timedelta(days=i), "dev_phone0001")
        for i, v in enumerate(values)
    ]


def test_the_americano_example() -> None:
    values = ["americano"] * 14 + ["latte"] * 3
    values = values[::2] + values[1::2]  # interleave a little
    [summary] = summarise(events(values))
    assert "14 of the last 17" in summary.observed_text
    assert summary.observed_text == "14 of the last 17 morning coffee orders were americano."
    assert (summary.count, summary.total, summary.top_value) == (14, 17, "americano")
    assert summary.ratio == pytest.approx(14 / 17)
    assert summary.reading is Reading.INFERRED
    assert summary.inferred_text == "Usually chooses americano for morning coffee order."
    assert summary.alternatives == ()
    assert summary.evidence.count == 17
    assert summary.evidence.ratio == pytest.approx(14 / 17)
    assert all(o.source_kind is SourceKind.USER_BEHAVIOUR for o in summary.evidence.observations)
    assert summary.confidence is not None
    assert summary.confidence.shown is ConfidenceClass.I_THINK_SO
    content = summary.content()
    assert content.epistemic_state.value == "inferred"
    assert content.source_episode_ids == list(summary.episode_ids)


def test_a_fifty_fifty_split_is_a_hypothesis_with_alternatives() -> None:
    [summary] = summarise(events(["americano", "latte"] * 5))
    assert summary.reading is Reading.HYPOTHESIS
    assert summary.ratio == 0.5
    # A tie goes to the value chosen most recently; the other is the first alternative.
    assert (summary.top_value, summary.runner_up) == ("latte", "americano")
    texts = [a.text for a in summary.alternatives]
    assert "americano" in texts[0] and any("vary by day" in t for t in texts)
    assert summary.confidence is not None
    assert summary.confidence.shown is ConfidenceClass.NOT_SURE


def test_two_close_values_among_three_are_a_hypothesis() -> None:
    [summary] = summarise(events(["a"] * 4 + ["b"] * 4 + ["c"] * 3))
    assert summary.ratio < 0.5 and summary.reading is Reading.HYPOTHESIS


def test_too_few_events_are_only_observed() -> None:
    [summary] = summarise(events(["americano", "americano"]))
    assert summary.reading is Reading.OBSERVED_ONLY
    assert summary.confidence is None and summary.inferred_text is None
    assert summary.observed_text == "2 of the last 2 morning coffee orders were americano."
    [one] = summarise(events(["tea"]))
    assert one.observed_text == "The last morning coffee order was tea."
    assert one.content().epistemic_state.value == "observed"


def test_window_is_honoured() -> None:
    # 30 lattes long ago, then 20 americanos: the last 20 are all americano.
    [summary] = summarise(events(["latte"] * 30 + ["americano"] * 20), window=20)
    assert (summary.total, summary.count, summary.top_value) == (20, 20, "americano")
    assert summary.episode_ids == tuple(ep(i) for i in range(30, 50))
    [small] = summarise(events(["latte"] * 30 + ["americano"] * 2), window=5)
    assert (small.total, small.count, small.top_value) == (5, 3, "latte")


def test_window_ties_by_episode_id() -> None:
    same_time = [
        ObservedEvent(ep(i), "lunch", "soup" if i < 3 else "salad", T0, "dev_phone0001")
        for i in range(6)
    ]
    [summary] = summarise(same_time, window=3)
    assert summary.episode_ids == (ep(3), ep(4), ep(5))


def test_the_same_episode_twice_counts_once() -> None:
    base = events(["americano"] * 4 + ["latte"])
    [once] = summarise(base)
    [twice] = summarise([*base, base[0], base[0]])
    assert once == twice
    assert twice.total == 5 and twice.evidence.count == 5


def test_subjects_are_grouped_normalised() -> None:
    later = ObservedEvent(ep(99), "morning drink", "Tea", T0 + timedelta(days=9), "dev_p0001")
    mixed = [*events(["tea"] * 3, subject="Morning  Drink"), later]
    summaries = summarise(mixed + events(["soup"], subject="lunch", first=50))
    assert [s.subject for s in summaries] == ["lunch", "morning drink"]
    drink = summaries[1]
    assert (drink.count, drink.total, drink.top_value) == (4, 4, "Tea")


def test_at_most_64_episode_ids() -> None:
    [summary] = summarise(events(["americano"] * 100), window=100)
    assert summary.total == 100 and len(summary.episode_ids) == 64
    assert summary.episode_ids[-1] == ep(99)


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError):
        summarise(events(["a"]), window=0)
    with pytest.raises(ValueError, match="episode id"):
        ObservedEvent("not-an-id", "s", "v", T0, "x")
    with pytest.raises(ValueError, match="timezone"):
        ObservedEvent(ep(1), "s", "v", datetime(2026, 1, 1), "x")


def test_plural() -> None:
    assert plural("morning coffee order") == "morning coffee orders"
    assert plural("lunch") == "lunches"
    assert plural("daily story") == "daily stories"
    assert plural("day") == "days"


@settings(max_examples=100)
@given(
    values=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=40),
    window=st.integers(1, 30),
)
def test_summaries_are_consistent(values: list[str], window: int) -> None:
    [summary] = summarise(events(values), window=window)
    assert summary.total == min(window, len(values))
    assert summary.count == sum(o.supports for o in summary.evidence.observations)
    assert summary.ratio == summary.count / summary.total
    if summary.reading is Reading.INFERRED:
        assert summary.total >= 5 and summary.ratio >= 0.75
    if summary.reading is not Reading.OBSERVED_ONLY:
        assert summary.confidence is not None and 0.0 <= summary.confidence.score <= 1.0
