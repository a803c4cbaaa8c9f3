"""The HTTP server's limits, as settings (``cloud.server`` applies them; importing
this module imports no server)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class ServerLimits:
    header_timeout: float = 10.0  # seconds to send a whole request head
    body_timeout: float = 30.0  # seconds to send a whole body once the head is in
    keep_alive: float = 5.0  # seconds an idle kept-alive connection stays open
    max_head_bytes: int = 16 * 1024  # request line and headers
    max_connections: int = 1_000  # connections and requests at once
    backlog: int = 2_048

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "keep_alive"):
            if not 0 < getattr(self, name) <= 3_600:
                raise ValueError(
                    f"{name} {getattr(self, name)!r}: must be above 0 and at most 3600 s"
                )
        for name in ("max_head_bytes", "max_connections", "backlog"):
            if not 1 <= getattr(self, name) <= 10_000_000:
                raise ValueError(f"{name} {getattr(self, name)!r}: must be 1 to 10,000,000")
