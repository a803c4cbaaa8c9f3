"""The record store's rooms (``cloud.store.rooms``, issue 24): each room's protocol is
implemented by exactly one mixin, method for method with the same signature, and
``StoreSession`` and ``SqlSession`` are the rooms and nothing else. A method moved to
another module, renamed, or given another signature on one side only fails here."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from cloud.store import base
from cloud.store.rooms import IMPLEMENTED_BY, SESSION_PLUMBING
from cloud.store.sql import SqlSession


def _room(room: str) -> type:
    protocol, _ = IMPLEMENTED_BY[room]
    return getattr(importlib.import_module(f"cloud.store.rooms.{room}"), protocol)  # type: ignore[no-any-return]


def _implementation(room: str) -> type:
    module, name = IMPLEMENTED_BY[room][1].split(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def _own_methods(cls: type) -> dict[str, Callable[..., Any]]:
    """The public methods a class defines itself (not what it inherits)."""
    out = {}
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, staticmethod | classmethod):
            value = value.__func__
        if callable(value):
            out[name] = value
    return out


def _shape(function: Callable[..., Any]) -> tuple[object, ...]:
    """A signature as plain data: names, kinds, defaults and (string) annotations."""
    sig = inspect.signature(function)
    params = tuple((p.name, p.kind, p.default, str(p.annotation)) for p in sig.parameters.values())
    return params, str(sig.return_annotation)


ROOMS = sorted(IMPLEMENTED_BY)


@pytest.mark.parametrize("room", ROOMS)
def test_each_room_is_implemented_method_for_method_by_its_module(room: str) -> None:
    protocol, implementation = _room(room), _implementation(room)
    wanted, given = _own_methods(protocol), _own_methods(implementation)
    assert wanted, f"room {room} declares no method"
    assert sorted(set(wanted) - set(given)) == [], (
        f"{implementation.__module__}.{implementation.__name__} lacks methods of room {room}"
    )
    assert sorted(set(given) - set(wanted)) == [], (
        f"{implementation.__module__}.{implementation.__name__} has public methods room "
        f"{room} does not declare (declare them there, or move them to their room)"
    )
    differ = [name for name in wanted if _shape(wanted[name]) != _shape(given[name])]
    assert differ == [], f"room {room}: these signatures differ from the protocol's: {differ}"


@pytest.mark.parametrize("room", ROOMS)
def test_each_implementation_module_is_named_for_its_room(room: str) -> None:
    implementation = _implementation(room)
    module = importlib.import_module(implementation.__module__)
    assert f"``cloud.store.rooms.{room}``" in (module.__doc__ or ""), (
        f"{module.__name__} does not say it implements the {room} room"
    )
    assert implementation in SqlSession.__mro__, f"SqlSession does not mix in {implementation}"


def test_no_method_is_in_two_rooms_and_store_session_is_every_room() -> None:
    seen: dict[str, str] = {}
    for room in ROOMS:
        for name in _own_methods(_room(room)):
            assert name not in seen, f"{name} is in room {seen[name]} and room {room}"
            seen[name] = room
    assert set(base.StoreSession.__mro__) >= {_room(room) for room in ROOMS}
    assert _own_methods(base.StoreSession) == {}, "StoreSession declares methods of its own"
    # everything SqlSession offers belongs to one room, or is the transaction's plumbing
    offered = {name for name in dir(SqlSession) if not name.startswith("_")} | set(
        SqlSession.__annotations__
    ) - {"_dialect"}
    stray = sorted(offered - set(seen) - SESSION_PLUMBING)
    assert stray == [], f"SqlSession methods in no room: {stray}"


def test_a_room_module_holds_no_sql() -> None:
    for room in ROOMS:
        module = importlib.import_module(f"cloud.store.rooms.{room}")
        source = inspect.getsource(module)
        assert "sqlalchemy" not in source, f"cloud.store.rooms.{room} imports SQL"
