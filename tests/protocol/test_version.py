from __future__ import annotations

import pytest

from protocol.errors import UnsupportedProtocolVersion
from protocol.messages import PushRequest, peek_version
from protocol.version import PROTOCOL_VERSION, SUPPORTED_VERSIONS, check_version


def test_current_version_is_supported() -> None:
    assert check_version(PROTOCOL_VERSION) == PROTOCOL_VERSION
    assert PushRequest(ops=[]).protocol_version == PROTOCOL_VERSION


@pytest.mark.parametrize("bad", [0, 2, 99, -1, "1", None, True, 1.0])
def test_other_versions_are_refused_naming_the_range(bad: object) -> None:
    with pytest.raises(UnsupportedProtocolVersion) as info:
        check_version(bad)
    low, high = SUPPORTED_VERSIONS
    assert f"{low} to {high}" in str(info.value)


def test_missing_version_is_refused() -> None:
    with pytest.raises(UnsupportedProtocolVersion):
        peek_version({"ops": []})
