"""Test helper: decrypt every page of a SQLCipher 4 file (and its WAL) independently of
SQLite, so tests can scan free pages and old WAL frames, not just live rows.

SQLCipher 4 defaults: 4096-byte pages; key = PBKDF2-HMAC-SHA512(passphrase, salt,
256000, 32) where the salt is the file's first 16 bytes; each page ends with a
reserve of IV (16) + HMAC-SHA512 (64); the rest is AES-256-CBC (page 1 skips the salt).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

PAGE = 4096
RESERVE = 16 + 64
SALT = 16
WAL_HEADER = 32
FRAME_HEADER = 24


def derive_key(passphrase: str, salt: bytes) -> bytes:
    return hashlib.pbkdf2_hmac("sha512", passphrase.encode(), salt, 256_000, 32)


def _decrypt_page(key: bytes, page: bytes, first: bool) -> bytes:
    start = SALT if first else 0
    body = page[start : PAGE - RESERVE]
    iv = page[PAGE - RESERVE : PAGE - RESERVE + 16]
    decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
    return decryptor.update(body) + decryptor.finalize()


def decrypted_pages(db_path: Path, passphrase: str) -> list[bytes]:
    """Every page of ``device.db`` and every frame of ``device.db-wal``, decrypted."""
    raw = db_path.read_bytes()
    key = derive_key(passphrase, raw[:SALT])
    pages = [
        _decrypt_page(key, raw[offset : offset + PAGE], offset == 0)
        for offset in range(0, len(raw) - PAGE + 1, PAGE)
    ]
    wal = db_path.with_name(db_path.name + "-wal")
    if wal.exists():
        data = wal.read_bytes()
        offset = WAL_HEADER
        while offset + FRAME_HEADER + PAGE <= len(data):
            number = int.from_bytes(data[offset : offset + 4], "big")
            frame = data[offset + FRAME_HEADER : offset + FRAME_HEADER + PAGE]
            pages.append(_decrypt_page(key, frame, number == 1))
            offset += FRAME_HEADER + PAGE
    return pages


def plaintext_contains(db_path: Path, passphrase: str, needle: bytes) -> bool:
    return any(needle in page for page in decrypted_pages(db_path, passphrase))


def index_needles(db: Any, text: str, record_ids: list[str]) -> list[bytes]:
    """What the search indexes hold for a text and records: each blinded term's tail
    (FTS5 stores a term after the prefix it shares with its neighbour) and the vectors."""
    from device import search
    from protocol.retrieval import lexical

    key = search.search_key(db)
    out = [lexical.blind(t, key)[3:].encode() for t in lexical.terms(text)]
    for record_id in record_ids:
        row = db.one("SELECT vector FROM record_vectors WHERE record_id = ?", (record_id,))
        assert row is not None, f"record {record_id} has no vector"
        out.append(bytes(row[0]))
    return out
