"""Every error code of the cloud is a class on the device (issue 24 item 4): the client
maps an ``ErrorBody`` once, at the transport seam, to the code's own ``ServerRefused``
subclass, with ``code``, ``message`` and ``status`` as the wire said; no device module
compares a refusal's code as a string (they catch the class)."""

from __future__ import annotations

import ast
from pathlib import Path

import httpx
import pytest

from device import errors
from device.client import CloudClient
from device.errors import ServerRefused, refusal
from protocol.messages import AckRequest, AckResponse, ErrorBody, ErrorCode

DEVICE = Path(__file__).resolve().parents[2] / "device"
# the version negotiation reads this code before any mapping (device.client)
NEGOTIATED = ErrorCode.UNSUPPORTED_PROTOCOL_VERSION


def test_every_code_has_its_own_class() -> None:
    classes = {code: type(refusal(code.value, "m", 400)) for code in ErrorCode}
    assert all(issubclass(c, ServerRefused) and c is not ServerRefused for c in classes.values())
    assert len(set(classes.values())) == len(ErrorCode), "one class per code"
    for code, cls in classes.items():
        assert getattr(errors, cls.__name__) is cls, f"{code}: {cls.__name__} is public"


@pytest.mark.parametrize("code", [c for c in ErrorCode if c is not NEGOTIATED], ids=str)
def test_the_client_raises_the_codes_class_with_the_wires_fields(code: ErrorCode) -> None:
    body = ErrorBody(code=code, message=f"the cloud says {code.value}")

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(409, content=body.model_dump_json())

    client = CloudClient("https://cloud.test", transport=httpx.MockTransport(answer))
    client.credential = "cred"
    with pytest.raises(ServerRefused) as caught:
        client.post("/v1/ack", AckRequest(event_ids=[1]), AckResponse)
    assert type(caught.value) is type(refusal(code.value, "", 0))
    assert (caught.value.code, caught.value.message, caught.value.status) == (
        code.value,
        body.message,
        409,
    )


def test_a_generic_refusal_keeps_its_message() -> None:
    exc = refusal(ErrorCode.NOT_FOUND.value, "no such record rec_1", 404)
    assert str(exc) == "the cloud refused the request (HTTP 404, not_found): no such record rec_1"


def _code_compared(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for side in [node.left, *node.comparators]:
            text = ast.unparse(side)
            if text.startswith("ErrorCode.") or (
                isinstance(side, ast.Attribute) and side.attr == "code" and "exc" in text
            ):
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize(
    "path",
    sorted(p for p in DEVICE.rglob("*.py") if p.name != "client.py"),
    ids=lambda p: str(p.relative_to(DEVICE)),
)
def test_no_device_module_compares_a_refusal_code(path: Path) -> None:
    assert _code_compared(path) == []
