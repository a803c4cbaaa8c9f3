"""``cloud.settings``: one settings object from flags, environment and a file.

Precedence is flag > environment > file > default for every setting; a bad value is
one ``SettingsError`` naming the setting, its variable, the value (a password masked,
a token hidden) and the reason; ``memsync cloud`` prints it as one line, exit 2.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cloud.errors import SettingsError
from cloud.server_limits import ServerLimits
from cloud.settings import (
    DEFAULT_STORE,
    CloudSettings,
    load_settings,
    mask_url,
)
from memsync.cli import main


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MEMSYNC_ variable of the machine running the tests leaks into them."""
    for name in list(os.environ):
        if name.startswith("MEMSYNC_"):
            monkeypatch.delenv(name)


def _write(path: Path, kind: str, values: dict[str, object]) -> Path:
    if kind == "toml":
        path = path.with_suffix(".toml")
        lines = [f"{k} = {v!r}".replace("'", '"') for k, v in values.items()]
    else:
        path = path.with_suffix(".env")
        lines = [f"MEMSYNC_{k.upper()}={v}" for k, v in values.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_defaults_make_what_the_cli_always_made(tmp_path: Path) -> None:
    s = load_settings()
    assert (s.host, s.port, s.store, s.log_format, s.metrics) == (
        "127.0.0.1", 8765, DEFAULT_STORE, "text", True,
    )  # fmt: skip
    assert s.store_url == f"sqlite:///{Path(DEFAULT_STORE).resolve()}"
    assert s.limits() == ServerLimits()
    config = s.cloud_config()
    assert config.region == "default" and config.indexing == "background"


@pytest.mark.parametrize("kind", ["toml", "env"])
def test_flag_over_environment_over_file_over_default(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = _write(
        tmp_path / "memsync", kind, {"port": 9001, "host": "0.0.0.0", "region": "eu", "backlog": 7}
    )
    monkeypatch.setenv("MEMSYNC_PORT", "9002")
    monkeypatch.setenv("MEMSYNC_HOST", "10.0.0.1")
    s = load_settings({"port": 9003, "host": None}, config_file=file)
    assert s.port == 9003  # the flag
    assert s.host == "10.0.0.1"  # the environment (the flag was not given: None)
    assert s.region == "eu" and s.backlog == 7  # the file
    assert s.worker_batch == 20  # the default
    assert s.limits().backlog == 7 and s.cloud_config().region == "eu"


def test_the_file_may_come_from_memsync_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = _write(tmp_path / "cloud", "toml", {"log_format": "json", "worker_daily_at": "04:30"})
    monkeypatch.setenv("MEMSYNC_CONFIG", str(file))
    s = load_settings()
    assert s.log_format == "json" and s.daily_at() == (4, 30)
    other = _write(tmp_path / "other", "toml", {"log_format": "text"})
    assert load_settings(config_file=other).log_format == "text"  # --config wins


SOURCES = ("flag", "env", "file")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(present=st.sets(st.sampled_from(SOURCES)), batch=st.integers(1, 3_000))
def test_precedence_is_a_rule_for_any_mix_of_sources(
    present: set[str], batch: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = {"flag": batch, "env": batch + 1, "file": batch + 2}
    file = tmp_path / "p.toml"
    file.write_text(f"worker_batch = {values['file']}\n" if "file" in present else "")
    if "env" in present:
        monkeypatch.setenv("MEMSYNC_WORKER_BATCH", str(values["env"]))
    else:
        monkeypatch.delenv("MEMSYNC_WORKER_BATCH", raising=False)
    flag = values["flag"] if "flag" in present else None
    got = load_settings({"worker_batch": flag}, config_file=file).worker_batch
    winner = next((source for source in SOURCES if source in present), None)
    assert got == (20 if winner is None else values[winner])


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("MEMSYNC_PORT", "abc", "setting port (MEMSYNC_PORT) = 'abc'"),
        ("MEMSYNC_PORT", "70000", "setting port (MEMSYNC_PORT) = '70000'"),
        ("MEMSYNC_BODY_TIMEOUT", "0", "setting body_timeout (MEMSYNC_BODY_TIMEOUT) = '0'"),
        ("MEMSYNC_LOG_FORMAT", "xml", "setting log_format (MEMSYNC_LOG_FORMAT) = 'xml'"),
        ("MEMSYNC_WORKER_DAILY_AT", "25:00", "'25:00': expected HH:MM"),
        ("MEMSYNC_METRICS", "perhaps", "setting metrics (MEMSYNC_METRICS) = 'perhaps'"),
    ],
)
def test_a_bad_value_names_the_setting_and_the_value(
    variable: str, value: str, named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert named in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_bad_store_url_is_shown_with_its_password_masked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMSYNC_STORE", "mysql://memsync:hunter2@db:3306/memsync")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    message = str(caught.value)
    assert "hunter2" not in message
    assert "'mysql://memsync:***@db:3306/memsync'" in message and "unsupported scheme" in message
    assert mask_url("postgresql://a:b@c/d") == "postgresql://a:***@c/d"


def test_a_bad_metrics_token_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_METRICS_TOKEN", "short-sekrit")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert "short-sekrit" not in str(caught.value)
    assert "metrics_token (MEMSYNC_METRICS_TOKEN) = (hidden)" in str(caught.value)
    monkeypatch.setenv("MEMSYNC_METRICS_TOKEN", "a-long-enough-metrics-token")
    s = load_settings()
    assert s.metrics_token is not None and "a-long-enough" not in repr(s)


@pytest.mark.parametrize("kind", ["toml", "env"])
def test_an_unknown_key_in_the_file_is_named(kind: str, tmp_path: Path) -> None:
    file = _write(tmp_path / "bad", kind, {"prot": 1})
    with pytest.raises(SettingsError) as caught:
        load_settings(config_file=file)
    assert "prot" in str(caught.value) and str(file) in str(caught.value)


def test_a_missing_or_broken_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="does not exist"):
        load_settings(config_file=tmp_path / "absent.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("port = = 1\n")
    with pytest.raises(SettingsError, match="cannot be read"):
        load_settings(config_file=broken)


def test_nothing_is_opened_before_the_settings_are_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "r.db"
    monkeypatch.setenv("MEMSYNC_MAX_CONNECTIONS", "0")
    where = ["--store", str(store), "--keys", str(tmp_path / "k.db")]
    assert main(["cloud", "serve", *where]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "max_connections (MEMSYNC_MAX_CONNECTIONS) = '0'" in err
    assert not store.exists()
    assert main(["cloud", "serve", "--port", "0", *where[:2]]) == 2  # a flag is checked too
    assert "setting port (MEMSYNC_PORT) = '0'" in capsys.readouterr().err


def test_the_cli_reads_its_stores_from_the_settings_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMSYNC_MASTER_KEY", "22" * 32)  # not a setting: the key store's
    file = _write(
        tmp_path / "memsync", "toml",
        {"store": str(tmp_path / "f" / "records.db"), "keys": str(tmp_path / "f" / "keys.db")},
    )  # fmt: skip
    assert main(["cloud", "add-user", "frank", "--config", str(file)]) == 0
    assert (tmp_path / "f" / "records.db").exists()
    capsys.readouterr()
    assert main(["cloud", "users", "--json", "--config", str(file)]) == 0
    assert '"name": "frank"' in capsys.readouterr().out
    # a flag still beats the file
    assert main(["cloud", "users", "--config", str(file), "--store", str(tmp_path / "g.db")]) == 0
    assert capsys.readouterr().out.strip() == "no users"


def test_the_settings_object_is_frozen() -> None:
    s = CloudSettings()
    with pytest.raises(ValueError):
        s.port = 1  # type: ignore[misc]
