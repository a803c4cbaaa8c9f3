"""Screenshots of the inspector's main views, taken in Debian's headless chromium.

With ``MEMSYNC_SCREENSHOTS=1`` the full-page PNGs are written to ``docs/inspector/``
(listed in ``docs/inspector-screenshots.md``); otherwise to the test's tmp folder, and
the test only checks that each is a non-empty PNG. Invariant: every view is shown
with the held-back account's memory, after the session cookie replaced the token
(no screenshot ever shows the token).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from tests.e2e.browser import HeldBack, Inspector, is_png

# without playwright the `chromium` fixture skips (under CI=true: fails) saying so
with contextlib.suppress(ImportError):
    from playwright.sync_api import Page, expect

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "inspector"


def test_screenshots_of_the_main_views(
    page: Page, inspector: Inspector, held_back: HeldBack, tmp_path: Path
) -> None:
    out = DOCS if os.environ.get("MEMSYNC_SCREENSHOTS") == "1" else tmp_path
    out.mkdir(parents=True, exist_ok=True)
    base = inspector.base.rstrip("/")
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(inspector.url)
    expect(page).to_have_url(f"{base}/memory")
    views = {
        "memory.png": ("/memory", "What do you know about me?"),
        "record.png": (f"/records/{held_back.coffee}", "How do you know this?"),
        "forget.png": (f"/records/{held_back.porto}/forget", "Forget permanently?"),
        "candidates.png": ("/candidates", "Waiting for confirmation"),
        "confirm.png": (f"/records/{held_back.pay}/confirm", "Before you confirm"),
        "rules.png": ("/rules", "Behaviour rules"),
        "settings.png": ("/settings", "Devices and settings"),
    }
    for name, (path, heading) in views.items():
        page.goto(base + path)
        expect(page.get_by_role("heading", level=1)).to_have_text(heading)
        assert inspector.token not in page.url
        page.screenshot(path=str(out / name), full_page=True)
        assert is_png(out / name), name
