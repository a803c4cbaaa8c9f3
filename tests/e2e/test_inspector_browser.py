"""The memory inspector in a real browser (Debian's headless chromium, Playwright), as a
new user opens it: the phone of a held-back account serves its inspector on loopback
(``device.ui.server.serve_ui``), a real cloud (uvicorn, SQLite) and a second device,
the laptop, which hears every change only by syncing.

Invariants checked:
- The list groups records under "Area: …" and "Project: …"; only what the user typed is
  quoted (dated); an inference is shown with its label and never as "you said"; an
  accepted rule says "You accepted this rule", never "you said", and a confirmed web
  page's claim names its source, never quoted as the user's; each kind looks different.
- Every waiting item says why it waits, in words; confirming words that are not the
  user's (a web page's, an import's) takes a second step that shows the source, its
  full reference and a warning; the first click confirms nothing.
- Search lists the retrieval pipeline's hits in its order.
- "How do you know this?" shows the device's explanation, the dated source quote and
  the version chain of a corrected record, never the old body.
- Every action (correct, don't use / use again, forget, confirm) changes the phone's
  memory through its agent, and the laptop holds the same effect after both sync.
- Forget asks for confirmation (a required checkbox), names the devices still pending,
  and afterwards the text is on no page of the inspector, search included.
- Every control is reachable by keyboard and has an accessible name.
- Words, not enum names: badges and details read "Waiting for your OK", "Your health",
  the raw value in their title; every item says when it was learned (UTC); Undo on an
  accepted rule turns it off, on the laptop too; ticked waiting items are confirmed or
  rejected together, a source's words left for their second step, by name; Settings
  lists the classes kept only on this device.
- Without the token there is only the 403 page; a form posted from another origin
  changes nothing, even with the right CSRF token.
No test waits by sleeping: Playwright's auto-waiting and ``expect`` do the waiting.
"""

from __future__ import annotations

import contextlib
import re

import pytest

from protocol.model import Sensitivity
from tests.e2e.browser import (
    ASTHMA,
    ATTIC,
    BROTHER,
    CELLO,
    DENTIST,
    DENTIST_URL,
    HOT,
    ICED,
    LOCKER,
    PAY,
    PAY_URL,
    PORTO,
    QUIET,
    RULE,
    HeldBack,
    Inspector,
    attacker_page,
    serve_pages,
)

# without playwright the `chromium` fixture skips (under CI=true: fails) saying so
with contextlib.suppress(ImportError):
    from playwright.sync_api import Locator, Page, expect

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

NAV = (
    "What do you know about me?",
    "Recently learned",
    "Waiting for confirmation",
    "Behaviour rules",
    "Devices and settings",
)


def _base(inspector: Inspector) -> str:
    return inspector.base.rstrip("/")


def _open(page: Page, inspector: Inspector) -> str:
    """Open the printed link: the token is swapped for the session cookie, then /memory."""
    base = _base(inspector)
    page.goto(inspector.url)
    expect(page).to_have_url(f"{base}/memory")
    expect(page.get_by_role("heading", level=1)).to_have_text("What do you know about me?")
    return base


def _record(page: Page | Locator, record_id: str) -> Locator:
    return page.locator(f'article.record[data-record-id="{record_id}"]')


def _badge(article: Locator, text: str) -> Locator:
    return article.locator("span.badge").filter(has_text=re.compile(rf"^\s*{re.escape(text)}\s*$"))


def _day(iso: str | None) -> str:
    assert iso is not None
    return iso[:10]


def _flash(page: Page) -> Locator:
    return page.locator('p[role="status"]#flash')


def test_the_list_groups_by_area_and_project_and_quotes_only_what_was_said(
    page: Page, inspector: Inspector, held_back: HeldBack
) -> None:
    held = held_back
    _open(page, inspector)
    nav = page.get_by_role("navigation", name="Inspector")
    for name in NAV:
        expect(nav.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Sync now", exact=True)).to_be_visible()
    expect(page.locator("html")).to_have_attribute("lang", "en")

    home = page.get_by_role("region", name=re.compile(r"^Area: home$", re.IGNORECASE))
    leisure = page.get_by_role("region", name=re.compile(r"^Area: leisure$", re.IGNORECASE))
    attic = page.get_by_role("region", name=re.compile(r"^Project: attic$", re.IGNORECASE))
    expect(_record(home, held.porto)).to_have_count(1)
    expect(_record(leisure, held.cello)).to_have_count(1)
    expect(_record(leisure, held.quiet)).to_have_count(1)
    expect(_record(attic, held.attic)).to_have_count(1)
    expect(_record(attic, held.attic)).to_contain_text(ATTIC)

    # what the user said: their words, in quotes, dated
    porto = _record(page, held.porto)
    said_on = _day(held.view(held.phone, held.porto).recorded_at)
    expect(porto).to_contain_text(f"On {said_on} you said: \u201c{PORTO}\u201d")
    expect(_badge(porto, "You told me")).to_have_count(1)
    expect(_badge(porto, "In use")).to_have_count(1)
    expect(porto.get_by_role("link", name="How do you know this?")).to_have_attribute(
        "href", re.compile(rf"/records/{held.porto}$")
    )

    # an inference: labelled as what it is, never quoted, never "you said"
    quiet = _record(page, held.quiet)
    label = held.view(held.phone, held.quiet).confidence
    assert label is not None and label != "You told me"
    expect(quiet).to_contain_text(f"{label}: {QUIET}")
    expect(_badge(quiet, label)).to_have_count(1)
    expect(quiet).not_to_contain_text("you said")
    expect(quiet).not_to_contain_text(f"\u201c{QUIET}\u201d")
    expect(quiet).not_to_contain_text(f'"{QUIET}"')
    # ... and so is the import, which is a candidate, not in use
    brother = _record(page, held.brother)
    expect(brother).to_contain_text(f"Imported, not verified: {BROTHER}")
    expect(brother).not_to_contain_text("you said")
    expect(_badge(brother, "Not in use")).to_have_count(1)

    # the filter narrows the list
    page.get_by_label("Life area", exact=True).select_option("leisure")
    page.get_by_role("button", name="Apply", exact=True).click()
    expect(page).to_have_url(re.compile(r"/memory\?(.*&)?area=leisure(&|$)"))
    expect(_record(page, held.cello)).to_have_count(1)
    expect(_record(page, held.coffee)).to_have_count(1)
    expect(_record(page, held.porto)).to_have_count(0)
    expect(_record(page, held.attic)).to_have_count(0)
    expect(page.get_by_label("Life area", exact=True)).to_have_value("leisure")


def test_search_lists_the_retrieval_hits_best_first(
    page: Page, inspector: Inspector, held_back: HeldBack
) -> None:
    held = held_back
    _open(page, inspector)
    page.get_by_label("Search", exact=True).fill("cello")
    page.get_by_role("button", name="Apply", exact=True).click()
    expect(page).to_have_url(re.compile(r"[?&]q=cello(&|$)"))
    expect(page.locator("article.record").first).to_have_attribute("data-record-id", held.cello)
    hits = [h.record_id for h in held.phone.agent.recall("cello")]
    shown = page.locator("article.record").evaluate_all(
        "els => els.map(e => e.getAttribute('data-record-id'))"
    )
    assert shown[: len(hits)] == hits


def test_how_do_you_know_this_shows_the_explanation_sources_and_versions(
    page: Page, inspector: Inspector, held_back: HeldBack
) -> None:
    held = held_back
    base = _open(page, inspector)
    _record(page, held.coffee).get_by_role("link", name="How do you know this?").click()
    expect(page).to_have_url(f"{base}/records/{held.coffee}")
    expect(page.get_by_role("heading", level=1)).to_have_text("How do you know this?")
    expect(page.locator("#explanation")).to_contain_text(held.phone.agent.explain(held.coffee))
    history = held.phone.agent.record_history(held.coffee)
    corrected_on = _day(history[-1].recorded_at)
    sources = page.locator("#sources")
    expect(sources).to_contain_text(HOT)
    expect(sources).to_contain_text(corrected_on)
    versions = page.locator("#versions")
    expect(versions).to_contain_text(f"Corrected on {corrected_on}")
    expect(versions).to_contain_text(held.correction_message)
    for shown in (versions, page.locator("#explanation")):
        expect(shown).not_to_contain_text(ICED)
        expect(shown).not_to_contain_text("iced")

    # the said record: the user's dated words
    page.goto(f"{base}/records/{held.porto}")
    expect(page.locator("#explanation")).to_contain_text(held.phone.agent.explain(held.porto))
    expect(page.locator("#sources")).to_contain_text(PORTO)
    expect(page.locator("#sources")).to_contain_text(
        _day(held.view(held.phone, held.porto).recorded_at)
    )
    # the inference: explained as one, never as the user's words
    page.goto(f"{base}/records/{held.quiet}")
    explanation = page.locator("#explanation")
    expect(explanation).to_contain_text(held.phone.agent.explain(held.quiet))
    # (the sentence says it is *not* something the user said; it never quotes it as such)
    expect(explanation).to_contain_text("It is not something you said")
    expect(explanation).not_to_contain_text("you said: \u201c")
    expect(explanation).not_to_contain_text("you wrote: \u201c")


def test_correct_writes_a_new_version_the_laptop_gets(
    page: Page, inspector: Inspector, held_back: HeldBack
) -> None:
    held = held_back
    base = _open(page, inspector)
    new = "I play the cello on Saturdays."
    page.goto(f"{base}/records/{held.cello}")
    page.get_by_label("Corrected text", exact=True).fill(new)
    page.get_by_role("button", name="Correct", exact=True).click()
    expect(_flash(page)).to_be_visible()
    expect(page.get_by_text(new).first).to_be_visible()
    page.goto(f"{base}/memory")
    expect(_record(page, held.cello)).to_contain_text(new)
    expect(_record(page, held.cello)).not_to_contain_text(CELLO)
    assert held.view(held.phone, held.cello).text == new

    held.sync_both()
    on_laptop = held.view(held.laptop, held.cello)
    assert (on_laptop.text, on_laptop.versions, on_laptop.lifecycle) == (new, (1, 2), "active")


def test_dont_use_and_use_again_change_the_badge_and_the_laptop(
    page: Page, inspector: Inspector, held_back: HeldBack
) -> None:
    held = held_back
    base = _open(page, inspector)
    page.goto(f"{base}/records/{held.porto}")
    page.get_by_role("button", name="Don't use", exact=True).click()
    expect(_flash(page)).to_be_visible()
    page.goto(f"{base}/memory")
    porto = _record(page, held.porto)
    expect(_badge(porto, "Not in use")).to_have_count(1)
    expect(_badge(porto, "In use")).to_have_count(0)
    held.sync_both()
    on_laptop = held.view(held.laptop, held.porto)
    assert not on_laptop.in_use and on_laptop.lifecycle == "not_in_use"

    page.goto(f"{base}/records/{held.porto}")
    page.get_by_role("button", name="Use again", exact=True).click()
    expect(_flash(page)).to_be_visible()
    page.goto(f"{base}/memory")
    expect(_badge(_record(page, held.porto), "In use")).to_have_count(1)
    held.sync_both()
    assert held.view(held.laptop, held.porto).in_use


def test_forget_asks_then_names_the_pending_laptop_and_leaves_no_text_anywhere(
    page: Page, inspector: Inspector, held_back: HeldBack
) -> None:
    held = held_back
    base = _open(page, inspector)
    page.goto(f"{base}/records/{held.locker}")
    ask = re.compile(r"^Forget permanently(\u2026|\.\.\.)$")
    page.get_by_role("link", name=ask).or_(page.get_by_role("button", name=ask)).click()
    expect(page).to_have_url(f"{base}/records/{held.locker}/forget")
    expect(page.get_by_role("heading", level=1)).to_have_text("Forget permanently?")
    expect(page.locator("body")).to_contain_text("This cannot be undone")
    expect(page.get_by_role("link", name="Cancel", exact=True)).to_be_visible()

    # not ticked: the browser does not send the form, nothing is forgotten
    understood = page.get_by_label("I understand this cannot be undone", exact=True)
    expect(understood).not_to_be_checked()
    forget = page.get_by_role("button", name="Forget permanently", exact=True)
    forget.click()
    assert understood.evaluate("e => e.required && e.validity.valueMissing") is True
    expect(page).to_have_url(f"{base}/records/{held.locker}/forget")
    expect(page.get_by_role("heading", level=1)).to_have_text("Forget permanently?")
    assert held.view(held.phone, held.locker).lifecycle == "active"

    understood.check()
    forget.click()
    expect(page).to_have_url(f"{base}/records/{held.locker}/forgotten")
    expect(page.locator("body")).to_contain_text(
        "Permanently forgotten; it cannot be brought back."
    )
    expect(page.locator("ul#pending")).to_contain_text("laptop")
    assert held.view(held.phone, held.locker).is_skeleton

    report = held.laptop.agent.sync()
    assert report.refused == [] and held.locker in report.shredded
    on_laptop = held.view(held.laptop, held.locker)
    assert on_laptop.is_skeleton and on_laptop.text is None

    page.goto(f"{base}/memory")
    expect(page.get_by_text("Permanently forgotten").first).to_be_visible()
    for path in (
        "/memory",
        "/memory?q=locker",
        "/memory?q=4417",
        "/memory?state=not_in_use",
        f"/records/{held.locker}",
        "/learned",
        "/candidates",
        "/rules",
        "/settings",
    ):
        page.goto(base + path)
        # the search box shows back what the user typed; nothing else may hold it
        html = page.content().replace('value="4417"', "").replace('value="locker"', "")
        assert "4417" not in html and LOCKER not in html, path
        assert "4417" not in page.locator("body").inner_text(), path


def test_confirming_a_candidate_makes_it_active_on_the_laptop(
    page: Page, inspector: Inspector, held_back: HeldBack
) -> None:
    held = held_back
    base = _open(page, inspector)
    page.get_by_role("navigation", name="Inspector").get_by_role(
        "link", name="Waiting for confirmation", exact=True
    ).click()
    expect(page).to_have_url(f"{base}/candidates")
    expect(page.get_by_role("heading", level=1)).to_have_text("Waiting for confirmation")
    brother = _record(page, held.brother)
    expect(brother).to_contain_text(BROTHER)
    expect(brother).to_contain_text("Imported, not verified")
    expect(_record(page, held.asthma)).to_be_visible()  # the sensitive class waits too
    expect(_record(page, held.porto)).to_have_count(0)  # active records are not waiting

    # an import's words: the first click only shows where they come from
    brother.get_by_role("button", name="Confirm\u2026", exact=True).click()
    expect(page).to_have_url(f"{base}/records/{held.brother}/confirm")
    assert held.view(held.phone, held.brother).lifecycle == "candidate"
    page.get_by_role("button", name="Yes, confirm this from an import (notes.txt)").click()
    expect(_flash(page)).to_be_visible()
    expect(page).to_have_url(f"{base}/candidates")
    expect(_record(page, held.brother)).to_have_count(0)
    assert held.view(held.phone, held.brother).lifecycle == "active"

    held.sync_both()
    on_laptop = held.view(held.laptop, held.brother)
    assert (on_laptop.lifecycle, on_laptop.epistemic_state) == ("active", "verified")
    assert held.view(held.laptop, held.asthma).lifecycle == "candidate"


def test_only_the_users_words_are_quoted_and_a_rule_or_a_source_never_is(
    page: Page, inspector: Inspector, held_back: HeldBack
) -> None:
    held = held_back
    base = _open(page, inspector)
    # the user's own words: quoted, dated, in the quote style with "Your words"
    porto = _record(page, held.porto)
    said_on = _day(held.view(held.phone, held.porto).recorded_at)
    expect(porto.locator("p.text.said")).to_have_text(f"On {said_on} you said: \u201c{PORTO}\u201d")
    expect(porto.locator(".kind-badge")).to_have_text("Your words")
    # an accepted rule from an app's behaviour events: never "you said", never quoted
    rule = _record(page, held.rule)
    accepted_on = _day(held.view(held.phone, held.rule).recorded_at)
    expect(rule).to_contain_text(f"You accepted this rule on {accepted_on}: {RULE}")
    expect(rule.locator(".kind-badge")).to_have_text("Rule you accepted")
    expect(rule).not_to_contain_text("you said")
    expect(rule).not_to_contain_text("you wrote")
    expect(rule).not_to_contain_text(f"\u201c{RULE}")
    expect(rule.locator("p.text.said")).to_have_count(0)
    # the two look different: another border, another badge
    styles = "e => [getComputedStyle(e).borderLeftColor, getComputedStyle(e).borderLeftStyle]"
    assert porto.evaluate(styles) != rule.evaluate(styles)
    badge = "e => getComputedStyle(e.querySelector('.kind-badge')).backgroundColor"
    assert porto.evaluate(badge) != rule.evaluate(badge)
    # its page: the behaviour events are sources, named, never the user's words
    page.goto(f"{base}/records/{held.rule}")
    sources = page.locator("#sources")
    expect(sources).to_contain_text("From an app's behaviour event (chat-app)")
    expect(sources).not_to_contain_text("you said")
    expect(page.locator("#explanation")).not_to_contain_text("you wrote")
    expect(page.locator("#explanation")).to_contain_text("It is not something you said")
    # a web page's claim waiting: where it comes from, not the user's words
    page.goto(f"{base}/memory")
    pay = _record(page, held.pay)
    expect(pay).to_contain_text("Not your words: from a web page (pay.example).")
    expect(pay).not_to_contain_text("you said")
    expect(pay).not_to_contain_text(f"\u201c{PAY}")


def test_every_waiting_item_says_why_it_waits_in_words(
    page: Page, inspector: Inspector, held_back: HeldBack
) -> None:
    held = held_back
    base = _open(page, inspector)
    page.goto(f"{base}/candidates")
    reasons = {
        held.asthma: "It is about your health, a sensitive class",
        held.pay: "It comes from a web page (pay.example), not from you",
        held.dentist: "It comes from a web page (clinic.example), not from you",
        held.brother: "It was imported (notes.txt)",
    }
    for record, why in reasons.items():
        waits = _record(page, record).locator(".reasons")
        expect(waits).to_contain_text("Why it waits:")
        expect(waits).to_contain_text(why)
        for enum_name in ("external_content", "web_page", "Sensitivity", "behaviour_rule"):
            expect(waits).not_to_contain_text(enum_name)
    # the user's own sensitive words: one click; a source's words: "Confirm…"
    asthma = _record(page, held.asthma)
    expect(asthma.get_by_role("button", name="Confirm", exact=True)).to_have_count(1)
    for record in (held.pay, held.dentist, held.brother):
        expect(
            _record(page, record).get_by_role("button", name="Confirm\u2026", exact=True)
        ).to_have_count(1)


def test_confirming_a_web_page_claim_takes_a_second_step_and_names_its_source(
    page: Page, inspector: Inspector, held_back: HeldBack
) -> None:
    held = held_back
    base = _open(page, inspector)
    page.goto(f"{base}/candidates")
    # the instruction-shaped page: the first click shows source, reference and warning
    _record(page, held.pay).get_by_role("button", name="Confirm\u2026", exact=True).click()
    expect(page).to_have_url(f"{base}/records/{held.pay}/confirm")
    expect(page.get_by_role("heading", level=1)).to_have_text("Before you confirm")
    expect(page.locator("#confirm-source")).to_have_text("Source: a web page (pay.example)")
    expect(page.locator("#confirm-reference")).to_contain_text(PAY_URL)
    warning = page.locator("#confirm-warning-text")
    expect(warning).to_contain_text("These are not your words: they come from a web page")
    expect(warning).to_contain_text("this reads as an instruction")
    expect(warning).to_contain_text("memory never pays")
    assert held.view(held.phone, held.pay).lifecycle == "candidate"
    page.get_by_role("link", name="Cancel", exact=True).click()
    expect(page).to_have_url(f"{base}/candidates")
    expect(_record(page, held.pay)).to_have_count(1)
    assert held.view(held.phone, held.pay).lifecycle == "candidate"

    # the plain page claim: confirmed only by the second, explicit button
    _record(page, held.dentist).get_by_role("button", name="Confirm\u2026", exact=True).click()
    expect(page).to_have_url(f"{base}/records/{held.dentist}/confirm")
    expect(page.locator("#confirm-reference")).to_contain_text(DENTIST_URL)
    assert held.view(held.phone, held.dentist).lifecycle == "candidate"
    page.get_by_role(
        "button", name="Yes, confirm this from a web page (clinic.example)", exact=True
    ).click()
    expect(_flash(page)).to_have_text("Confirmed; it is now active.")
    expect(_record(page, held.dentist)).to_have_count(0)
    confirmed = held.view(held.phone, held.dentist)
    assert (confirmed.lifecycle, confirmed.verified_by, confirmed.users_words) == (
        "active", "user", False,
    )  # fmt: skip

    # shown as confirmed from its source, never quoted as the user's words
    page.goto(f"{base}/memory")
    dentist = _record(page, held.dentist)
    confirmed_on = _day(confirmed.recorded_at)
    expect(dentist).to_contain_text(
        f"You confirmed this from a web page (clinic.example) on {confirmed_on}: {DENTIST}"
    )
    expect(dentist.locator(".kind-badge")).to_have_text("Confirmed by you \u00b7 not your words")
    expect(dentist).not_to_contain_text("you said")
    expect(dentist).not_to_contain_text(f"\u201c{DENTIST}")
    expect(dentist.locator("p.text.said")).to_have_count(0)
    page.goto(f"{base}/records/{held.dentist}")
    expect(page.locator("#sources")).to_contain_text("From a web page (clinic.example)")
    expect(page.locator("#sources")).not_to_contain_text(DENTIST)

    held.sync_both()
    on_laptop = held.view(held.laptop, held.dentist)
    assert (on_laptop.lifecycle, on_laptop.epistemic_state) == ("active", "verified")
    assert held.view(held.laptop, held.pay).lifecycle == "candidate"


_UNNAMED_CONTROLS = """() => Array.from(
    document.querySelectorAll('input, select, textarea, button'))
  .filter(e => e.type !== 'hidden')
  .filter(e => {
    if (e.tagName === 'BUTTON' || ['submit', 'button', 'reset'].includes(e.type)) {
      return !(e.innerText || e.value || '').trim();
    }
    return !(e.labels && e.labels.length > 0);
  })
  .map(e => e.outerHTML)"""


def test_the_keyboard_reaches_the_nav_and_every_control_has_a_name(
    page: Page, inspector: Inspector, held_back: HeldBack
) -> None:
    held = held_back
    base = _open(page, inspector)
    page.goto(f"{base}/candidates")
    target = "What do you know about me?"
    for _ in range(60):
        page.keyboard.press("Tab")
        focused = page.evaluate(
            "() => [document.activeElement.textContent.trim(), "
            "!!document.activeElement.closest('nav[aria-label=\"Inspector\"]')]"
        )
        if focused == [target, True]:
            break
    else:
        pytest.fail(f"Tab never reached the nav link {target!r}")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{base}/memory")
    expect(page.get_by_role("heading", level=1)).to_have_text(target)

    named = {
        "/memory": ("Life area", "State", "Type", "Search"),
        f"/records/{held.porto}": ("Corrected text", "Area or project"),
        f"/records/{held.porto}/forget": ("I understand this cannot be undone",),
        "/settings": ("Account passphrase", "Include sensitive classes", "Package or text file"),
        "/candidates": (),
        f"/records/{held.pay}/confirm": (),
        "/learned": (),
        "/rules": (),
    }
    for path, labels in named.items():
        page.goto(base + path)
        for label in labels:
            expect(page.get_by_label(label, exact=True)).to_have_count(1)
        assert page.evaluate(_UNNAMED_CONTROLS) == [], path


def test_no_token_gives_the_403_page_and_a_cross_origin_post_changes_nothing(
    page: Page, inspector: Inspector, held_back: HeldBack
) -> None:
    held = held_back
    base = _base(inspector)
    for url in (f"{base}/", f"{base}/memory", f"{base}/memory?token=not-the-token"):
        response = page.goto(url)
        assert response is not None and response.status == 403, url
        expect(page.locator("body")).to_contain_text(
            "This inspector link is not valid (open the link memsync printed)"
        )
        expect(page.locator("article.record")).to_have_count(0)

    _open(page, inspector)  # now the browser holds a session cookie
    real_csrf = page.locator('input[name="csrf"]').first.get_attribute("value")
    assert real_csrf
    target = f"{base}/records/{held.porto}/dont-use"
    for csrf in ("guessed", real_csrf):
        with serve_pages({"/": attacker_page(target, {"csrf": csrf})}) as elsewhere:
            with page.expect_response(lambda r: r.url == target) as answered:
                page.goto(f"{elsewhere}/")
            assert answered.value.status == 403, csrf
        assert held.view(held.phone, held.porto).in_use

    page.goto(f"{base}/memory")
    expect(_badge(_record(page, held.porto), "In use")).to_have_count(1)
    held.sync_both()
    assert held.view(held.laptop, held.porto).in_use


def test_words_learned_times_undo_and_several_waiting_items_at_once(
    page: Page, inspector: Inspector, held_back: HeldBack
) -> None:
    held = held_back
    held.phone.agent.keep_on_device(Sensitivity.HEALTH)
    base = _open(page, inspector)

    # words instead of enum names, the raw value kept in the title
    page.goto(f"{base}/candidates")
    asthma = _record(page, held.asthma)
    waiting = _badge(asthma, "Waiting for your OK")
    expect(waiting).to_have_attribute("title", "state: candidate")
    expect(_badge(asthma, "Your health")).to_have_attribute("title", "sensitive class: health")
    expect(asthma).not_to_contain_text("candidate")
    expect(asthma.locator("p.learned")).to_contain_text(
        re.compile(r"Learned on \d+ \w+ 20\d\d at \d\d:\d\d UTC")
    )

    # several at once: a source's words are left for their second step, named
    for record in (held.asthma, held.dentist):
        _record(page, record).get_by_label("Select this item").check()
    page.get_by_role("button", name="Confirm selected", exact=True).click()
    expect(page).to_have_url(f"{base}/candidates")
    expect(_flash(page)).to_contain_text(f"Confirmed 1 of 2. Confirmed: {ASTHMA}")
    expect(_flash(page)).to_contain_text(f"{held.dentist} ({DENTIST}): these are not your words")
    assert held.view(held.phone, held.asthma).lifecycle == "active"
    assert held.view(held.phone, held.dentist).lifecycle == "candidate"
    page.get_by_role("link", name="Select all", exact=True).click()
    boxes = page.get_by_label("Select this item")
    expect(boxes).to_have_count(3)  # brother, pay, dentist
    for i in range(3):
        expect(boxes.nth(i)).to_be_checked()
    page.get_by_role("button", name="Reject selected", exact=True).click()
    expect(_flash(page)).to_contain_text("Rejected 3 of 3.")
    expect(page.locator("article.record")).to_have_count(0)

    # Undo an accepted rule on the Rules page
    page.goto(f"{base}/rules")
    rule = _record(page, held.rule)
    expect(rule.locator("p.learned")).to_contain_text(" UTC")
    rule.get_by_role("button", name="Undo", exact=True).click()
    expect(_flash(page)).to_contain_text(f"Undone: the rule {RULE} ({held.rule})")
    expect(_record(page, held.rule).get_by_role("button", name="Use again")).to_be_visible()
    assert held.view(held.phone, held.rule).lifecycle == "not_in_use"

    # the classes kept only on this device, in words
    page.goto(f"{base}/settings")
    kept = page.locator("#device-only li")
    expect(kept).to_have_count(1)
    expect(kept).to_have_text("Your health")
    expect(kept).to_have_attribute("data-value", "health")

    held.sync_both()
    on_laptop = {v.record_id: v.lifecycle for v in held.laptop.agent.what_do_you_know()}
    assert on_laptop[held.rule] == "not_in_use" and on_laptop[held.asthma] == "active"
    for record in (held.brother, held.pay, held.dentist):
        assert on_laptop[record] == "not_in_use", record
