from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import UnsupportedProtocolVersion
from protocol.messages import PushRequest, peek_version
from protocol.version import (
    LOWEST_VERSION,
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
    check_range,
    check_version,
    common_version,
)


def test_current_version_is_supported() -> None:
    assert check_version(PROTOCOL_VERSION) == PROTOCOL_VERSION
    assert PushRequest(ops=[]).protocol_version == PROTOCOL_VERSION


@pytest.mark.parametrize("bad", [0, 5, 99, -1, "1", None, True, 1.0])
def test_other_versions_are_refused_naming_the_range(bad: object) -> None:
    with pytest.raises(UnsupportedProtocolVersion) as info:
        check_version(bad)
    low, high = SUPPORTED_VERSIONS
    assert f"{low} to {high}" in str(info.value)


def test_missing_version_is_refused() -> None:
    with pytest.raises(UnsupportedProtocolVersion):
        peek_version({"ops": []})


def test_this_code_speaks_versions_1_to_3() -> None:
    assert (LOWEST_VERSION, PROTOCOL_VERSION) == SUPPORTED_VERSIONS == (1, 4)


def test_a_narrower_range_refuses_what_it_leaves_out_naming_itself() -> None:
    assert peek_version({"protocol_version": 1}, (1, 1)) == 1
    with pytest.raises(UnsupportedProtocolVersion, match="accepts versions 1 to 1"):
        peek_version({"protocol_version": 2}, (1, 1))
    with pytest.raises(UnsupportedProtocolVersion, match="accepts versions 2 to 2"):
        peek_version({"protocol_version": 1}, (2, 2))


@pytest.mark.parametrize("bad", [(0, 1), (1, 5), (2, 1), (1,), [1, 2], (1, True), "12"])
def test_a_range_outside_what_this_code_speaks_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="protocol version range"):
        check_range(bad)


ranges = st.tuples(st.integers(0, 6), st.integers(0, 6)).map(lambda t: (min(t), max(t)))


@given(mine=ranges, theirs=ranges)
def test_the_common_version_is_the_highest_both_ranges_hold(
    mine: tuple[int, int], theirs: tuple[int, int]
) -> None:
    both = set(range(mine[0], mine[1] + 1)) & set(range(theirs[0], theirs[1] + 1))
    assert common_version(mine, theirs) == (max(both) if both else None)
