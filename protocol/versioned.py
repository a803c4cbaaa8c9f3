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
from typing import Any, TypeVar

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


def _refuse_newer_set(value: object, version: int) -> None:
    if isinstance(value, BaseModel):
        model_type = type(value)
        for name in newer_fields(model_type, version):
            if name in value.model_fields_set:
                raise FieldNotInVersion(
                    model_type.__name__, name, introduced_in(model_type, name), version
                )
        for name in model_type.model_fields:
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
