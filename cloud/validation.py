"""Turning pydantic validation errors into messages that name the field."""

from __future__ import annotations

from pydantic import ValidationError

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
        parts.append(f"field '{field}': {error.get('msg', 'invalid')}")
    more = len(exc.errors()) - limit
    if more > 0:
        parts.append(f"and {more} more problem(s)")
    return "; ".join(parts)
