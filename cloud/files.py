"""Where the cloud keeps files: only its own user can read them.

Invariants:
- A store's folder is made 0700 and each store file (the record store, the key store,
  the master key) is created 0600 before any database engine opens it, whatever the
  umask; SQLite gives its -wal, -shm and -journal files the mode of their database.
- Nothing here widens a mode: an existing file keeps a stricter one.
- An existing file is never opened here (only stat-ed and chmod-ed): closing any
  descriptor of a file drops every POSIX lock the process holds on it, so opening a
  database another engine of this process uses would silently drop SQLite's locks.
"""

from __future__ import annotations

import os
from pathlib import Path

FOLDER_MODE = 0o700
FILE_MODE = 0o600


def private_folder(folder: Path) -> None:
    """``folder`` (and any missing parent) exists; ``folder`` itself is 0700."""
    folder.mkdir(parents=True, exist_ok=True, mode=FOLDER_MODE)
    if folder.stat().st_mode & 0o077:
        os.chmod(folder, FOLDER_MODE)


def private_file(path: Path) -> None:
    """``path`` exists, in a private folder, and only its owner can read or write it
    (an empty file is what SQLite takes as a new database)."""
    private_folder(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        # never open a database that exists: closing any descriptor of a file drops
        # every POSIX lock this process holds on it, SQLite's locks included
        if path.stat().st_mode & 0o077:
            os.chmod(path, FILE_MODE)
        return
    os.close(fd)  # a file no connection can hold yet
