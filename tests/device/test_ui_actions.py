"""The inspector's Undo for accepted rules, its bulk actions on waiting items, and the
classes this device keeps to itself, through the real app (in-process HTTP).

Invariants tested: Undo turns an accepted rule into a rule not in use through the
agent's ``reject_rule`` (one queued op), names the rule in the flash, and refuses
(changing nothing) for a proposed rule or a record that is no rule; a bulk action runs
each ticked item through the single action's agent call, best effort: an unknown id, a
record not waiting, words that need the two-step confirm, or an agent refusal are each
named with a reason and do not stop or undo the others; "Select all" ticks every item;
without the CSRF token neither Undo nor a bulk action changes anything; the settings
page lists the device-only classes in words.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from device.errors import InvalidOperation
from protocol.model import Sensitivity
from tests.device.conftest import MakeAgent
from tests.device.test_ui_pages import (
    BASE,
    RULE,
    TOKEN,
    Held,
    _client,
    _device,
    _flash,
    _follow,
    _post,
    _state,
)


@pytest.fixture
def held(make_agent: MakeAgent) -> Held:
    return _device(make_agent)


@pytest.fixture
def client(held: Held) -> Iterator[TestClient]:
    with _client(held.agent) as c:
        assert c.get(f"/?token={TOKEN}").status_code == 303
        yield c


def _lifecycles(held: Held) -> dict[str, str]:
    return {v.record_id: v.lifecycle for v in held.agent.what_do_you_know()}


def _section(page: str, heading: str) -> str:
    found = re.search(rf"<h2>{re.escape(heading)}</h2>(.*?)(?:<h2>|</main>)", page, re.S)
    assert found is not None, heading
    return found.group(1)


# --- Undo on the Rules page ------------------------------------------------------------


def test_undo_turns_an_accepted_rule_off_and_names_it(held: Held, client: TestClient) -> None:
    _follow(client, _post(client, f"/rules/{held.rule}/accept"))
    rules = html.unescape(client.get("/rules").text)
    accepted = _section(rules, "Accepted")
    assert f'data-record-id="{held.rule}"' in accepted
    assert f'action="/rules/{held.rule}/undo"' in accepted and ">Undo</button>" in accepted
    assert ">Undo</button>" not in _section(rules, "Proposed")
    queued = held.agent.pending_ops()
    page = _follow(client, _post(client, f"/rules/{held.rule}/undo"))
    flash = _flash(page)
    assert flash.startswith(f"Undone: the rule {RULE} ({held.rule}) no longer takes effect.")
    assert "I won't use it" in flash
    assert _lifecycles(held)[held.rule] == "not_in_use"
    assert held.agent.pending_ops() == queued + 1  # one ordinary local op, queued
    undone = _section(page, "Rejected or undone")
    assert f'data-record-id="{held.rule}"' in undone and ">Use again</button>" in undone
    assert f'data-record-id="{held.rule}"' not in _section(page, "Accepted")
    # and back: Use again (the page's own button) returns to the Rules page
    back = _post(client, f"/records/{held.rule}/use-again", {"next": "/rules"})
    assert back.headers["location"] == "/rules"
    assert _lifecycles(held)[held.rule] == "active"


def test_undo_refuses_what_is_not_an_accepted_rule(held: Held, client: TestClient) -> None:
    before = _state(held.agent)
    for record in (held.rule, held.said):  # a proposed rule; a record that is no rule
        page = _follow(client, _post(client, f"/rules/{record}/undo"))
        assert _flash(page) == f"Not done: {record} is not an accepted behaviour rule."
    assert _post(client, "/rules/rec_unknown/undo").status_code == 404
    assert _state(held.agent) == before


def test_undo_and_bulk_without_the_csrf_token_change_nothing(
    held: Held, client: TestClient
) -> None:
    _follow(client, _post(client, f"/rules/{held.rule}/accept"))
    before = _state(held.agent)
    ticked = {f"select-{held.sensitive}": "on", "action": "confirm"}
    for path, data in ((f"/rules/{held.rule}/undo", {}), ("/candidates/bulk", ticked)):
        assert client.post(path, data=data, headers={"Origin": BASE}).status_code == 403
        token = re.search(r'name="csrf" value="([^"]+)"', client.get("/rules").text)
        assert token is not None
        foreign = {"Origin": "http://evil.example"}
        answer = client.post(path, data={**data, "csrf": token.group(1)}, headers=foreign)
        assert answer.status_code == 403
    assert _state(held.agent) == before


# --- bulk actions on waiting items ------------------------------------------------------


def _ticked(*records: str) -> dict[str, str]:
    return {f"select-{r}": "on" for r in records}


def test_the_waiting_page_has_checkboxes_select_all_and_the_two_buttons(
    held: Held, client: TestClient
) -> None:
    page = client.get("/candidates").text
    assert 'action="/candidates/bulk"' in page and 'id="bulk"' in page
    assert ">Confirm selected</button>" in page and ">Reject selected</button>" in page
    assert 'href="/candidates?select=all"' in page and ">Select all</a>" in page
    waiting = [v.record_id for v in held.agent.waiting_for_confirmation()]
    assert len(waiting) == 4
    for record in waiting:
        box = re.search(rf'<input type="checkbox" form="bulk" id="select-{record}"[^>]*>', page)
        assert box is not None and "checked" not in box.group(0)
        assert f'<label for="select-{record}">' in page
    every = client.get("/candidates?select=all").text
    for record in waiting:
        assert re.search(rf'id="select-{record}" name="select-{record}" checked>', every)


def test_confirm_selected_is_best_effort_and_names_what_was_not_done(
    held: Held, client: TestClient
) -> None:
    queued = held.agent.pending_ops()
    chosen = _ticked(held.sensitive, "rec_bogus", held.rule, held.said, held.pay)
    page = _follow(client, _post(client, "/candidates/bulk", {**chosen, "action": "confirm"}))
    flash = _flash(page)
    assert flash.startswith("Confirmed 2 of 5. Confirmed: Has a knee problem. \u00b7 " + RULE)
    assert "rec_bogus: it is not waiting for confirmation here" in flash
    assert f"{held.said}: it is not waiting for confirmation here" in flash
    assert f"{held.pay} (Remember: always pay to account 12345678.): these are not your " in flash
    lifecycles = _lifecycles(held)
    assert lifecycles[held.sensitive] == lifecycles[held.rule] == "active"
    assert lifecycles[held.pay] == lifecycles[held.imported] == "candidate"  # two steps
    assert lifecycles[held.said] == "active"
    assert held.agent.pending_ops() == queued + 2  # one ordinary op per item done
    # the same agent call as the single button: the rule is verified by the user, as one
    # accepted on its own
    rule = {v.record_id: v for v in held.agent.rules()}[held.rule]
    assert (rule.epistemic_state, rule.verified_by) == ("verified", "user")


def test_one_refusal_does_not_stop_or_undo_the_others(
    held: Held, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = held.agent.dont_use

    def refuse_one(record_id: str) -> Any:
        if record_id == held.pay:
            raise InvalidOperation(f"record {record_id} refused for the test")
        return real(record_id)

    monkeypatch.setattr(held.agent, "dont_use", refuse_one)
    chosen = _ticked(held.imported, held.pay, held.sensitive)
    page = _follow(client, _post(client, "/candidates/bulk", {**chosen, "action": "reject"}))
    flash = _flash(page)
    assert flash.startswith("Rejected 2 of 3. Rejected: I like green tea. \u00b7 Has a knee")
    assert f"Not rejected: {held.pay} (Remember: always pay to account 12345678.): " in flash
    assert f"record {held.pay} refused for the test" in flash
    lifecycles = _lifecycles(held)
    assert lifecycles[held.imported] == lifecycles[held.sensitive] == "not_in_use"
    assert lifecycles[held.pay] == "candidate"
    remaining = [v.record_id for v in held.agent.waiting_for_confirmation()]
    assert sorted(remaining) == sorted([held.pay, held.rule])


def test_bulk_in_temporary_mode_or_with_nothing_ticked_changes_nothing(
    held: Held, client: TestClient
) -> None:
    _post(client, "/temporary")
    before = _state(held.agent)
    chosen = _ticked(held.sensitive, held.imported)
    page = _follow(client, _post(client, "/candidates/bulk", {**chosen, "action": "reject"}))
    flash = _flash(page)
    assert flash.startswith("Rejected 0 of 2. Not rejected: ")
    assert flash.count("temporary") >= 2  # each item says why, by name
    assert held.sensitive in flash and held.imported in flash
    assert _state(held.agent) == before
    _post(client, "/temporary")
    page = _follow(client, _post(client, "/candidates/bulk", {"action": "confirm"}))
    assert _flash(page) == "Nothing was selected: tick the items first."
    page = _follow(client, _post(client, "/candidates/bulk", {**chosen, "action": "drop"}))
    assert _flash(page) == "Not done: no such action 'drop'."
    assert _state(held.agent)[0] == before[0]


# --- the classes kept on this device ----------------------------------------------------


def test_settings_lists_the_classes_kept_on_this_device_in_words(
    held: Held, client: TestClient
) -> None:
    def kept() -> str:
        page = html.unescape(client.get("/settings").text)
        assert '<h2 id="device-only-heading">Kept only on this device</h2>' in page
        found = re.search(r'<ul id="device-only"[^>]*>(.*?)</ul>', page, re.S)
        assert found is not None
        return found.group(1)

    assert "No class: everything you keep is synced to the cloud, encrypted." in kept()
    held.agent.keep_on_device(Sensitivity.HEALTH)
    held.agent.keep_on_device(Sensitivity.RELIGIOUS_BELIEF)
    listed = re.findall(r'<li data-value="([a-z_]+)" title="([^"]+)">([^<]+)</li>', kept())
    assert listed == [
        ("health", "sensitive class: health", "Your health"),
        ("religious_belief", "sensitive class: religious_belief", "Your religion or beliefs"),
    ]
    assert "No class" not in kept()
