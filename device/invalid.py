"""A validator's complaint in words: what the agent says when an operation it builds
from a caller's values does not validate.

Invariants:
- Nothing was changed when one of these is raised: the operation is built (and
  validated) before anything is applied.
- The message names the item (kind and id) and each field's problem; a malformed id is
  described in words, never shown as its regular expression.
- A typed bundle of keyword arguments (a ``TypedDict`` under ``Unpack``) refuses a key it
  does not declare, as a spelled-out signature would (``known_keywords``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

from device.errors import InvalidOperation

_T = TypeVar("_T")

_ID_PATTERN = re.compile(r"^\^(\w+)_\[a-z0-9\]\{(\d+),(\d+)\}\$$")


def in_words(err: Any) -> str:
    """A validator's complaint for a person: a malformed id is described, not its regex."""
    if err.get("type") != "string_pattern_mismatch":
        return str(err["msg"])
    shown = repr(str(err.get("input", ""))[:40])
    found = _ID_PATTERN.match(str((err.get("ctx") or {}).get("pattern", "")))
    if found is None:
        return f"{shown} is not in the expected form"
    prefix, low, high = found.groups()
    return (
        f"{shown} is not a well-formed id: it should be '{prefix}_' followed by "
        f"{low} to {high} lower-case letters or digits"
    )


def invalid(kind: str, item_id: str, exc: ValidationError) -> InvalidOperation:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {in_words(err)}"
        for err in exc.errors()
    )
    return InvalidOperation(f"{kind} {item_id} is invalid, nothing was changed: {problems}")


def known_keywords(call: str, given: Mapping[str, object], allowed: type) -> None:
    """A keyword ``allowed`` (a ``TypedDict``) does not name raises ``TypeError``, as a
    spelled-out signature would: a misspelt option is never silently ignored."""
    unknown = sorted(set(given) - set(allowed.__annotations__))
    if unknown:
        raise TypeError(f"{call}() got unexpected keyword argument(s): {', '.join(unknown)}")


def build(kind: str, item_id: str, make: Callable[[], _T]) -> _T:
    """``make()``, with a validation error told as ``invalid(kind, item_id, ...)``."""
    try:
        return make()
    except ValidationError as exc:
        raise invalid(kind, item_id, exc) from exc
