"""Render and parse one wire message for one protocol version.

Invariants:
- A field marked ``Since(n)`` (``protocol.version``) exists on the wire only in
  versions ``n`` and later. Rendering for an older version leaves it out, and refuses
  (``FieldNotInVersion``) when the field holds anything but its default, since the
  older version cannot say it; parsing a message of an older version refuses the
  field by name, at any depth.
- Rendering is pydantic's own JSON of the model with those fields excluded, so a
  message renders for an older version byte for byte as that version's code wrote it.
- The ``protocol_version`` at the top of a rendered envelope is the target version.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin

from pydantic import BaseModel

from protocol.errors import FieldNotInVersion
from protocol.version import PROTOCOL_VERSION, Since, check_version

M = TypeVar("M", bound=BaseModel)

_Exclude = dict[Any, Any]


def introduced_in(model_type: type[BaseModel], field: str) -> int:
    """The protocol version a field of ``model_type`` first appeared in."""
    info = model_type.model_fields[field]
    marks = [m.version for m in info.metadata if isinstance(m, Since)]
    return max(marks, default=1)


@cache
def newer_fields(model_type: type[BaseModel], version: int) -> tuple[str, ...]:
    """The fields of ``model_type`` itself (not nested) that ``version`` does not have."""
    return tuple(
        name for name in model_type.model_fields if introduced_in(model_type, name) > version
    )


def _exclusions(value: object, version: int) -> _Exclude | None:
    """pydantic's ``exclude`` spec that drops every field newer than ``version``."""
    if isinstance(value, BaseModel):
        model_type = type(value)
        spec: _Exclude = {}
        for name in newer_fields(model_type, version):
            default = model_type.model_fields[name].get_default(call_default_factory=True)
            if getattr(value, name) != default:
                raise FieldNotInVersion(
                    model_type.__name__, name, introduced_in(model_type, name), version
                )
            spec[name] = True
        for name in model_type.model_fields:
            if name not in spec:
                inner = _exclusions(getattr(value, name), version)
                if inner is not None:
                    spec[name] = inner
        return spec or None
    if isinstance(value, list | tuple):
        items = {i: s for i, v in enumerate(value) if (s := _exclusions(v, version)) is not None}
        return items or None
    if isinstance(value, dict):
        keyed = {k: s for k, v in value.items() if (s := _exclusions(v, version)) is not None}
        return keyed or None
    return None


def render_json(message: BaseModel, version: int, *, exclude_none: bool = False) -> str:
    """``message`` as the JSON text of protocol ``version``."""
    check_version(version)
    exclude = None if version >= PROTOCOL_VERSION else _exclusions(message, version)
    if getattr(message, "protocol_version", version) != version:
        message = message.model_copy(update={"protocol_version": version})
    return message.model_dump_json(exclude=exclude, exclude_none=exclude_none)


def _annotation_may_hold_newer(annotation: Any, version: int, seen: frozenset[type]) -> bool:
    """Whether a value of ``annotation`` can hold a model with a field newer than
    ``version`` (anything not known to be plain data counts as yes)."""
    if annotation is None or annotation is type(None):
        return False
    if annotation is Any or annotation is object:
        return True
    origin = get_origin(annotation)
    if origin is Literal:
        return False
    if origin is Annotated:  # the metadata is no value's type
        return _annotation_may_hold_newer(get_args(annotation)[0], version, seen)
    if origin is not None:
        return any(_annotation_may_hold_newer(a, version, seen) for a in get_args(annotation))
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return annotation in seen or _walk_spec(annotation, version, seen) is not None
        return False
    return not isinstance(annotation, (int, str, float, bool))  # Any, TypeVar, forward refs


def _walk_spec(
    model_type: type[BaseModel], version: int, seen: frozenset[type] = frozenset()
) -> tuple[str, ...] | None:
    """None when no value of ``model_type`` can hold a field newer than ``version`` set
    at any depth; else the names of its fields worth walking into."""
    if seen:
        return _walk_spec_of(model_type, version, seen)
    return _walk_spec_cached(model_type, version)


@cache
def _walk_spec_cached(model_type: type[BaseModel], version: int) -> tuple[str, ...] | None:
    return _walk_spec_of(model_type, version, frozenset())


def _walk_spec_of(
    model_type: type[BaseModel], version: int, seen: frozenset[type]
) -> tuple[str, ...] | None:
    inner = seen | {model_type}
    walk = tuple(
        name
        for name, info in model_type.model_fields.items()
        if _annotation_may_hold_newer(info.annotation, version, inner)
    )
    if not walk and not newer_fields(model_type, version):
        return None
    return walk


def _refuse_newer_set(value: object, version: int) -> None:
    """Refuse a field newer than ``version`` set anywhere in ``value``; a model whose
    fields' types cannot hold one is not walked (``_walk_spec``)."""
    if isinstance(value, BaseModel):
        model_type = type(value)
        walk = _walk_spec(model_type, version)
        if walk is None:
            return
        for name in newer_fields(model_type, version):
            if name in value.model_fields_set:
                raise FieldNotInVersion(
                    model_type.__name__, name, introduced_in(model_type, name), version
                )
        for name in walk:
            _refuse_newer_set(getattr(value, name), version)
    elif isinstance(value, list | tuple):
        for item in value:
            _refuse_newer_set(item, version)
    elif isinstance(value, dict):
        for item in value.values():
            _refuse_newer_set(item, version)


def parse(model_type: type[M], raw: Mapping[str, Any], version: int, *, strict: bool = False) -> M:
    """Validate ``raw`` as a ``model_type`` of protocol ``version``.

    A field newer than ``version`` is refused by name (``FieldNotInVersion``) before
    its value is looked at; other faults raise pydantic's ``ValidationError``.
    ``strict`` validates as strict JSON (``"5"`` is not an integer, ``"true"`` not a
    boolean), the way the cloud reads a request.
    """
    check_version(version)
    for name in newer_fields(model_type, version):
        if name in raw:
            raise FieldNotInVersion(
                model_type.__name__, name, introduced_in(model_type, name), version
            )
    if strict:
        message = model_type.model_validate_json(json.dumps(raw), strict=True)
    else:
        message = model_type.model_validate(raw)
    if version < PROTOCOL_VERSION:
        _refuse_newer_set(message, version)
    return message
