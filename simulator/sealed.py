"""A fleet in sealed spaces of its own, with the walls checked around it.

Invariants: every user this fleet creates is created through the server, which
assigns the space id; the name the server sees carries a token unique to this fleet,
so runs and tests never meet each other's users. The walls digest of every space is
taken when the fleet is made, before any of its users exists, so ``walls()`` can show
that every space but the fleet's own is byte-for-byte as it was. Each digest is taken
once the cloud has settled (its post-commit indexer idle): another space's own pending
indexing is that space's work finishing, not something this fleet did.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from simulator.cloud_processes import CloudProcesses
from simulator.cloud_runner import RunningCloud
from simulator.fleet import Fleet, User
from simulator.report import Check
from simulator.walls import WallsDigest, take_digest, walls_check


class SealedFleet(Fleet):
    """A ``Fleet`` whose users are unique to it and whose walls can be checked."""

    def __init__(
        self,
        cloud: RunningCloud | CloudProcesses,
        root: Path,
        *,
        run_id: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(cloud, root, **options)
        self.run_id = run_id or secrets.token_hex(4)
        cloud.settle()
        self.walls_before: WallsDigest = take_digest(cloud.operator)

    def add_user(self, name: str) -> User:
        """A new user (and space, assigned by the server) named ``<name>-<run id>``."""
        return super().add_user(f"{name}-{self.run_id}")

    def own_spaces(self) -> set[str]:
        return {user.space_id for user in self.users.values()}

    def walls(self) -> Check:
        """PASS when every space but this fleet's own is unchanged since it was made."""
        self.cloud.settle()
        after = take_digest(self.cloud.operator)
        return walls_check(self.walls_before, after, self.own_spaces())
