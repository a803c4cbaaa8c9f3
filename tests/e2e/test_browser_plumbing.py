"""The browser plumbing on its own: the session's Debian chromium (never a downloaded
browser) renders a page served on loopback, and the helpers the inspector tests use
(an auto-submitting page on another origin, the PNG check) do what they say.

Invariant: ``/usr/bin/chromium`` is the browser Playwright drives, headless.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from tests.e2e.browser import CHROMIUM, attacker_page, is_png, serve_pages

# without playwright the `chromium` fixture skips (under CI=true: fails) saying so
with contextlib.suppress(ImportError):
    from playwright.sync_api import Browser, Page, expect

pytestmark = pytest.mark.browser


def test_chromium_renders_a_local_page(chromium: Browser, page: Page, tmp_path: Path) -> None:
    html = (
        '<!doctype html><html lang="en"><head><title>memsync plumbing</title></head>'
        "<body><h1>It renders</h1></body></html>"
    )
    with serve_pages({"/": html}) as base:
        page.goto(f"{base}/")
        expect(page).to_have_title("memsync plumbing")
        expect(page.get_by_role("heading", level=1)).to_have_text("It renders")
        shot = tmp_path / "plumbing.png"
        page.screenshot(path=str(shot), full_page=True)
    assert is_png(shot)
    assert chromium.version.split(".")[0].isdigit()
    assert CHROMIUM.is_file()


def test_a_page_on_another_origin_posts_its_form_on_load(page: Page) -> None:
    with (
        serve_pages({"/target": "<!doctype html><title>target</title>"}) as target,
        serve_pages({"/": attacker_page(f"{target}/target", {"csrf": "x"})}) as elsewhere,
    ):
        assert target != elsewhere
        with page.expect_request(f"{target}/target") as sent:
            page.goto(f"{elsewhere}/")
        request = sent.value
        assert request.method == "POST" and request.post_data == "csrf=x"
        assert request.headers.get("origin") == elsewhere
