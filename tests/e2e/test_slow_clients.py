"""Slow and idle clients cannot hold the cloud (issue 22, item 2). Real uvicorn on
loopback with the limits ``memsync cloud serve`` applies (``cloud.server``), the
timeouts shortened: hundreds of connections holding half a request head do not keep
normal requests from being served, and each is closed once its head is late; a body
that stops arriving is answered 408."""

from __future__ import annotations

import socket
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from cloud.config import CloudConfig
from cloud.server_limits import ServerLimits
from simulator.cloud_runner import RunningCloud
from tests.e2e.test_bad_input import _enroll, _episode

pytestmark = pytest.mark.e2e
HALF_OPEN = 300
HEAD_TIMEOUT = 0.5


def _cloud(tmp_path: Path) -> RunningCloud:
    config = CloudConfig(
        store_url=f"sqlite:///{tmp_path / 'records.db'}", key_store_path=tmp_path / "keys.db"
    )
    limits = ServerLimits(header_timeout=HEAD_TIMEOUT, body_timeout=HEAD_TIMEOUT)
    return RunningCloud(replace(config, body_timeout=limits.body_timeout), limits=limits)


def _half_open(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"POST /v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
    return sock


def test_half_open_connections_are_closed_and_never_block_others(tmp_path: Path) -> None:
    with _cloud(tmp_path) as cloud:
        device = _enroll(cloud, "ada")
        held = [_half_open(cloud.port) for _ in range(HALF_OPEN)]
        try:
            started = time.perf_counter()
            for n in range(1, 6):
                assert httpx.get(f"{cloud.url}/v1/health", timeout=5).status_code == 200
                body = {"protocol_version": 1, "ops": [_episode(n, "I like tea.")]}
                assert device.post("/v1/push", json=body, timeout=5).status_code == 200
            assert time.perf_counter() - started < 5.0
            closed = 0
            for sock in held:
                sock.settimeout(30)  # waits for the server's close, never sleeps
                if sock.recv(1024) == b"":
                    closed += 1
            assert closed == HALF_OPEN  # every late head was closed by the server
        finally:
            for sock in held:
                sock.close()
            device.close()


def test_a_body_that_stops_arriving_is_answered_408(tmp_path: Path) -> None:
    with _cloud(tmp_path) as cloud:
        device = _enroll(cloud, "ada")
        token = device.headers["authorization"]
        sock = socket.create_connection(("127.0.0.1", cloud.port))
        try:
            sock.sendall(
                b"POST /v1/pull HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + f"Authorization: {token}\r\n".encode()
                + b"Content-Length: 100\r\n\r\n"
                + b'{"protocol_version": 1'
            )
            sock.settimeout(30)
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = sock.recv(4096)
                assert chunk, "the server closed without an answer"
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
            rest = answer.split(b"\r\n\r\n", 1)[1]
            while b"}" not in rest:
                rest += sock.recv(4096)
            assert b"did not arrive within 0.5 s" in rest and b"nothing was changed" in rest
        finally:
            sock.close()
            device.close()


def test_limits_out_of_range_are_refused_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="header_timeout 0: must be above 0"):
        ServerLimits(header_timeout=0)
    with pytest.raises(ValueError, match="max_connections 0: must be 1 to"):
        ServerLimits(max_connections=0)


@pytest.mark.parametrize(
    "length",
    [b"Content-Length: ten\r\n", b"Content-Length: -5\r\n",
     b"Content-Length: 5\r\nContent-Length: 6\r\n"],
)  # fmt: skip
def test_what_http_itself_refuses_is_answered_in_the_json_error_body(
    tmp_path: Path, length: bytes
) -> None:
    """Issue 22, item 9: a head h11 cannot read gets a 400 ``ErrorBody``."""
    import json

    with _cloud(tmp_path) as cloud:
        sock = socket.create_connection(("127.0.0.1", cloud.port))
        try:
            sock.sendall(b"POST /v1/pull HTTP/1.1\r\nHost: 127.0.0.1\r\n" + length + b"\r\n")
            sock.settimeout(30)
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 400") and b"application/json" in head
            error = json.loads(body)
            assert error["code"] == "malformed_request"
            assert error["message"].startswith("the HTTP request could not be read")
        finally:
            sock.close()
