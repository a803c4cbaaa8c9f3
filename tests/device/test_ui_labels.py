"""The inspector's words (``device.ui.labels``): every member of every enum a page shows
has a label, no page shows a raw enum name where a person reads, the raw value stays in
``data-value``/``title``, and every record, waiting item and rule says when it was
learned (in UTC).

Invariants tested: a new enum member without a label fails here by name; the enums the
record views carry are all in ``SHOWN``; the sync states are the store's; every badge
that carries a raw value shows that value's label; the learned time on a page is the
record's first version's ``recorded_at`` in words, with its ISO value in ``<time>``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from enum import StrEnum

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from device.store import SYNC_STATES
from device.ui import labels
from device.ui.labels import SHOWN, Kind, SyncState, in_words, label, when
from protocol.confidence import ConfidenceClass
from protocol.model import (
    ContentType,
    EpistemicState,
    Layer,
    LifeArea,
    LifecycleState,
    Sensitivity,
    SourceKind,
    TimeKind,
)
from protocol.subset import Reason
from tests.device.conftest import MakeAgent
from tests.device.test_ui_pages import TOKEN, Held, _all_pages, _client, _device, _post

# every enum whose values reach a page (RecordView's fields, the subset's reasons, the
# kinds of words): a new one must be added to SHOWN, with words for each member
ON_PAGES: tuple[type[StrEnum], ...] = (
    LifecycleState, ContentType, EpistemicState, ConfidenceClass, TimeKind, Layer,
    Sensitivity, SourceKind, LifeArea, SyncState, Kind, Reason,
)  # fmt: skip


def test_every_member_of_every_enum_shown_has_words() -> None:
    missing = [
        f"{enum.__name__}.{member.name}"
        for enum in ON_PAGES
        for member in enum
        if not SHOWN.get(enum, ("", {}))[1].get(member, "").strip()
    ]
    assert missing == [], f"no words for {missing}"
    assert set(ON_PAGES) == set(SHOWN), "an enum shown on a page is not in ON_PAGES"
    for enum, (field, words) in SHOWN.items():
        assert field and set(words) == set(enum), enum.__name__  # nothing extra either
        for member in enum:
            shown = label(enum, member.value)
            assert shown == words[member]
            if enum is not ConfidenceClass:  # its values are already sentences
                assert shown != member.value, (enum.__name__, member)
            assert "_" not in shown, (enum.__name__, member, shown)
    assert {s.value for s in SyncState} == set(SYNC_STATES)


def test_the_issues_examples_and_values_outside_an_enum() -> None:
    assert label(LifecycleState, "candidate") == "Waiting for your OK"
    assert label(ContentType, "personal_fact") == "A fact about you"
    assert label(Layer, "consolidated_fact") == "A lasting fact"
    assert label(Sensitivity, "health") == "Your health"
    assert label(ContentType, "my_recipe") == "My recipe"  # a custom type, in words
    assert in_words("trade_union") == "Trade union" and label(ContentType, None) == ""


def test_a_missing_label_is_refused_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(labels.SENSITIVITY, Sensitivity.GENETIC)
    assert labels._missing() == ["Sensitivity.GENETIC"]


@given(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1),
                    timezones=st.sampled_from([UTC, None])))  # fmt: skip
def test_a_time_is_words_in_utc(moment: datetime) -> None:
    words = when(moment)
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
    assert words == when(utc.isoformat())
    assert words.endswith(" UTC") and f" {utc.year} at {utc:%H:%M} UTC" in words
    assert words.startswith(f"{utc.day} ") and utc.strftime("%m") not in words.split(" ")[1]
    # the same instant in another offset is the same words
    shifted = utc.astimezone(__import__("datetime").timezone(timedelta(hours=5, minutes=30)))
    assert when(shifted) == words


# --- on the pages ----------------------------------------------------------------------


@pytest.fixture
def held(make_agent: MakeAgent) -> Held:
    return _device(make_agent)


@pytest.fixture
def client(held: Held) -> Iterator[TestClient]:
    with _client(held.agent) as c:
        assert c.get(f"/?token={TOKEN}").status_code == 303
        yield c


_RAW = {m.value for enum in SHOWN for m in enum}
_BADGE = re.compile(r'<span class="badge" data-value="([^"]*)" title="([^"]*)">([^<]*)</span>')


def _visible(page: str) -> str:
    """What a person reads: the text between tags (attributes are not read)."""
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_no_page_shows_an_enum_name_and_every_badge_keeps_its_value(
    held: Held, client: TestClient
) -> None:
    _post(client, f"/rules/{held.rule}/accept")  # an accepted rule too
    by_field = {field: enum for enum, (field, _) in SHOWN.items()}
    assert len(by_field) == len(SHOWN)
    badges = 0
    for path in _all_pages(held):
        page = client.get(path).text
        seen = _visible(page)
        for raw in (v for v in _RAW if "_" in v):
            assert not re.search(rf"\b{re.escape(raw)}\b", seen), (path, raw)
        for value, title, text in _BADGE.findall(html.unescape(page)):
            field, _, titled = title.partition(": ")
            enum = by_field[field]
            assert titled == value and text == label(enum, value), (path, value)
            assert enum(value).value == value  # a member, not an unknown value
            badges += 1
        for text in re.findall(r'<span class="badge">([^<]*)</span>', page):
            assert text not in _RAW or text in {c.value for c in ConfidenceClass}, (path, text)
    assert badges > 50
    record = html.unescape(client.get(f"/records/{held.sensitive}").text)
    details = re.search(r'<dl id="details">(.*?)</dl>', record, re.S)
    assert details is not None
    for name, value, words in (
        ("Type", "personal_fact", "A fact about you"),
        ("Kind of memory", "consolidated_fact", "A lasting fact"),
        ("Sensitive class", "health", "Your health"),
        ("Learned from", "user_behaviour", "What you did in an app"),
        ("State", "candidate", "Waiting for your OK"),
        ("Sync", "pending", "Not synced yet"),
        ("Life area", "health", "Health"),
    ):
        assert f'<dt>{name}</dt><dd data-value="{value}"' in details.group(1), name
        assert f">{words}</dd>" in details.group(1), words
    memory = client.get("/memory").text
    assert '<option value="personal_fact">A fact about you</option>' in memory
    assert '<option value="candidate">Waiting for your OK</option>' in memory
    assert '<option value="leisure">Leisure</option>' in memory


def _learned(page: str, record_id: str) -> str:
    found = re.search(rf'data-record-id="{record_id}".*?<p class="learned">(.*?)</p>', page, re.S)
    assert found is not None, record_id
    return found.group(1)


def test_every_record_waiting_item_and_rule_says_when_it_was_learned(
    held: Held, client: TestClient
) -> None:
    views = {v.record_id: v for v in held.agent.what_do_you_know()}
    first = {r: held.agent.record_history(r)[0].recorded_at for r, v in views.items() if v.version}
    memory = html.unescape(client.get("/memory").text)
    for record, at in first.items():
        assert views[record].recorded_at is not None
        line = _learned(memory, record)
        assert line.startswith(f'Learned on <time datetime="{at}">{when(at)}</time>'), record
        assert " UTC</time>" in line
    # a corrected record: learned with its first version, last changed with its newest
    corrected = _learned(memory, held.corrected)
    newest = views[held.corrected].recorded_at
    assert first[held.corrected] != newest
    assert f'last changed on <time datetime="{newest}">{when(newest)}</time>' in corrected
    assert "last changed" not in _learned(memory, held.said)
    assert re.search(r"Learned on <time [^>]+>1 March 2026 at 09:3\d UTC</time>", memory)
    waiting = html.unescape(client.get("/candidates").text)
    for record in (held.sensitive, held.imported, held.pay, held.rule):
        assert _learned(waiting, record).startswith(f'Learned on <time datetime="{first[record]}"')
    rules = html.unescape(client.get("/rules").text)
    assert when(first[held.rule]) in _learned(rules, held.rule)
    _post(client, f"/rules/{held.rule}/accept")
    rules = html.unescape(client.get("/rules").text)
    assert when(first[held.rule]) in _learned(rules, held.rule)  # accepted: still learned then
    page = html.unescape(client.get(f"/records/{held.said}").text)
    assert _learned(page, held.said).startswith(f'Learned on <time datetime="{first[held.said]}"')
