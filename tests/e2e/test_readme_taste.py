"""README's "A taste", followed word for word (``readme_taste``): every line succeeds and
does what its comment says. So the first thing a new user tries cannot rot."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.readme_taste import Step, Taste, taste_lines

pytestmark = pytest.mark.e2e


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def taste(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Taste]:
    run = Taste(folder=tmp_path_factory.mktemp("taste"), port=_free_port())
    try:
        for line in taste_lines():
            run.run(line)
        yield run
    finally:
        run.stop()


def step(taste: Taste, starts: str, nth: int = 0) -> Step:
    found = [s for s in taste.steps if s.line.startswith(starts)]
    assert len(found) > nth, f"the taste has no line starting {starts!r}"
    return found[nth]


def test_the_taste_is_in_the_readme() -> None:
    lines = taste_lines()
    assert lines[0].startswith("export MEMSYNC_PASSPHRASE=")
    assert any(line.startswith("memsync device learned") for line in lines)
    assert any(line.startswith("memsync device correct rec_") for line in lines)


def test_every_line_of_the_taste_succeeds(taste: Taste) -> None:
    failed = [s for s in taste.steps if s.returncode != 0]
    assert not failed, "\n".join(f"$ {s.command}\n{s.output}" for s in failed)
    assert len(taste.steps) == len(taste_lines())


def test_what_was_said_comes_back_and_the_background_learns_the_rest(taste: Taste) -> None:
    assert "memory candidate" in step(taste, "memsync device say").output
    assert "Remembered." in step(taste, "memsync device remember").output
    learned = step(taste, "memsync device learned").output
    assert "My sister Ines is a nurse." in learned and "Duluth" not in learned
    recalled = step(taste, 'memsync device recall "Where did I grow up?"').output
    assert "I grew up in Duluth." in recalled
    block = step(taste, 'memsync device recall "Where was I raised?" --block').output
    assert "<memory-data" in block and "I grew up in Duluth." in block


def test_a_correction_replaces_the_old_words_everywhere(taste: Taste) -> None:
    assert "committed" in step(taste, "memsync device correct").output
    known = step(taste, "memsync device know").output
    assert "I grew up in Bergen." in known and "Duluth" not in known
    in_cloud = step(taste, 'memsync device recall "Where was I raised?" --cloud').output
    assert "I grew up in Bergen." in in_cloud and "Duluth" not in in_cloud


def test_forget_export_import_and_the_end_of_the_account(taste: Taste) -> None:
    forget = step(taste, "memsync device forget").output
    assert "I grew up in Bergen." in forget and "Permanently forgotten" in forget
    assert "revoked" in step(taste, "memsync cloud revoke-device").output
    exported = step(taste, "memsync device export").output
    assert (taste.folder / "home" / "memory").is_dir(), exported
    assert list((taste.folder / "home" / "memory").glob("memsync-export-exp_*.json"))
    imported = step(taste, "memsync device import").output
    assert "as candidates" in imported and "from elsewhere" not in imported
    assert "PASS" in step(taste, "memsync simulate --devices").output


def test_the_inspector_and_live_sync_start(taste: Taste) -> None:
    assert "http://127.0.0.1:" in step(taste, "memsync device ui").output
    assert step(taste, "memsync device live").output.startswith("live:")


def test_the_taste_ran_in_its_own_folder(taste: Taste) -> None:
    assert Path(taste.env["HOME"]).is_relative_to(taste.folder)
