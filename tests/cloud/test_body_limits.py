"""What a body may cost before it is refused (issue 22, item 1): each limit refuses
just above it and accepts at it, and the refusal names the limit."""

from __future__ import annotations

import json

import pytest

from cloud.validation import (
    MAX_JSON_VALUES,
    MAX_OBJECT_KEYS,
    MAX_SEPARATORS,
    BadJson,
    TooManyValues,
    load_json,
)


def _object(keys: int) -> bytes:
    return json.dumps({f"k{i}": 0 for i in range(keys)}).encode()


def test_an_object_of_too_many_keys_is_refused_naming_the_limit() -> None:
    assert len(load_json(_object(MAX_OBJECT_KEYS))) == MAX_OBJECT_KEYS
    with pytest.raises(BadJson, match=f"{MAX_OBJECT_KEYS + 1} keys; at most {MAX_OBJECT_KEYS}"):
        load_json(_object(MAX_OBJECT_KEYS + 1))


def test_a_body_of_too_many_separators_is_refused_before_it_is_parsed() -> None:
    calls: list[object] = []
    at_limit = ("[" + ",".join(["0"] * (MAX_SEPARATORS - 1)) + "]").encode()
    with pytest.raises(TooManyValues, match="JSON values"):  # parsed, then the walk refuses
        load_json(at_limit, calls.append)
    assert len(calls) == 1
    over = ("[" + ",".join(["0"] * (MAX_SEPARATORS + 1)) + "]").encode()
    with pytest.raises(TooManyValues, match="refused before it was parsed"):
        load_json(over, calls.append)
    assert len(calls) == 1  # never parsed, so ``first`` never saw it


def test_the_walk_stops_at_the_value_limit() -> None:
    fits = json.dumps({"ops": [[0]] * ((MAX_JSON_VALUES - 3) // 2)}).encode()
    assert load_json(fits)
    over = json.dumps({"ops": [0] * MAX_JSON_VALUES}).encode()
    with pytest.raises(TooManyValues, match=f"more than {MAX_JSON_VALUES} JSON values"):
        load_json(over)


def test_first_runs_on_the_parsed_body_before_the_walk() -> None:
    def refuse(raw: object) -> None:
        raise BadJson("refused first")

    with pytest.raises(BadJson, match="refused first"):
        load_json(b'{"a": 1e400}', refuse)  # the walk would refuse the infinity
