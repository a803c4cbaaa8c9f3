"""The forensic scanner must be able to fail: it finds what is there, decrypted."""

from __future__ import annotations

from pathlib import Path

import sqlcipher3
from hypothesis import given
from hypothesis import strategies as st

from simulator.forensics import _find, _find_in_pages, scan_device_database

MARKER = b"forensic-marker-I grew up in Duluth."


def _make_db(path: Path, passphrase: str, *, keep_open: bool) -> sqlcipher3.Connection | None:
    conn = sqlcipher3.connect(str(path), isolation_level=None)
    conn.execute(f"PRAGMA key = '{passphrase}'")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (x BLOB)")
    conn.execute("INSERT INTO t VALUES (?)", (MARKER,))
    if keep_open:
        return conn
    conn.close()
    return None


def test_finds_marker_in_wal_pages_decrypted_not_raw(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    conn = _make_db(db, "pw", keep_open=True)
    try:
        result = scan_device_database(db, "pw", {"marker": MARKER})
        assert result.pages >= 2
        assert result.unreadable_pages == 0
        wheres = [h.where for h in result.hits]
        assert wheres, "the scanner did not see a row that is in the database"
        assert all(w.startswith("decrypted") for w in wheres), wheres
        assert any("-wal" in w for w in wheres)
    finally:
        assert conn is not None
        conn.close()


def test_finds_marker_in_main_file_after_checkpoint(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    _make_db(db, "pw", keep_open=False)
    result = scan_device_database(db, "pw", {"marker": MARKER})
    assert [h.where for h in result.hits] and result.unreadable_pages == 0


def test_finds_deleted_row_in_free_pages_without_secure_delete(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    conn = _make_db(db, "pw", keep_open=True)
    assert conn is not None
    conn.execute("PRAGMA secure_delete = OFF")
    conn.execute("DELETE FROM t")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    result = scan_device_database(db, "pw", {"marker": MARKER})
    assert result.hits, "a deleted row left in a free page must be found"


def test_wrong_passphrase_reads_nothing_and_says_so(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    _make_db(db, "pw", keep_open=False)
    result = scan_device_database(db, "not-the-passphrase", {"marker": MARKER})
    assert result.pages > 0
    assert result.unreadable_pages == result.pages
    assert result.clean


@given(
    # a small alphabet, so needles often occur, and often across a page boundary
    pages=st.lists(st.lists(st.sampled_from([0, 1, 255]), max_size=12).map(bytes), max_size=6),
    needles=st.dictionaries(
        st.sampled_from("abcdef"),
        st.lists(st.sampled_from([0, 1, 255]), max_size=3).map(bytes),
        max_size=4,
    ),
)
def test_one_pass_per_needle_finds_exactly_what_a_page_by_page_search_finds(
    pages: list[bytes], needles: dict[str, bytes]
) -> None:
    wheres = [f"page {i}" for i in range(len(pages))]
    one_by_one = [h for w, p in zip(wheres, pages, strict=True) for h in _find(w, p, needles)]
    assert _find_in_pages(wheres, pages, needles) == one_by_one


def test_a_database_made_with_fewer_iterations_is_read_with_them(tmp_path: Path) -> None:
    """A simulation's device database keeps its PBKDF2 count beside it
    (``device.db.kdf``); the scanner derives the key with that count, so its pages
    decrypt, and a wrong count would leave every page unreadable."""
    from device.db import Database, kdf_file

    path = tmp_path / "device.db"
    db = Database.create(path, "pw", kdf_iterations=64)
    with db.atomic() as conn:
        conn.execute("CREATE TABLE t (x BLOB)")
        conn.execute("INSERT INTO t VALUES (?)", (MARKER,))
    db.close()
    assert kdf_file(path).read_text().strip() == "64"
    found = scan_device_database(path, "pw", {"marker": MARKER})
    assert found.pages >= 1 and found.unreadable_pages == 0 and found.hits
    kdf_file(path).write_text("65\n")
    misread = scan_device_database(path, "pw", {"marker": MARKER})
    assert misread.unreadable_pages == misread.pages >= 1 and not misread.hits
