"""The forensic scanner must be able to fail: it finds what is there, decrypted."""

from __future__ import annotations

from pathlib import Path

import sqlcipher3

from simulator.forensics import scan_device_database

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
