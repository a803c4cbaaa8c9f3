"""The cloud's log lines: text, or one JSON object per line, each with its request id.

Invariants:
- ``configure_logging`` installs one handler on the root logger (stderr), so the
  cloud's own loggers, uvicorn's and APScheduler's all come out in the chosen format.
- A JSON line is one object: ``time`` (UTC, ISO 8601), ``level``, ``logger``,
  ``message`` and, when the line belongs to a request, ``request_id`` (from
  ``REQUEST_ID``, which ``cloud.telemetry`` sets for the request and which follows it
  into worker threads); the access line adds ``method``, ``route``, ``status`` and
  ``latency_ms``.
- Nothing logged carries a secret or memory content: the access line names the route
  template (``/v1/records/{record_id}``), never the raw path, query, headers or body;
  only the fields listed in ``ACCESS_FIELDS`` are copied from a record.
"""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Literal, TextIO, assert_never

LogFormat = Literal["text", "json"]
REQUEST_ID: ContextVar[str | None] = ContextVar("memsync_request_id", default=None)
ACCESS_FIELDS = ("method", "route", "status", "latency_ms")
ACCESS_LOGGER = "memsync.http"
_TEXT = "%(asctime)s %(levelname)s %(name)s %(message)s"
_HANDLER_NAME = "memsync"


def _request_id(record: logging.LogRecord) -> str | None:
    given = getattr(record, "request_id", None)
    return given if isinstance(given, str) else REQUEST_ID.get()


class JsonFormatter(logging.Formatter):
    """One JSON object per line (see the module invariants)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = _request_id(record)
        if request_id is not None:
            line["request_id"] = request_id
        for name in ACCESS_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """``time level logger message``, then ``[request id]`` when there is one."""

    def __init__(self) -> None:
        super().__init__(_TEXT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        request_id = _request_id(record)
        return text if request_id is None else f"{text} [{request_id}]"


class _StreamHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to ``stream``, or to whatever ``sys.stderr`` is when a line is written."""

    def __init__(self, stream: TextIO | None) -> None:
        super().__init__(stream or sys.stderr)
        self._fixed = stream

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = self._fixed or sys.stderr
        super().emit(record)


def formatter(log_format: LogFormat) -> logging.Formatter:
    match log_format:
        case "json":
            return JsonFormatter()
        case "text":
            return TextFormatter()
        case _:
            assert_never(log_format)


def configure_logging(
    log_format: LogFormat, level: str = "info", stream: TextIO | None = None
) -> logging.Handler:
    """One handler on the root logger in ``log_format`` (replacing the one this function
    installed before); returns it."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    handler = _StreamHandler(stream)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter(log_format))
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    return handler
