"""Timing every request a device sends, at its one HTTP seam.

Invariants: ``TimingTransport`` wraps a real ``httpx`` transport and changes nothing
about the request or the answer; it records (path, seconds, outcome) for every request
into a shared ``RequestLog``, where the outcome is ``ok``, ``HTTP <status> <code>`` or
the transport exception's class name. Nothing here asserts a timing.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from time import perf_counter

import httpx


@dataclass
class RequestLog:
    """Every timed request of a run, safe to append to from many threads."""

    entries: list[tuple[str, float, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, path: str, seconds: float, outcome: str) -> None:
        with self._lock:
            self.entries.append((path, seconds, outcome))

    def seconds(self, path: str, *, ok_only: bool = True) -> list[float]:
        return [s for p, s, o in self.entries if p == path and (o == "ok" or not ok_only)]

    def outcomes(self) -> Counter[str]:
        """Failed requests by path and kind (``/v1/push HTTP 409 pull_required``)."""
        return Counter(f"{p} {o}" for p, _s, o in self.entries if o != "ok")


def _outcome(response: httpx.Response) -> str:
    if response.is_success:
        return "ok"
    try:
        code = json.loads(response.read()).get("code", "")
    except (ValueError, AttributeError):
        code = "not-json"
    return f"HTTP {response.status_code} {code}".rstrip()


class TimingTransport(httpx.BaseTransport):
    """A real transport that times each request and logs its outcome."""

    def __init__(self, log: RequestLog, inner: httpx.BaseTransport | None = None) -> None:
        self.log = log
        self.inner = inner or httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        start = perf_counter()
        try:
            response = self.inner.handle_request(request)
            response.read()  # the whole answer, so the time covers the body too
        except httpx.TransportError as exc:
            self.log.add(request.url.path, perf_counter() - start, type(exc).__name__)
            raise
        self.log.add(request.url.path, perf_counter() - start, _outcome(response))
        return response

    def close(self) -> None:
        self.inner.close()


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile ``q`` (0..100) of ``values``; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n * q / 100), at least 1
    return ordered[int(rank) - 1]
