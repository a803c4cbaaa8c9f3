"""What every ``memsync cloud`` command shares: the settings flags, the settings they
make, the service on the stores they name, and the one-line failure.

Invariants:
- A flag left out is ``None`` and does not override (``cloud.settings`` precedence:
  flag > environment > file > default); ``FLAG_SETTINGS`` maps each flag to its setting.
- ``fail`` prints one line on stderr: exit 2 for a bad setting or a record store that
  cannot be opened (the operator must fix the deployment), 1 for any other refusal.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from cloud.config import CloudConfig
from cloud.errors import SettingsError, StoreUnreachable
from cloud.service import CloudService
from cloud.settings import CONFIG_ENV, DEFAULT_KEYS, DEFAULT_STORE, CloudSettings, load_settings

# flag (argparse dest) -> setting, for the flags that are settings
FLAG_SETTINGS = {
    "store": "store",
    "keys": "keys",
    "host": "host",
    "port": "port",
    "header_timeout": "header_timeout",
    "body_timeout": "body_timeout",
    "keep_alive": "keep_alive",
    "max_connections": "max_connections",
    "backlog": "backlog",
    "log_format": "log_format",
    "log_level": "log_level",
    "metrics": "metrics",
    "worker_id": "worker_id",
    "interval": "worker_interval",
    "lease_seconds": "worker_lease_seconds",
    "batch": "worker_batch",
    "daily_at": "worker_daily_at",
}


def settings_from_args(args: argparse.Namespace) -> CloudSettings:
    """The settings with the flags given on the command line on top."""
    given = {
        setting: getattr(args, flag)
        for flag, setting in FLAG_SETTINGS.items()
        if getattr(args, flag, None) is not None
    }
    return load_settings(given, config_file=getattr(args, "config", None))


def config_from_args(args: argparse.Namespace) -> CloudConfig:
    return settings_from_args(args).cloud_config()


def common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help=f"settings file: TOML (*.toml) or MEMSYNC_NAME=value lines (default: ${CONFIG_ENV})",
    )
    parser.add_argument(
        "--store",
        default=None,
        help="record store: sqlite:///PATH, postgresql://user@host:port/db, or a file path "
        f"(default: $MEMSYNC_STORE, the settings file, or {DEFAULT_STORE})",
    )
    parser.add_argument(
        "--keys",
        default=None,
        help="key store SQLite file, separate from the record store "
        f"(default: $MEMSYNC_KEYS, the settings file, or {DEFAULT_KEYS})",
    )


def logging_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=None,
        help="text lines, or one JSON object per line (default: $MEMSYNC_LOG_FORMAT or text)",
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default=None,
        help="default: $MEMSYNC_LOG_LEVEL or info",
    )


def fail(exc: Exception) -> int:
    """One line on stderr; exit 2 for a setting or a store the operator must fix, else 1."""
    print(f"memsync cloud: {exc}", file=sys.stderr)
    return 2 if isinstance(exc, SettingsError | StoreUnreachable) else 1


@contextmanager
def service_of(
    args: argparse.Namespace, settings: CloudSettings | None = None
) -> Iterator[CloudService]:
    """A service on the stores the arguments (or ``settings``) name, closed afterwards."""
    chosen = settings_from_args(args) if settings is None else settings
    service = CloudService(chosen.cloud_config())
    try:
        yield service
    finally:
        service.close()
