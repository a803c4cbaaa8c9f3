"""Forensic scans: can any copy still yield forgotten content?

Invariants: a scan reads every byte it claims to have read. Device databases are read
page by page and decrypted with the device passphrase exactly as SQLCipher 4 lays
them out (main file and every WAL frame, live and free pages alike); a page whose HMAC
does not verify is counted as unreadable, never silently skipped, so a scan that
could not see everything says so.
"""

from __future__ import annotations

import hashlib
import hmac
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from device.db import kdf_iterations

# SQLCipher 4 defaults (what `PRAGMA key = '<passphrase>'` uses); the PBKDF2 iterations
# are the database's own (``device.db.kdf_iterations``: the default unless a simulation
# made it with fewer).
PAGE_SIZE = 4096
RESERVE = 80  # 16-byte IV + 64-byte HMAC-SHA512 at the end of every page
SALT_BYTES = 16
HMAC_SALT_MASK = 0x3A
WAL_HEADER = 32
WAL_FRAME_HEADER = 24


@dataclass(frozen=True)
class Hit:
    where: str
    needle: str


@dataclass
class ScanResult:
    """What a scan read and what it found."""

    files: list[str] = field(default_factory=list)
    pages: int = 0
    unreadable_pages: int = 0
    hits: list[Hit] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.hits

    def describe(self, most: int | None = None) -> str:
        """One line for a report: what was read, and the needles found (the first
        ``most`` of them, if given)."""
        where = f"{len(self.files)} file(s)"
        if self.pages:
            where += f", {self.pages} decrypted page(s)"
        if self.unreadable_pages:
            where += f", {self.unreadable_pages} UNREADABLE page(s)"
        if self.hits:
            found = sorted({h.needle for h in self.hits})
            shown = found if most is None else found[:most]
            return f"found {shown} in {self.hits[0].where} ({where})"
        return f"no trace in {where}"

    def merge(self, other: ScanResult) -> ScanResult:
        return ScanResult(
            files=self.files + other.files,
            pages=self.pages + other.pages,
            unreadable_pages=self.unreadable_pages + other.unreadable_pages,
            hits=self.hits + other.hits,
        )


@dataclass(frozen=True)
class _Keys:
    cipher_key: bytes
    hmac_key: bytes


def _derive(passphrase: str, salt: bytes, iterations: int) -> _Keys:
    key = hashlib.pbkdf2_hmac("sha512", passphrase.encode(), salt, iterations, 32)
    hmac_salt = bytes(b ^ HMAC_SALT_MASK for b in salt)
    return _Keys(key, hashlib.pbkdf2_hmac("sha512", key, hmac_salt, 2, 32))


def _wal_frames(wal: bytes) -> Iterator[tuple[int, bytes]]:
    offset = WAL_HEADER
    while offset + WAL_FRAME_HEADER + PAGE_SIZE <= len(wal):
        page_no = int.from_bytes(wal[offset : offset + 4], "big")
        start = offset + WAL_FRAME_HEADER
        yield page_no, wal[start : start + PAGE_SIZE]
        offset = start + PAGE_SIZE


def _salt(main: bytes, wal: bytes) -> bytes | None:
    if len(main) >= PAGE_SIZE:
        return main[:SALT_BYTES]
    for page_no, page in _wal_frames(wal):
        if page_no == 1:
            return page[:SALT_BYTES]
    return None


def _decrypt(keys: _Keys, page_no: int, page: bytes) -> bytes | None:
    start = SALT_BYTES if page_no == 1 else 0
    body_end = PAGE_SIZE - RESERVE
    signed = page[start : body_end + 16]
    mac = page[body_end + 16 : PAGE_SIZE]
    expected = hmac.new(keys.hmac_key, signed + page_no.to_bytes(4, "little"), "sha512").digest()
    if not hmac.compare_digest(mac, expected):
        return None
    iv = page[body_end : body_end + 16]
    decryptor = Cipher(algorithms.AES(keys.cipher_key), modes.CBC(iv)).decryptor()
    return decryptor.update(page[start:body_end]) + decryptor.finalize()


def decrypted_pages(db_path: Path, passphrase: str) -> Iterator[tuple[str, bytes | None]]:
    """Every page of a SQLCipher database and its WAL, decrypted (None if unreadable)."""
    main = db_path.read_bytes() if db_path.exists() else b""
    wal_path = Path(f"{db_path}-wal")
    wal = wal_path.read_bytes() if wal_path.exists() else b""
    salt = _salt(main, wal)
    if salt is None:
        return
    keys = _derive(passphrase, salt, kdf_iterations(db_path))
    for index in range(len(main) // PAGE_SIZE):
        page = main[index * PAGE_SIZE : (index + 1) * PAGE_SIZE]
        yield f"{db_path.name} page {index + 1}", _decrypt(keys, index + 1, page)
    for frame, (page_no, page) in enumerate(_wal_frames(wal)):
        yield f"{wal_path.name} frame {frame} (page {page_no})", _decrypt(keys, page_no, page)


def _find(where: str, data: bytes, needles: Mapping[str, bytes]) -> list[Hit]:
    return [Hit(where, label) for label, needle in needles.items() if needle and needle in data]


def scan_device_database(
    db_path: Path, passphrase: str, needles: Mapping[str, bytes]
) -> ScanResult:
    """Decrypt every page of a device database (file and WAL) and look for ``needles``.

    The raw, still-encrypted bytes of the file, its WAL and any journal are scanned
    too: plaintext must not be there at all.
    """
    result = scan_files(_sidecars(db_path), needles)
    wheres: list[str] = []
    pages: list[bytes] = []
    for where, page in decrypted_pages(db_path, passphrase):
        result.pages += 1
        if page is None:
            result.unreadable_pages += 1
            continue
        wheres.append(f"decrypted {where}")
        pages.append(page)
    result.hits.extend(_find_in_pages(wheres, pages, needles))
    return result


def _find_in_pages(
    wheres: list[str], pages: list[bytes], needles: Mapping[str, bytes]
) -> list[Hit]:
    """``_find`` on each page, in one pass per needle over the pages joined: an
    occurrence counts only when it lies inside one page (one that spans two is passed
    over), and each is named by its page, once per page and needle, in page order."""
    joined = b"".join(pages)
    starts = list(accumulate((len(p) for p in pages), initial=0))  # page i: starts[i]..[i+1]
    found: set[tuple[int, str]] = set()
    for label, needle in needles.items():
        if not needle:
            continue
        at = joined.find(needle)
        while at != -1:
            index = bisect_right(starts, at) - 1
            if at + len(needle) <= starts[index + 1]:
                found.add((index, label))
                at = joined.find(needle, starts[index + 1])  # one hit per page is enough
            else:
                at = joined.find(needle, at + 1)
    order = {label: i for i, label in enumerate(needles)}
    return [
        Hit(wheres[index], label)
        for index, label in sorted(found, key=lambda f: (f[0], order[f[1]]))
    ]


def _sidecars(db_path: Path) -> list[Path]:
    return [Path(f"{db_path}{suffix}") for suffix in ("", "-wal", "-journal", "-shm")]


def scan_files(paths: Iterable[Path], needles: Mapping[str, bytes]) -> ScanResult:
    """Scan the raw bytes of files (those that exist) for ``needles``."""
    result = ScanResult()
    for path in paths:
        if not path.exists():
            continue
        result.files.append(str(path))
        result.hits.extend(_find(f"raw {path.name}", path.read_bytes(), needles))
    return result


def scan_sqlite_database(db_path: Path, needles: Mapping[str, bytes]) -> ScanResult:
    """Scan a plain SQLite database, its WAL, journal and shared-memory file, raw."""
    return scan_files(_sidecars(db_path), needles)


def scan_values(label: str, values: Iterable[object], needles: Mapping[str, bytes]) -> ScanResult:
    """Scan values read out of a database (for stores with no file to read, e.g. PostgreSQL)."""
    result = ScanResult(files=[label])
    datas: list[bytes] = []
    for value in values:
        if isinstance(value, str):
            datas.append(value.encode())
        elif isinstance(value, bytes | bytearray | memoryview):
            datas.append(bytes(value))
        else:
            datas.append(str(value).encode())
    result.hits.extend(_find_in_pages([label] * len(datas), datas, needles))
    return result


def scan_record_store(
    store_url: str, rows: Iterable[object], needles: Mapping[str, bytes]
) -> ScanResult:
    """Scan the cloud's record store: its file (WAL and journals too) raw when it is
    SQLite, and every value of its rows (``SqlStore.audit_blobs``) on any dialect."""
    prefix = "sqlite:///"
    if store_url.startswith(prefix):
        result = scan_sqlite_database(Path(store_url.removeprefix(prefix)), needles)
    else:
        result = ScanResult()
    return result.merge(scan_values("record store rows", rows, needles))
