"""The cloud's settings: one ``pydantic-settings`` object from flags, environment and a file.

Invariants:
- One object, ``CloudSettings``, holds everything an operator sets (host, port, stores,
  limits, logs, metrics, worker options); ``CloudConfig`` and ``ServerLimits`` are built
  from it, so what the docs list is what runs (``docs/operations.md``, "Settings").
- Precedence, highest first: a command-line flag, the environment (``MEMSYNC_<NAME>``),
  the file (``--config`` or ``MEMSYNC_CONFIG``: TOML when it ends ``.toml``, else an env
  file of ``MEMSYNC_<NAME>=value`` lines), the default.
- A bad value, an unknown key in the file or a missing file is one ``SettingsError``
  naming the setting, its environment variable and the (cut, password-masked) value,
  and the reason; nothing is opened before the settings are whole.
- No secret is ever shown: the master key is not a setting (the key store reads it),
  a store URL's password is masked, the metrics token is a ``SecretStr`` never echoed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from cloud.config import CloudConfig
from cloud.errors import SettingsError
from cloud.server_limits import ServerLimits
from protocol.messages import MAX_REQUEST_BYTES

ENV_PREFIX = "MEMSYNC_"
CONFIG_ENV = "MEMSYNC_CONFIG"
DEFAULT_STORE = "./memsync-cloud/records.db"
DEFAULT_KEYS = "./memsync-cloud/keys.db"
_LIMITS = ServerLimits()
_DAILY_AT = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")
_PASSWORD = re.compile(r"(://[^:/@]*:)[^@]*@")
SHOWN_VALUE = 80  # characters of a bad value an error shows


def mask_url(value: str) -> str:
    """``value`` with the password of any ``scheme://user:password@`` in it masked."""
    return _PASSWORD.sub(r"\1***@", value)


def store_url(value: str) -> str:
    """A store URL from a URL or a plain SQLite file path (made absolute)."""
    if "://" in value:
        return value
    return f"sqlite:///{Path(value).expanduser().resolve()}"


class CloudSettings(BaseSettings):
    """Everything an operator sets; ``docs/operations.md`` lists each one."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", frozen=True, validate_default=True
    )
    source_file: ClassVar[Path | None] = None  # set on the per-load subclass only

    # where it serves and what it keeps
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=1, le=65_535)
    store: str = Field(DEFAULT_STORE, min_length=1)
    keys: str = Field(DEFAULT_KEYS, min_length=1)
    region: str = Field("default", min_length=1, max_length=64)
    # limits (``ServerLimits``, ``CloudConfig``)
    max_request_bytes: int = Field(MAX_REQUEST_BYTES, ge=1_024, le=1_073_741_824)
    header_timeout: float = Field(_LIMITS.header_timeout, gt=0, le=3_600)
    body_timeout: float = Field(_LIMITS.body_timeout, gt=0, le=3_600)
    keep_alive: float = Field(_LIMITS.keep_alive, gt=0, le=3_600)
    max_connections: int = Field(_LIMITS.max_connections, ge=1, le=10_000_000)
    backlog: int = Field(_LIMITS.backlog, ge=1, le=10_000_000)
    export_wait: float = Field(30.0, gt=0, le=3_600)
    indexing: Literal["background", "manual"] = "background"
    # what it says
    log_format: Literal["text", "json"] = "text"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    metrics: bool = True
    metrics_token: SecretStr | None = None
    # consolidator workers
    worker_id: str | None = Field(None, min_length=1, max_length=200)
    worker_interval: float = Field(5.0, gt=0, le=86_400)
    worker_lease_seconds: float = Field(300.0, gt=0, le=86_400)
    worker_batch: int = Field(20, ge=1, le=10_000)
    worker_daily_at: str = "03:00"

    @field_validator("store")
    @classmethod
    def _known_store(cls, value: str) -> str:
        if "://" in value and not value.startswith(("sqlite:///", "postgresql://")):
            scheme = value.partition("://")[0]
            raise ValueError(
                f"unsupported scheme {scheme[:20]!r}: use sqlite:///PATH, "
                "postgresql://user@host:port/db or a file path"
            )
        return value

    @field_validator("worker_daily_at")
    @classmethod
    def _hh_mm(cls, value: str) -> str:
        if not _DAILY_AT.match(value):
            raise ValueError("expected HH:MM (UTC), 00:00 to 23:59")
        return value

    @field_validator("metrics_token")
    @classmethod
    def _token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("a metrics token needs at least 16 characters")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = cls.source_file
        if path is not None:
            if path.suffix == ".toml":
                sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
            else:
                sources.append(DotEnvSettingsSource(settings_cls, env_file=path))
        return tuple(sources)

    # --- what the settings make ---------------------------------------------------

    @property
    def store_url(self) -> str:
        return store_url(self.store)

    @property
    def key_store_path(self) -> Path:
        return Path(self.keys).expanduser().resolve()

    def limits(self) -> ServerLimits:
        return ServerLimits(
            header_timeout=self.header_timeout,
            body_timeout=self.body_timeout,
            keep_alive=self.keep_alive,
            max_head_bytes=_LIMITS.max_head_bytes,
            max_connections=self.max_connections,
            backlog=self.backlog,
        )

    def cloud_config(self, **injected: Any) -> CloudConfig:
        """The runtime ``CloudConfig``; ``injected``: clock, randomness, sleep, embedder."""
        return CloudConfig(
            store_url=self.store_url,
            key_store_path=self.key_store_path,
            max_request_bytes=self.max_request_bytes,
            export_wait=self.export_wait,
            region=self.region,
            body_timeout=self.body_timeout,
            indexing=self.indexing,
            **injected,
        )

    def daily_at(self) -> tuple[int, int]:
        hour, minute = self.worker_daily_at.split(":")
        return int(hour), int(minute)


def env_name(setting: str) -> str:
    return f"{ENV_PREFIX}{setting.upper()}"


def _shown(setting: str, value: object) -> str:
    if setting == "metrics_token":
        return "(hidden)"
    text = mask_url(str(value))
    if len(text) > SHOWN_VALUE:
        text = f"{text[:SHOWN_VALUE]}… ({len(text)} characters)"
    return repr(text)


def _describe(exc: ValidationError, origin: str) -> str:
    problems = []
    for error in exc.errors():
        setting = ".".join(str(part) for part in error["loc"]) or "settings"
        reason = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            problems.append(f"unknown setting {setting[:SHOWN_VALUE]!r} in {origin}")
            continue
        value = error.get("input")
        shown = "" if isinstance(value, Mapping) else f" = {_shown(setting, value)}"
        problems.append(f"setting {setting} ({env_name(setting)}){shown}: {reason}")
    return "; ".join(problems)


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    config_file: str | Path | None = None,
) -> CloudSettings:
    """The settings: ``overrides`` (flags given; None values are "not given") over the
    environment over ``config_file`` (else ``MEMSYNC_CONFIG``) over the defaults."""
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    chosen = config_file if config_file is not None else os.environ.get(CONFIG_ENV) or None
    path: Path | None = None
    origin = "the flags or the environment"
    if chosen is not None:
        path = Path(chosen).expanduser()
        origin = f"the settings file {str(path)[:SHOWN_VALUE]}"
        if not path.is_file():
            raise SettingsError(f"the settings file {str(path)[:200]!r} does not exist")
    loader: type[CloudSettings] = type("CloudSettingsLoad", (CloudSettings,), {"source_file": path})
    try:
        return loader(**given)
    except ValidationError as exc:
        raise SettingsError(_describe(exc, origin)) from None
    except (OSError, ValueError) as exc:  # an unreadable or malformed file
        raise SettingsError(f"{origin} cannot be read: {str(exc)[:200]}") from None
