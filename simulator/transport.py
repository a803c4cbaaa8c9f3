"""The simulator's side of the device's one transport seam: a fault-injecting transport.

Invariants:
- Faults happen only here, at the httpx transport, so the device's real sync code runs
  unchanged. A fault either stops a request before it reaches the server or acts on a
  request the server really received over the inner (real) transport.
- Every request is first checked against the network state: ``online = False`` (airplane
  mode) or a partition from the request's cloud origin fails it with ``ConnectError``
  before anything is sent.
- Then at most one fault applies to a request: the first matching fault in the
  explicit script (``inject``), else the one the ``plan`` draws (seeded), else none.
- Every fault, and every held copy delivered later, is appended to ``log``; a request
  that passes untouched is not logged. ``requests`` counts deliveries to the server
  made on the device's behalf (a duplicate or replay counts each copy).
- The device sees at most one answer per request it sent: a duplicate's second answer
  and a replayed copy's answer go to the log, never to the device.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

import httpx

from device.client import tls_context
from simulator.errors import FaultSpecError


class FaultKind(StrEnum):
    DROP_REQUEST = "drop_request"  # never reaches the server: ConnectError
    CONNECT_TIMEOUT = "connect_timeout"  # never reaches the server: ConnectTimeout
    DROP_RESPONSE = "drop_response"  # the server answered; ReadError on the way back
    DISCONNECT = "disconnect"  # the server answered; RemoteProtocolError (peer closed)
    READ_TIMEOUT = "read_timeout"  # the server answered; ReadTimeout on the way back
    DUPLICATE = "duplicate"  # delivered twice; the device sees the first answer
    DUPLICATE_SECOND = "duplicate_second"  # delivered twice; the device sees the second
    REPLAY_LATER = "replay_later"  # delivered now, a copy delivered again later (stale)
    SERVER_RESTART = "server_restart"  # delivered, then the server restarts; connection lost
    INTERLEAVE = "interleave"  # before delivery something else happens (another device acts)


#: Faults after which the server never saw the request.
NOT_DELIVERED = frozenset({FaultKind.DROP_REQUEST, FaultKind.CONNECT_TIMEOUT})
#: Faults after which the server saw the request but the device gets a transport error.
ANSWER_LOST = frozenset(
    {
        FaultKind.DROP_RESPONSE,
        FaultKind.DISCONNECT,
        FaultKind.READ_TIMEOUT,
        FaultKind.SERVER_RESTART,
    }
)
#: Network states logged like faults (not drawn by a plan).
OFFLINE = "offline"
PARTITIONED = "partitioned"
REPLAYED = "replayed"


@dataclass(frozen=True, kw_only=True)
class Fault:
    """One fault for one request.

    ``path`` limits it to requests to that path (``"/v1/push"``); ``None`` matches any.
    ``hold_for`` (``replay_later``): deliver the held copy after this many newer
    requests have been forwarded. ``action`` (``server_restart``): what restarts (or
    kills and restarts) the server, run after the server answered and before the device
    hears anything; (``interleave``): what happens elsewhere just before the request is
    delivered (another device forgets and syncs between this device's pull and push).
    """

    kind: FaultKind
    path: str | None = None
    hold_for: int = 1
    action: Callable[[], None] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.kind, FaultKind):
            raise FaultSpecError(
                f"fault kind {self.kind!r} is unknown; expected one of "
                f"{', '.join(k.value for k in FaultKind)}"
            )
        if self.path is not None and not self.path.startswith("/"):
            raise FaultSpecError(f"fault {self.kind.value}: path {self.path!r} must start with '/'")
        if self.hold_for < 1:
            raise FaultSpecError(
                f"fault {self.kind.value}: hold_for {self.hold_for} must be at least 1 "
                "(a replay comes after at least one newer request)"
            )
        if self.kind is FaultKind.SERVER_RESTART and self.action is None:
            raise FaultSpecError("fault server_restart needs an action that restarts the server")
        if self.kind is FaultKind.INTERLEAVE and self.action is None:
            raise FaultSpecError("fault interleave needs the action to run before delivery")

    def matches(self, request: httpx.Request) -> bool:
        return self.path is None or self.path == request.url.path


@dataclass(frozen=True, kw_only=True)
class FaultEvent:
    """One line of the fault log: what happened to request ``request_no``."""

    request_no: int
    kind: str  # a FaultKind value, or offline / partitioned / replayed
    method: str
    path: str
    origin: str
    deliveries: int  # copies the server received because of this line
    outcome: str  # the status the server answered, or the error the device saw
    detail: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "request_no": self.request_no,
            "kind": self.kind,
            "method": self.method,
            "path": self.path,
            "origin": self.origin,
            "deliveries": self.deliveries,
            "outcome": self.outcome,
            "detail": self.detail,
        }


class FaultPlan(Protocol):
    """Draws the fault (or none) for each request that no scripted fault matched."""

    def draw(self, request: httpx.Request) -> Fault | None: ...


class RandomFaults:
    """Each request gets a fault with probability ``rate``, its kind drawn by ``weights``;
    all randomness comes from the ``random.Random`` handed in, so a seed replays a run."""

    def __init__(
        self,
        rng: random.Random,
        *,
        rate: float,
        weights: Mapping[FaultKind, float] | None = None,
        paths: Iterable[str] | None = None,
        hold_for: int = 1,
    ) -> None:
        if not 0.0 <= rate <= 1.0:
            raise FaultSpecError(f"fault rate {rate} must be between 0 and 1")
        chosen: dict[FaultKind, float] = (
            dict(weights) if weights is not None else dict.fromkeys(_RANDOM_KINDS, 1.0)
        )
        scripted = sorted(k.value for k in _SCRIPTED_KINDS & set(chosen))
        if scripted:
            raise FaultSpecError(
                f"{scripted[0]} is not drawn at random (it needs an action); "
                f"inject it with Fault(kind={scripted[0]}, action=...)"
            )
        bad = {k: w for k, w in chosen.items() if w < 0}
        if bad or not chosen or sum(chosen.values()) <= 0:
            raise FaultSpecError(f"fault weights {chosen} must be non-negative with a positive sum")
        self.rng = rng
        self.rate = rate
        self.kinds = list(chosen)
        self.weights = [chosen[k] for k in self.kinds]
        self.paths = frozenset(paths) if paths is not None else None
        self.hold_for = hold_for

    def draw(self, request: httpx.Request) -> Fault | None:
        if self.paths is not None and request.url.path not in self.paths:
            return None
        if self.rng.random() >= self.rate:
            return None
        kind = self.rng.choices(self.kinds, weights=self.weights)[0]
        return Fault(kind=kind, hold_for=self.hold_for)


#: Faults that need an action, so they are only ever injected by a script.
_SCRIPTED_KINDS = frozenset({FaultKind.SERVER_RESTART, FaultKind.INTERLEAVE})
_RANDOM_KINDS = tuple(k for k in FaultKind if k not in _SCRIPTED_KINDS)


class EveryRequest:
    """Every request (to ``path``, if given) gets the same fault, until the plan is removed."""

    def __init__(self, kind: FaultKind, *, path: str | None = None) -> None:
        self.fault = Fault(kind=kind, path=path)

    def draw(self, request: httpx.Request) -> Fault | None:
        return self.fault if self.fault.matches(request) else None


@dataclass
class _Held:
    request: httpx.Request
    request_no: int
    due_after: int  # deliver once this many newer requests have been forwarded


def origin_of(url: str | httpx.URL) -> str:
    """``host:port`` of a URL: what a partition cuts a device off from."""
    parsed = httpx.URL(url) if isinstance(url, str) else url
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return f"{parsed.host}:{port}"


def _copy(request: httpx.Request) -> httpx.Request:
    """A fresh request with the same method, URL, headers and body (what the wire saw)."""
    return httpx.Request(
        request.method, request.url, headers=request.headers, content=request.read()
    )


class FaultInjectingTransport(httpx.BaseTransport):
    """Wraps a real transport; can be taken offline, partitioned, rerouted and faulted."""

    def __init__(
        self, inner: httpx.BaseTransport | None = None, *, plan: FaultPlan | None = None
    ) -> None:
        self.inner = inner or httpx.HTTPTransport(verify=tls_context())
        self.online = True
        self.requests = 0
        self.plan = plan
        self.log: list[FaultEvent] = []
        self.cut_off: set[str] = set()  # origins this device cannot reach (a partition)
        self.routes: dict[str, str] = {}  # origin -> origin it is sent to instead
        self._script: deque[Fault] = deque()
        self._held: list[_Held] = []
        self._seen = 0

    # --- what a test sets up ----------------------------------------------------------

    def inject(self, *faults: Fault | FaultKind) -> None:
        """Queue faults for the next matching requests, in order."""
        for fault in faults:
            self._script.append(fault if isinstance(fault, Fault) else Fault(kind=fault))

    @property
    def scripted(self) -> int:
        """Scripted faults not yet used."""
        return len(self._script)

    def drop_scripted(self) -> int:
        """Forget the scripted faults no request has matched; return how many."""
        left = len(self._script)
        self._script.clear()
        return left

    @property
    def held(self) -> int:
        """Copies held for a later (stale) delivery."""
        return len(self._held)

    def faults(self, kind: FaultKind | str | None = None) -> list[FaultEvent]:
        """The log, or the lines of one kind."""
        return [e for e in self.log if kind is None or e.kind == kind]

    # --- the seam ---------------------------------------------------------------------

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self._seen += 1
        number = self._seen
        request = self._routed(request)
        blocked = self._network_refusal(request, number)
        if blocked is not None:
            raise blocked
        fault = self._next_fault(request)
        if fault is None:
            response = self._deliver(request)
            self._deliver_due()
            return response
        return self._apply(fault, request, number)

    def _routed(self, request: httpx.Request) -> httpx.Request:
        target = self.routes.get(origin_of(request.url))
        if target is None:
            return request
        host, _, port = target.rpartition(":")
        request.url = request.url.copy_with(host=host, port=int(port))
        request.headers["host"] = target
        return request

    def _network_refusal(self, request: httpx.Request, number: int) -> httpx.ConnectError | None:
        origin = origin_of(request.url)
        if not self.online:
            kind, message = OFFLINE, "device is offline (simulated)"
        elif origin in self.cut_off:
            kind, message = PARTITIONED, f"partitioned from {origin} (simulated)"
        else:
            return None
        self._record(number, kind, request, 0, "ConnectError", message)
        return httpx.ConnectError(message, request=request)

    def _next_fault(self, request: httpx.Request) -> Fault | None:
        for fault in self._script:
            if fault.matches(request):
                self._script.remove(fault)
                return fault
        return self.plan.draw(request) if self.plan is not None else None

    def _deliver(self, request: httpx.Request) -> httpx.Response:
        """Send to the server and read the whole answer (the server has finished); the
        answer is handed on byte for byte, as a fresh response over those bytes."""
        self.requests += 1
        answered = self.inner.handle_request(request)
        try:
            raw = b"".join(answered.iter_raw())
        except httpx.StreamConsumed:  # an in-memory transport answered already read
            raw = answered.content
        finally:
            answered.close()
        return httpx.Response(
            answered.status_code,
            headers=answered.headers,
            stream=httpx.ByteStream(raw),
            extensions=answered.extensions,
            request=request,
        )

    def _apply(self, fault: Fault, request: httpx.Request, number: int) -> httpx.Response:
        kind = fault.kind
        if kind in NOT_DELIVERED:
            error: httpx.TransportError = (
                httpx.ConnectError("request dropped (injected)", request=request)
                if kind is FaultKind.DROP_REQUEST
                else httpx.ConnectTimeout("connect timed out (injected)", request=request)
            )
            self._record(number, kind, request, 0, type(error).__name__)
            raise error
        if kind is FaultKind.INTERLEAVE:
            assert fault.action is not None
            fault.action()
            response = self._deliver(request)
            self._record(
                number, kind, request, 1, str(response.status_code),
                "something else happened just before this request was delivered",
            )  # fmt: skip
            self._deliver_due()
            return response
        if kind in (FaultKind.DUPLICATE, FaultKind.DUPLICATE_SECOND):
            first = self._deliver(_copy(request))
            second = self._deliver(_copy(request))
            heard, other = (first, second) if kind is FaultKind.DUPLICATE else (second, first)
            which = "second" if kind is FaultKind.DUPLICATE else "first"
            self._record(
                number, kind, request, 2, str(heard.status_code),
                f"the {which} copy answered {other.status_code}",
            )  # fmt: skip
            self._deliver_due()
            return heard
        if kind is FaultKind.REPLAY_LATER:
            copy = _copy(request)
            response = self._deliver(request)
            self._record(
                number, kind, request, 1, str(response.status_code),
                f"a copy is held for after {fault.hold_for} newer request(s)",
            )  # fmt: skip
            self._deliver_due()
            self._held.append(_Held(copy, number, fault.hold_for))
            return response
        answered = self._deliver(request)
        detail = f"the server answered {answered.status_code}; the device never heard it"
        if kind is FaultKind.SERVER_RESTART:
            assert fault.action is not None
            fault.action()
            lost: httpx.TransportError = httpx.RemoteProtocolError(
                "server restarted mid-request (injected)", request=request
            )
            detail += "; the server was restarted"
        elif kind is FaultKind.DROP_RESPONSE:
            lost = httpx.ReadError("answer dropped (injected)", request=request)
        elif kind is FaultKind.DISCONNECT:
            lost = httpx.RemoteProtocolError(
                "server disconnected without sending a response (injected)", request=request
            )
        else:
            lost = httpx.ReadTimeout("read timed out (injected)", request=request)
        self._record(number, kind, request, 1, type(lost).__name__, detail)
        self._deliver_due()
        raise lost

    # --- stale replays ----------------------------------------------------------------

    def _deliver_due(self) -> None:
        """Count one newer forwarded request for every held copy; deliver those due."""
        for held in list(self._held):
            held.due_after -= 1
            if held.due_after <= 0:
                self._replay(held)

    def deliver_held(self) -> list[FaultEvent]:
        """Deliver every held copy now, oldest first; returns their log lines."""
        start = len(self.log)
        for held in list(self._held):
            self._replay(held)
        return self.log[start:]

    def _replay(self, held: _Held) -> None:
        self._held.remove(held)
        request = held.request
        try:
            response = self._deliver(_copy(request))
            outcome, detail = str(response.status_code), response.read().decode()[:300]
        except httpx.TransportError as exc:  # the server went away: the ghost is lost too
            outcome, detail = type(exc).__name__, str(exc)
        self._record(held.request_no, REPLAYED, request, 1, outcome, detail)

    # --- the log ----------------------------------------------------------------------

    def _record(
        self,
        number: int,
        kind: str,
        request: httpx.Request,
        deliveries: int,
        outcome: str,
        detail: str = "",
    ) -> None:
        self.log.append(
            FaultEvent(
                request_no=number,
                kind=str(kind),
                method=request.method,
                path=request.url.path,
                origin=origin_of(request.url),
                deliveries=deliveries,
                outcome=outcome,
                detail=detail,
            )
        )

    def close(self) -> None:
        self.inner.close()


#: The name this transport had before it injected faults; same ``online``/``requests``.
SwitchableTransport = FaultInjectingTransport
