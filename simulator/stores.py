"""Which store a simulated cloud uses: ``sqlite`` (files in a folder) or a PostgreSQL URL.

Invariant: a PostgreSQL URL names an existing database the caller owns; the cloud
migrates it on start and the key store (always an embedded SQLite file) goes in the
folder given. Anything else is refused with the value and the accepted forms.
"""

from __future__ import annotations

from pathlib import Path

from cloud.config import CloudConfig
from simulator.cloud_processes import CloudProcesses
from simulator.cloud_runner import RunningCloud
from simulator.errors import InvalidRunSettings

SQLITE = "sqlite"


def describe_store(store: str) -> str:
    """The store for a report, without any password a URL may carry."""
    if store == SQLITE or store.startswith("sqlite:"):
        return SQLITE
    scheme, _, rest = store.partition("://")
    return f"{scheme}://{rest.rpartition('@')[2]}"


POSTGRES_PREFIXES = ("postgresql://", "postgresql+psycopg://", "postgres://")


def check_store(store: str) -> None:
    """Refuse anything but ``sqlite`` or a PostgreSQL URL (before anything is made)."""
    if store != SQLITE and not store.startswith(POSTGRES_PREFIXES):
        raise InvalidRunSettings(
            f"store {store!r}: expected 'sqlite' or a postgresql://user@host:port/database "
            "URL of an existing database"
        )


MAX_PROCESSES = 8


def cloud_for(store: str, folder: Path) -> RunningCloud:
    """A (not yet started) cloud on ``store`` with its files in ``folder``."""
    check_store(store)
    folder.mkdir(parents=True, exist_ok=True)
    if store == SQLITE:
        return RunningCloud.sqlite(folder)
    url = store.replace("postgres://", "postgresql://", 1)
    return RunningCloud(CloudConfig(store_url=url, key_store_path=folder / "keys.db"))


def clouds_for(
    store: str, folder: Path, processes: int, *, killable: bool = False
) -> RunningCloud | CloudProcesses:
    """``cloud_for``, or with ``processes`` > 1 (or ``killable``: a run that restarts its
    cloud by SIGKILL, which a server in this process cannot take) that many real
    ``memsync cloud serve`` processes on the store (one key-store file), not yet started."""
    check_store(store)
    if not 1 <= processes <= MAX_PROCESSES:
        raise InvalidRunSettings(
            f"clouds={processes}: serve with 1 to {MAX_PROCESSES} cloud processes"
        )
    if processes == 1 and not killable:
        return cloud_for(store, folder)
    folder.mkdir(parents=True, exist_ok=True)
    if store == SQLITE:
        return CloudProcesses.sqlite(folder, processes)
    return CloudProcesses.postgres(
        store.replace("postgres://", "postgresql://", 1), folder, processes
    )
