"""Identifiers made by clients and servers.

Invariant: an id is ``<prefix>_<token>``; callers hand in the random bytes, so this
module stays deterministic and pure.
"""

from __future__ import annotations

import base64
import re
from typing import Annotated

from pydantic import StringConstraints

_TOKEN = r"[a-z0-9]{8,64}"

RecordId = Annotated[str, StringConstraints(pattern=rf"^rec_{_TOKEN}$")]
EpisodeId = Annotated[str, StringConstraints(pattern=rf"^ep_{_TOKEN}$")]
OpId = Annotated[str, StringConstraints(pattern=rf"^op_{_TOKEN}$")]
ConversationId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")]
DeviceId = Annotated[str, StringConstraints(pattern=rf"^dev_{_TOKEN}$")]
SpaceId = Annotated[str, StringConstraints(pattern=rf"^sp_{_TOKEN}$")]
ArtifactId = Annotated[str, StringConstraints(pattern=rf"^art_{_TOKEN}$")]
# a client-made id of a one-off request that is not an op (deleting the account)
RequestId = Annotated[str, StringConstraints(pattern=rf"^req_{_TOKEN}$")]

PREFIXES = ("rec", "ep", "op", "dev", "sp", "key", "art", "exp", "req")


def make_id(prefix: str, random_bytes: bytes) -> str:
    """Build an id from a prefix and at least 10 random bytes handed in by the caller."""
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}; expected one of {PREFIXES}")
    if len(random_bytes) < 10:
        raise ValueError(f"an id needs at least 10 random bytes, got {len(random_bytes)}")
    token = base64.b32encode(random_bytes).decode("ascii").rstrip("=").lower()
    return f"{prefix}_{token}"


def is_id(prefix: str, value: str) -> bool:
    return re.fullmatch(rf"{prefix}_{_TOKEN}", value) is not None
