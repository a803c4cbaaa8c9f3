"""Pull cursors: what the cloud hands a device to say where its feed stands.

Invariants:
- A cursor is ``base64url("c1:<seq>")`` (protocol 1 and 2) or ``base64url("c2:<seq>:<gen>")``
  (protocol 3: ``gen`` is the device's subset log position), unpadded, canonical: a
  cursor that does not re-encode to itself was not issued here and is refused
  (``MalformedCursorError``), never read as some other position.
- Numbers have at most 18 digits and no leading zero.
"""

from __future__ import annotations

import base64
import re

from cloud.errors import MalformedCursorError

_N = r"(0|[1-9][0-9]{0,17})"
# c1:<seq> (protocol 1 and 2); c2:<seq>:<gen> (protocol 3: gen is the subset log's)
_CURSOR = re.compile(rf"c1:{_N}|c2:{_N}:{_N}")


def encode_cursor(seq: int, gen: int | None = None) -> str:
    raw = f"c1:{seq}" if gen is None else f"c2:{seq}:{gen}"
    return base64.urlsafe_b64encode(raw.encode()).decode("ascii").rstrip("=")


def cursor_parts(cursor: str | None) -> tuple[int, int | None]:
    """``(seq, gen)`` of a cursor this server issued (``(0, None)`` for none); raise
    otherwise."""
    if cursor is None:
        return 0, None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedCursorError(f"cursor {cursor[:80]!r} was not issued by this server") from exc
    match = _CURSOR.fullmatch(raw)
    if match is None:
        raise MalformedCursorError(f"cursor {cursor[:80]!r} was not issued by this server")
    if match.group(1) is not None:
        seq, gen = int(match.group(1)), None
    else:
        seq, gen = int(match.group(2)), int(match.group(3))
    if encode_cursor(seq, gen) != cursor:
        raise MalformedCursorError(f"cursor {cursor[:80]!r} was not issued by this server")
    return seq, gen


def decode_cursor(cursor: str | None) -> int:
    """The sequence number behind a cursor this server issued; raise otherwise."""
    return cursor_parts(cursor)[0]


def decode_subset_gen(cursor: str | None) -> int | None:
    """The subset log gen a protocol-3 cursor names (None: a cursor without one)."""
    return cursor_parts(cursor)[1]
