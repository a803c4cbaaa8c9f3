"""Errors raised by the pure protocol core.

Local errors are mistakes this side made (it built a bad message); remote errors are
what the other side sent. Every message names the offending value and the reason, and
a value is shown by ``shown``: its repr cut to ``SHOWN_CHARS`` characters, with its
length, so an error never echoes a large input back.
"""

from __future__ import annotations

SHOWN_CHARS = 80


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)``, cut to ``limit`` characters with its full length named when
    longer: ``'vvvv…' (1000002 characters)``."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


class ProtocolError(Exception):
    """Base of every error the protocol core raises."""


class UnsupportedProtocolVersion(ProtocolError):
    """A message carries a protocol version outside the supported range."""

    def __init__(self, version: object, low: int, high: int) -> None:
        self.version = version
        self.low = low
        self.high = high
        super().__init__(
            f"protocol version {shown(version)} is not supported; "
            f"this side accepts versions {low} to {high}"
        )


class FieldNotInVersion(ProtocolError):
    """A message carries, or would have to carry, a field its protocol version lacks."""

    def __init__(self, message: str, field: str, since: int, version: int) -> None:
        self.message_name = message
        self.field = field
        self.since = since
        self.version = version
        super().__init__(
            f"{message} field {shown(field)} needs protocol version {since}; "
            f"this message speaks version {version}"
        )


class SealError(ProtocolError):
    """Sealed content could not be opened: wrong key, wrong binding, or tampered."""


class MalformedCursor(ProtocolError):
    """A pull cursor that this server did not issue."""


class StepOrderError(ProtocolError, TypeError):
    """A retrieval step was handed something other than the previous step's output."""

    def __init__(self, step: str, expected: str, got: object) -> None:
        self.step = step
        super().__init__(
            f"retrieval step {step!r} needs the output of {expected!r}, got "
            f"{type(got).__name__}: no step of the fixed order may be skipped or reordered"
        )


class PackageError(ProtocolError):
    """An export package (or its sealed stream) is malformed, cut short, altered or of a
    schema version this code does not read. The message says where and why."""
