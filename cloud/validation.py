"""What the cloud accepts as a request body, and messages that name the field.

Invariants:
- ``load_json`` accepts only UTF-8 JSON without NaN/Infinity, duplicate keys, integers
  outside 64 bits, lone surrogates, nesting deeper than ``MAX_JSON_DEPTH`` or NUL
  characters outside ops; it raises ``BadJson`` naming the path and reason, before any
  model sees the body, so no store ever receives such a value.
- Work is bounded by the body, not by what it claims: an object of more than
  ``MAX_OBJECT_KEYS`` keys, or a body of more than ``MAX_JSON_VALUES`` values, is
  refused as soon as the parser or the walk meets it; a caller's ``first`` check
  (the protocol version, a push's op count) runs on the parsed value before the walk.
- ``describe`` turns a pydantic error into ``field 'a.b': reason`` lines, each field
  path cut to ``protocol.errors.SHOWN_CHARS`` characters and each reason to
  ``REASON_CHARS`` (a key of a megabyte is named by its first characters and its
  length, never echoed whole).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from protocol.errors import SHOWN_CHARS

_KINDS = {
    "add_episode",
    "remember",
    "correct",
    "dont_use",
    "use_again",
    "restrict_usage",
    "confirm",
    "reaffirm",
    "forget_permanently",
    "forget_area",
    "infer",
    "add_artifact",
    "set_project",
}


def describe(exc: ValidationError, *, limit: int = 3) -> str:
    """``field 'ops.2.text': String should have at most 4000 characters`` and so on."""
    parts: list[str] = []
    for error in exc.errors()[:limit]:
        loc = [str(p) for p in error.get("loc", ())]
        # a discriminated union puts the tag first (e.g. ('remember', 'text')); drop it
        if loc and loc[0] in _KINDS:
            loc = loc[1:]
        kind = error.get("type", "")
        if kind in {"union_tag_not_found", "union_tag_invalid"}:
            loc = [*loc, "kind"]
        field = ".".join(loc) if loc else "(body)"
        reason = _cut(str(error.get("msg", "invalid")), quote=False, limit=REASON_CHARS)
        parts.append(f"field {_cut(field)}: {reason}")
    more = len(exc.errors()) - limit
    if more > 0:
        parts.append(f"and {more} more problem(s)")
    return "; ".join(parts)


# a reason is a sentence of ours (a value in it is cut already); a field path is the
# body's own keys, so it is cut like any value
REASON_CHARS = 400


def _cut(text: str, *, quote: bool = True, limit: int = SHOWN_CHARS) -> str:
    if len(text) <= limit:
        return f"'{text}'" if quote else text
    cut = f"{text[:limit]}… ({len(text)} characters)"
    return f"'{cut}" if quote else cut


# --- the body as bytes: what JSON the cloud accepts at all ----------------------------

MAX_JSON_DEPTH = 32
# no message of the protocol comes near these: a full push (500 ops) holds ~15,000
# values and its widest object a few dozen keys
MAX_JSON_VALUES = 100_000
MAX_OBJECT_KEYS = 1_000
# commas and brackets counted in the raw bytes (inside strings too), before the parser
# runs: the parser holds the interpreter's lock while it builds a body's values, so a
# body of a million empty lists must be refused before it is built. The largest message
# of the protocol (a push of 500 ops with 4,000-character texts) holds under 150,000.
MAX_SEPARATORS = 200_000
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_NOT_NUMBERS = {"NaN", "Infinity", "-Infinity"}


class BadJson(ValueError):
    """The body is not JSON this service accepts; the message names where and why."""


class TooManyValues(BadJson):
    """The body holds more values than any message of the protocol (answered 413)."""


def _refuse_constant(name: str) -> Any:
    raise BadJson(f"{name} is not a JSON number")


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len(pairs) > MAX_OBJECT_KEYS:
        raise BadJson(f"an object has {len(pairs)} keys; at most {MAX_OBJECT_KEYS}")
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BadJson(f"key {key[:80]!r} appears twice in one object")
        out[key] = value
    return out


def _number(literal: str) -> float | int:
    """A JSON number with a fraction or exponent: an integer when it is one (JSON Schema
    counts ``5.0`` as an integer), else a float."""
    value = float(literal)
    if value.is_integer() and INT64_MIN <= value <= INT64_MAX:
        return int(value)
    return value


def load_json(body: bytes, first: Callable[[Any], None] | None = None) -> Any:
    """Parse a request body: UTF-8, no NaN/Infinity, no duplicate keys, then ``first``
    (a cheap check that may refuse it at once), then ``check_json``."""
    separators = body.count(b",") + body.count(b"[") + body.count(b"{")
    if separators > MAX_SEPARATORS:
        raise TooManyValues(
            f"body holds {separators} commas and brackets; at most {MAX_SEPARATORS} "
            "(it was refused before it was parsed)"
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadJson(
            f"body is not UTF-8: byte 0x{body[exc.start]:02x} at offset {exc.start}"
        ) from exc
    try:
        value = json.loads(
            text,
            object_pairs_hook=_refuse_duplicates,
            parse_constant=_refuse_constant,
            parse_float=_number,
        )
    except BadJson:
        raise
    except RecursionError as exc:
        raise BadJson(f"body is nested more than {MAX_JSON_DEPTH} levels deep") from exc
    except ValueError as exc:
        raise BadJson(f"body is not JSON: {exc}") from exc
    if first is not None:
        first(value)
    check_json(value)
    return value


def _bad_text(text: str) -> str | None:
    if "\x00" in text:
        return "contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone UTF-16 surrogate (not Unicode text)"
    return None


def check_json(value: Any, *, nul_free_except: tuple[str, ...] = ("ops",)) -> None:
    """Refuse what no field of the protocol can hold and no store can keep, naming the
    path: nesting deeper than ``MAX_JSON_DEPTH``, integers outside 64 bits, non-finite
    numbers, lone surrogates anywhere, and NUL characters outside the top-level
    ``nul_free_except`` members (an op's own NUL makes that op alone refused)."""
    stack: list[tuple[str, Any, int, bool]] = [("(body)", value, 0, True)]
    seen = 0
    while stack:
        path, node, depth, nul_checked = stack.pop()
        seen += 1
        if seen > MAX_JSON_VALUES:
            raise TooManyValues(f"body holds more than {MAX_JSON_VALUES} JSON values")
        if depth > MAX_JSON_DEPTH:
            raise BadJson(f"'{path}' is nested more than {MAX_JSON_DEPTH} levels deep")
        if isinstance(node, bool) or node is None:
            continue
        if isinstance(node, int):
            if not INT64_MIN <= node <= INT64_MAX:
                digits = str(node)
                shown = digits if len(digits) <= 30 else digits[:30] + "..."
                raise BadJson(f"field '{path}': integer {shown} is outside 64 bits")
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise BadJson(f"field '{path}': {node} is not a finite number")
        elif isinstance(node, str):
            _check_text(path, node, nul_checked)
        elif isinstance(node, list):
            for index, item in enumerate(node):
                stack.append((_join(path, str(index)), item, depth + 1, nul_checked))
        elif isinstance(node, dict):
            for key, item in node.items():
                _check_text(_join(path, "(key)"), key, nul_checked)
                inner = nul_checked and not (depth == 0 and key in nul_free_except)
                stack.append((_join(path, key), item, depth + 1, inner))


def _check_text(path: str, text: str, nul_checked: bool) -> None:
    problem = _bad_text(text)
    if problem is not None and (nul_checked or "NUL" not in problem):
        raise BadJson(f"field '{path}' {problem}")


def _join(path: str, key: str) -> str:
    shown = key if len(key) <= 40 else key[:40] + "..."
    return shown if path == "(body)" else f"{path}.{shown}"


def is_json_media_type(content_type: str) -> bool:
    """``application/json`` (any parameters, e.g. charset) or an ``application/*+json``."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )
