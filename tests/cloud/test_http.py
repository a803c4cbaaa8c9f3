"""The HTTP boundary of docs/protocol.md, through FastAPI's test client, on both stores."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, SealedBox

from cloud.app import create_app
from cloud.config import CloudConfig
from cloud.service import CloudService
from protocol.version import PROTOCOL_VERSION, SUPPORTED_VERSIONS
from tests.cloud.conftest import SENTENCE, TYPED, Ops

LIMIT = 64 * 1024


@pytest.fixture
def client(config: CloudConfig) -> Iterator[TestClient]:
    with TestClient(create_app(replace(config, max_request_bytes=LIMIT))) as c:
        yield c


def _service(client: TestClient) -> CloudService:
    service = client.app.state.service  # type: ignore[attr-defined]
    assert isinstance(service, CloudService)
    return service


def _enroll(client: TestClient, user: str, device: str = "phone") -> dict[str, Any]:
    _, code = _service(client).add_user(user)
    key = PrivateKey.generate()
    r = client.post(
        "/v1/enroll",
        json={
            "protocol_version": 1,
            "code": code,
            "device_name": device,
            "public_key": base64.b64encode(bytes(key.public_key)).decode(),
        },
    )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    body["headers"] = {"Authorization": f"Bearer {body['credential']}"}
    body["private_key"] = key
    return body


def _answer(r: Any, device: dict[str, Any]) -> dict[str, Any]:
    """Open a recall answer sealed to the device's key; it must not open with another."""
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"protocol_version", "sealed_answer"}
    sealed = base64.b64decode(r.json()["sealed_answer"])
    with pytest.raises(CryptoError):
        SealedBox(PrivateKey.generate()).decrypt(sealed)
    opened: dict[str, Any] = json.loads(SealedBox(device["private_key"]).decrypt(sealed))
    return opened


def _error(r: Any, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["code"] == code
    assert body["protocol_version"] == 1 and body["supported_versions"] == list(SUPPORTED_VERSIONS)
    assert set(body) == {"protocol_version", "code", "message", "supported_versions"}
    message: str = body["message"]
    return message


def test_health(client: TestClient) -> None:
    r = client.get("/v1/health")
    assert r.status_code == 200
    assert r.json()["status"] == "ok" and r.json()["supported_versions"] == list(SUPPORTED_VERSIONS)


def test_push_pull_ack_pending_and_record_over_http(client: TestClient, ops: Ops) -> None:
    me = _enroll(client, "alice")
    r = client.post(
        "/v1/push",
        headers=me["headers"],
        json={
            "protocol_version": 1,
            "ops": [
                ops.episode("ep_aaaaaaaa01", TYPED),
                ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
            ],
        },
    )
    assert r.status_code == 200, r.text
    assert [x["status"] for x in r.json()["receipts"]] == ["applied", "applied"]
    pulled = client.post("/v1/pull", headers=me["headers"], json={"protocol_version": 1}).json()
    assert [c["kind"] for c in pulled["changes"]] == ["episode", "record_version", "record_state"]
    assert pulled["has_more"] is False
    record = client.get("/v1/records/rec_aaaaaaaa01", headers=me["headers"]).json()
    assert record["lifecycle_state"] == "active" and record["version"] == 1
    assert "text" not in record

    client.post(
        "/v1/push",
        headers=me["headers"],
        json={"protocol_version": 1, "ops": [ops.forget("rec_aaaaaaaa01")]},
    )
    skeleton = client.get("/v1/records/rec_aaaaaaaa01", headers=me["headers"]).json()
    assert set(skeleton) == {"protocol_version", "id", "lifecycle_state", "forgotten_at"}
    assert skeleton["lifecycle_state"] == "permanently_forgotten"

    pending = client.get("/v1/forgets/pending", headers=me["headers"]).json()
    assert [d["device_name"] for d in pending["forgets"][0]["pending"]] == ["phone"]

    # pull first: the forgetting device held the record, so its next push waits
    blocked = client.post(
        "/v1/push",
        headers=me["headers"],
        json={"protocol_version": 1, "ops": [ops.episode("ep_aaaaaaaa02", "Later.")]},
    )
    assert me["device_id"] in _error(blocked, 409, "pull_required")

    page = client.post(
        "/v1/pull", headers=me["headers"], json={"protocol_version": 1, "cursor": pulled["cursor"]}
    ).json()
    event_id = page["changes"][0]["event_id"]
    acked = client.post(
        "/v1/ack", headers=me["headers"], json={"protocol_version": 1, "event_ids": [event_id]}
    )
    assert acked.json()["acknowledged"] == [event_id]
    pending = client.get("/v1/forgets/pending", headers=me["headers"]).json()
    assert pending["forgets"][0]["pending"] == []


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer cred_unknown"}, {"Authorization": "Basic abc"}],
)
def test_unauthorized(client: TestClient, headers: dict[str, str]) -> None:
    _enroll(client, "alice")
    for method, path in [
        ("post", "/v1/push"),
        ("post", "/v1/pull"),
        ("post", "/v1/ack"),
        ("post", "/v1/recall"),
        ("get", "/v1/forgets/pending"),
        ("get", "/v1/records/rec_aaaaaaaa01"),
    ]:
        r = client.request(method, path, headers=headers, json={"protocol_version": 1})
        _error(r, 401, "unauthorized")


def test_recall_over_http_answers_the_callers_space_only(client: TestClient, ops: Ops) -> None:
    alice = _enroll(client, "alice")
    bob = _enroll(client, "bob")
    for who, n in ((alice, 1), (bob, 2)):
        episode, record = f"ep_aaaaaaaa0{n}", f"rec_aaaaaaaa0{n}"
        r = client.post(
            "/v1/push",
            headers=who["headers"],
            json={
                "protocol_version": 1,
                "ops": [ops.episode(episode, TYPED), ops.remember(record, SENTENCE, [episode])],
            },
        )
        assert r.status_code == 200, r.text
    _service(client).index_pending()  # the background indexer's work, when the test says
    body = {"protocol_version": 1, "query": "What is my favorite number?"}
    r = client.post("/v1/recall", headers=alice["headers"], json=body)
    answer = _answer(r, alice)
    assert set(answer) == {"lines", "block", "scope", "factual"}
    assert SENTENCE.encode() not in r.content  # the answer travels sealed
    assert answer["scope"] == "cloud" and answer["factual"] is False
    assert [line["record_id"] for line in answer["lines"]] == ["rec_aaaaaaaa01"]
    line = answer["lines"][0]
    assert line["text"] == SENTENCE and line["epistemic_state"] == "said"
    assert line["confidence"] == "You told me" and SENTENCE in answer["block"]
    off = _answer(
        client.post("/v1/recall", headers=alice["headers"], json={**body, "personalized": False}),
        alice,
    )
    assert off["lines"] == [] and off["block"] == ""
    for bad, field in [
        ({**body, "query": ""}, "query"),
        ({**body, "query": "x" * 4001}, "query"),
        ({**body, "limit": 0}, "limit"),
        ({**body, "limit": 51}, "limit"),
        ({**body, "area": "moon"}, "area"),
        ({**body, "consents": ["gossip"]}, "consents"),
        ({**body, "surprise": 1}, "surprise"),
    ]:
        message = _error(
            client.post("/v1/recall", headers=alice["headers"], json=bad), 400, "malformed_request"
        )
        assert field in message


def test_another_spaces_record_is_not_found_like_a_missing_one(
    client: TestClient, ops: Ops
) -> None:
    alice = _enroll(client, "alice")
    bob = _enroll(client, "bob")
    client.post(
        "/v1/push",
        headers=alice["headers"],
        json={
            "protocol_version": 1,
            "ops": [
                ops.episode("ep_aaaaaaaa01", TYPED),
                ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
            ],
        },
    )
    theirs = _error(
        client.get("/v1/records/rec_aaaaaaaa01", headers=bob["headers"]), 404, "not_found"
    )
    missing = _error(
        client.get("/v1/records/rec_bbbbbbbb01", headers=bob["headers"]), 404, "not_found"
    )
    assert theirs.replace("rec_aaaaaaaa01", "X") == missing.replace("rec_bbbbbbbb01", "X")
    assert client.get("/v1/records/rec_aaaaaaaa01", headers=alice["headers"]).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        {"protocol_version": 7, "ops": "not even a list", "extra": 1},
        {"protocol_version": 0},
        {"protocol_version": "1"},
        {"protocol_version": True},
        {"ops": []},
    ],
)
def test_unsupported_protocol_version_is_refused_by_its_version(
    client: TestClient, body: dict[str, Any]
) -> None:
    me = _enroll(client, "alice")
    for path in ("/v1/push", "/v1/pull", "/v1/ack", "/v1/recall"):
        message = _error(
            client.post(path, headers=me["headers"], json=body),
            400,
            "unsupported_protocol_version",
        )
        assert f"1 to {PROTOCOL_VERSION}" in message
    _error(client.post("/v1/enroll", json=body), 400, "unsupported_protocol_version")


def test_version_seven_message_names_the_version(client: TestClient) -> None:
    message = _error(
        client.post("/v1/enroll", json={"protocol_version": 7}), 400, "unsupported_protocol_version"
    )
    expected = f"this side accepts versions 1 to {PROTOCOL_VERSION}"
    assert message == f"protocol version 7 is not supported; {expected}"


def test_an_error_never_echoes_a_large_input(client: TestClient) -> None:
    """A megabyte of protocol version, of key name or of field value is named by its
    first characters and its length; every answer stays small (issue 22, item 3)."""
    me = _enroll(client, "alice")
    huge = "v" * 60_000  # under the 64 KiB body limit of every route but push
    answers = [
        (client.post("/v1/push", headers=me["headers"], json={"protocol_version": huge}),
         "unsupported_protocol_version"),
        (client.post("/v1/enroll", json={"protocol_version": huge}),
         "unsupported_protocol_version"),
        (client.post("/v1/pull", headers=me["headers"], json={"protocol_version": 1, huge: 1}),
         "malformed_request"),
        (client.post("/v1/enroll", json={"protocol_version": 1, "code": "c" * 20,
                                         "device_name": huge, "public_key": "AAAA"}),
         "malformed_request"),
    ]  # fmt: skip
    for answer, code in answers:
        assert len(answer.content) < 2_000, answer.content[:200]
        message = _error(answer, 400, code)
        assert "v" * 200 not in message, message[:200]
        if code == "unsupported_protocol_version" or "field 'vvvv" in message:
            assert "(60002 characters)" in message or "(60000 characters)" in message
    first = _error(answers[0][0], 400, "unsupported_protocol_version")
    assert first.startswith("protocol version 'vvvv")
    assert "(60002 characters)" in _error(answers[1][0], 400, "unsupported_protocol_version")
    assert "(60000 characters)" in _error(answers[2][0], 400, "malformed_request")


def test_a_process_whose_store_a_newer_memsync_migrated_stops_serving(
    client: TestClient,
) -> None:
    """Issue 22, item 7: another process migrated the shared store past what this one
    knows; every request that would touch the store is answered 503 ``store_too_new``
    naming both versions, and nothing is changed."""
    from sqlalchemy import text

    from cloud.store.migrations import KNOWN_VERSION

    me = _enroll(client, "alice")
    store = _service(client).store
    with store.engine.begin() as conn:
        conn.execute(
            text("INSERT INTO schema_migrations (version, name, applied_at) "
                 "VALUES (:v, 'newer', CURRENT_TIMESTAMP)"),
            {"v": KNOWN_VERSION + 1},
        )  # fmt: skip
    for path, body in (("/v1/pull", {"protocol_version": 1}),
                       ("/v1/push", {"protocol_version": 1, "ops": []})):  # fmt: skip
        message = _error(client.post(path, headers=me["headers"], json=body), 503, "store_too_new")
        assert f"schema version {KNOWN_VERSION + 1}" in message
        assert f"up to {KNOWN_VERSION}" in message


def test_shown_cuts_a_value_and_names_its_length() -> None:
    from protocol.errors import SHOWN_CHARS, shown

    assert shown(7) == "7" and shown("abc") == "'abc'"
    long = shown("x" * 500)
    assert long.startswith("'" + "x" * (SHOWN_CHARS - 1)) and long.endswith("(502 characters)")
    assert len(long) < SHOWN_CHARS + 30


def test_malformed_bodies(client: TestClient) -> None:
    me = _enroll(client, "alice")
    h = me["headers"]
    _error(client.post("/v1/pull", headers=h, content=b"{not json"), 400, "malformed_request")
    _error(client.post("/v1/pull", headers=h, content=b"[1, 2]"), 400, "malformed_request")
    msg = _error(
        client.post("/v1/pull", headers=h, json={"protocol_version": 1, "limit": 0}),
        400,
        "malformed_request",
    )
    assert "'limit'" in msg
    msg = _error(
        client.post("/v1/pull", headers=h, json={"protocol_version": 1, "surprise": 1}),
        400,
        "malformed_request",
    )
    assert "'surprise'" in msg
    msg = _error(
        client.post("/v1/ack", headers=h, json={"protocol_version": 1, "event_ids": ["x"]}),
        400,
        "malformed_request",
    )
    assert "event_ids.0" in msg
    _error(
        client.post("/v1/pull", headers=h, json={"protocol_version": 1, "cursor": "bogus"}),
        400,
        "malformed_cursor",
    )


def test_enrollment_errors(client: TestClient) -> None:
    key = base64.b64encode(bytes(PrivateKey.generate().public_key)).decode()
    body = {"protocol_version": 1, "code": "abcdefgh1234", "device_name": "p", "public_key": key}
    _error(client.post("/v1/enroll", json=body), 403, "enrollment_refused")
    msg = _error(
        client.post("/v1/enroll", json={**body, "public_key": "%%%"}), 400, "malformed_request"
    )
    assert "'public_key'" in msg


def test_oversize_bodies_are_refused_before_anything_is_applied(
    client: TestClient, ops: Ops
) -> None:
    me = _enroll(client, "alice")
    h = me["headers"]
    big = json.dumps(
        {"protocol_version": 1, "ops": [ops.episode("ep_aaaaaaaa01", "x" * 3000)] * 30}
    ).encode()
    assert len(big) > LIMIT
    _error(client.post("/v1/push", headers=h, content=big), 413, "request_too_large")

    def chunks() -> Iterator[bytes]:  # no Content-Length: the bytes read are counted
        for start in range(0, len(big), 4096):
            yield big[start : start + 4096]

    r = client.post("/v1/push", headers=h, content=chunks())
    assert "content-length" not in {k.lower() for k in r.request.headers}
    _error(r, 413, "request_too_large")

    lying = client.post(
        "/v1/push", headers={**h, "Content-Length": "10"}, content=big
    )  # a declared size that understates the body
    _error(lying, 413, "request_too_large")

    many = {"protocol_version": 1, "ops": [{"kind": "x"}] * 501}
    msg = _error(client.post("/v1/push", headers=h, json=many), 413, "request_too_large")
    assert "501" in msg
    pulled = client.post("/v1/pull", headers=h, json={"protocol_version": 1}).json()
    assert pulled["changes"] == []


def test_unknown_route_is_an_error_body(client: TestClient) -> None:
    _error(client.get("/v1/nope"), 404, "not_found")
    _error(client.get("/v1/push"), 405, "malformed_request")


def test_account_key_is_registered_once_over_http(client: TestClient) -> None:
    me = _enroll(client, "alice")
    key = base64.b64encode(bytes(range(32))).decode()
    body = {"protocol_version": 1, "account_key": key}
    first = client.post("/v1/account-key", headers=me["headers"], json=body)
    assert first.status_code == 200, first.text
    assert first.json()["account_key"] == key
    assert client.post("/v1/account-key", headers=me["headers"], json=body).status_code == 200
    other = {"protocol_version": 1, "account_key": base64.b64encode(b"\x07" * 32).decode()}
    message = _error(
        client.post("/v1/account-key", headers=me["headers"], json=other),
        409,
        "account_key_mismatch",
    )
    assert me["space_id"] in message
    short = {"protocol_version": 1, "account_key": base64.b64encode(b"\x07" * 5).decode()}
    assert "'account_key'" in _error(
        client.post("/v1/account-key", headers=me["headers"], json=short), 400, "malformed_request"
    )
    _error(client.post("/v1/account-key", json=body), 401, "unauthorized")


# --- hostile input: what schemathesis and the hand probes found (docs/security.md) ---


def _pulled(client: TestClient, h: dict[str, str]) -> list[Any]:
    r = client.post("/v1/pull", headers=h, json={"protocol_version": 1, "limit": 500})
    assert r.status_code == 200, r.text
    changes: list[Any] = r.json()["changes"]
    return changes


def test_event_ids_beyond_64_bits_are_refused_not_a_server_error(client: TestClient) -> None:
    """Found by schemathesis: an ack naming 2**63 was a 500 on both stores (SQLite
    OverflowError, PostgreSQL ``bigint out of range``)."""
    h = _enroll(client, "alice")["headers"]
    for event_id in (2**63, -(2**63) - 1, 10**30):
        body = {"protocol_version": 1, "event_ids": [1, event_id]}
        msg = _error(client.post("/v1/ack", headers=h, json=body), 400, "malformed_request")
        assert "'event_ids.1'" in msg and "64 bits" in msg
    body = {"protocol_version": 1, "event_ids": [0]}
    msg = _error(client.post("/v1/ack", headers=h, json=body), 400, "malformed_request")
    assert "event_ids.0" in msg
    body = {"protocol_version": 1, "event_ids": [2**63 - 1]}
    assert client.post("/v1/ack", headers=h, json=body).status_code == 200


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"protocol_version": 1, "limit": NaN}', "NaN is not a JSON number"),
        (b'{"protocol_version": 1, "limit": Infinity}', "Infinity is not a JSON number"),
        (b'{"protocol_version": 1, "limit": -Infinity}', "-Infinity is not a JSON number"),
        (b'{"protocol_version": 1, "limit": 1e400}', "'limit': inf is not a finite number"),
        (b'{"protocol_version": 1, "limit": 5, "limit": 6}', "key 'limit' appears twice"),
        (b'{"protocol_version": 1, "cursor": "\xff\xfe"}', "byte 0xff at offset 35"),
        (b'\xef\xbb\xbf{"protocol_version": 1}', "BOM"),
        (b'{"protocol_version": 1, "cursor": "\\ud800x"}', "'cursor' contains a lone UTF-16"),
        (b'{"protocol_version": 1, "cursor": "a\\u0000b"}', "'cursor' contains a NUL"),
        (b'{"protocol_version": 1, "x": ' + b"[" * 30_000 + b"]" * 30_000 + b"}", "nested"),
        (b'{"protocol_version": 1, "x": ' + b"[" * 40 + b"]" * 40 + b"}", "'x.0.0.0"),
        (b'{"protocol_version": 1, "limit": "5"}', "'limit': Input should be a valid integer"),
        (b'{"protocol_version": 1, "limit": 5.5}', "'limit': Input should be a valid integer"),
        (b'{"protocol_version": 1, "limit": true}', "'limit': Input should be a valid integer"),
        (b'{"protocol_version": 1, "limit": 1' + b"0" * 5000 + b"}", "body is not JSON"),
    ],
)
def test_hostile_json_is_a_400_naming_where_and_why(
    client: TestClient, raw: bytes, reason: str
) -> None:
    h = {**_enroll(client, "alice")["headers"], "Content-Type": "application/json"}
    msg = _error(client.post("/v1/pull", headers=h, content=raw), 400, "malformed_request")
    assert reason in msg, msg


def test_an_integral_float_is_an_integer_as_json_schema_says(client: TestClient) -> None:
    h = _enroll(client, "alice")["headers"]
    r = client.post("/v1/pull", headers=h, json={"protocol_version": 1.0, "limit": 5.0})
    assert r.status_code == 200, r.text


def test_a_body_declared_as_something_else_is_415(client: TestClient) -> None:
    h = _enroll(client, "alice")["headers"]
    for media_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        r = client.post(
            "/v1/pull",
            headers={**h, "Content-Type": media_type},
            content=b'{"protocol_version": 1}',
        )
        assert media_type in _error(r, 415, "malformed_request")
    for media_type in ("application/json; charset=utf-8", "application/problem+json"):
        r = client.post(
            "/v1/pull",
            headers={**h, "Content-Type": media_type},
            content=b'{"protocol_version": 1}',
        )
        assert r.status_code == 200, r.text


def test_a_nul_or_lone_surrogate_in_enrollment_changes_nothing(client: TestClient) -> None:
    """PostgreSQL refuses NUL in text: a device name holding one was a 500 after the code
    had been checked; now it is a 400 and the code stays unused."""
    service = _service(client)
    _, code = service.add_user("alice")
    key = base64.b64encode(bytes(PrivateKey.generate().public_key)).decode()
    body = {"protocol_version": 1, "code": code, "device_name": "ph\x00ne", "public_key": key}
    msg = _error(client.post("/v1/enroll", json=body), 400, "malformed_request")
    assert "'device_name' contains a NUL" in msg
    surrogate = b'{"protocol_version": 1, "code": "\\udc00' + code.encode() + b'"}'
    msg = _error(client.post("/v1/enroll", content=surrogate), 400, "malformed_request")
    assert "'code' contains a lone UTF-16 surrogate" in msg
    ok = client.post("/v1/enroll", json={**body, "device_name": "phone"})
    assert ok.status_code == 200, ok.text  # the code was not used up


def test_an_op_holding_a_nul_is_refused_alone(client: TestClient, ops: Ops) -> None:
    h = _enroll(client, "alice")["headers"]
    candidate = {
        **ops._base("mark_candidate", "assistant"),
        "episode_id": "ep_aaaaaaaa01",
        "sentence": 0,
        "content_type": "preference",
        "sensitivity": "normal",
        "time_kind": "permanent",
        "score": 0.5,
        "model_id": "det\x00ector",
    }
    named = ops.episode("ep_aaaaaaaa02", "Seen on a page.")
    named |= {"source_kind": "external_content", "source_id": "https://x\x00y"}
    batch = [
        ops.episode("ep_aaaaaaaa01", TYPED),
        candidate,
        named,
        ops.episode("ep_aaaaaaaa03", "I like\x00 tea."),
        ops.project("Garden\x00"),
    ]
    r = client.post("/v1/push", headers=h, json={"protocol_version": 1, "ops": batch})
    assert r.status_code == 200, r.text
    receipts = r.json()["receipts"]
    assert [x["status"] for x in receipts] == ["applied", *["refused"] * 4]
    assert "'model_id' contains a NUL" in receipts[1]["reason"]
    assert "'source_id' contains a NUL" in receipts[2]["reason"]
    assert "'text' contains a NUL" in receipts[3]["reason"]
    assert all(x["code"] == "malformed" for x in receipts[1:])
    assert [c["kind"] for c in _pulled(client, h)] == ["episode"]


def test_huge_or_deep_values_inside_ops_refuse_the_push_and_change_nothing(
    client: TestClient, ops: Ops
) -> None:
    h = _enroll(client, "alice")["headers"]
    huge = {**ops.episode("ep_aaaaaaaa02", "Hi."), "extra": 2**64}
    deep: Any = "x"
    for _ in range(40):
        deep = [deep]
    for bad, where in ((huge, "'ops.1.extra'"), ({**ops.project("P"), "x": deep}, "'ops.1.x.0")):
        body = {"protocol_version": 1, "ops": [ops.episode("ep_aaaaaaaa01", TYPED), bad]}
        msg = _error(client.post("/v1/push", headers=h, json=body), 400, "malformed_request")
        assert where in msg, msg
    assert _pulled(client, h) == []


def test_odd_members_of_ops_name_their_index(client: TestClient) -> None:
    h = _enroll(client, "alice")["headers"]
    for ops_value, where in (
        ([1], "ops.0"),
        ([{}, "x"], "ops.1"),
        ({"a": 1}, "ops"),
        (None, "ops"),
    ):
        body = {"protocol_version": 1, "ops": ops_value}
        msg = _error(client.post("/v1/push", headers=h, json=body), 400, "malformed_request")
        assert f"'{where}'" in msg, msg
    r = client.post("/v1/push", headers=h, json={"protocol_version": 1, "ops": [{}, {"kind": 7}]})
    assert [x["code"] for x in r.json()["receipts"]] == ["malformed", "malformed"]


@pytest.mark.parametrize(
    "path",
    [
        "/v1/records/rec_%00aaaaaaaa",
        "/v1/records/%00",
        "/v1/records/%ED%A0%80",
        "/v1/records/rec_" + "a" * 5000,
        "/v1/records/..%2F..%2Fhealth",
        "/v1/records/REC_AAAAAAAA01",
        "/v1/records/%20rec_aaaaaaaa01",
    ],
)
def test_odd_record_ids_in_the_path_are_not_found(client: TestClient, path: str) -> None:
    h = _enroll(client, "alice")["headers"]
    _error(client.get(path, headers=h), 404, "not_found")


def test_base64_edge_cases_are_refused_naming_the_field(client: TestClient) -> None:
    h = _enroll(client, "alice")["headers"]
    good = base64.b64encode(bytes(32)).decode()
    for value, reason in (
        (good[:-1], "not valid base64"),  # padding missing
        (good + "=", "not valid base64"),  # padding to spare
        (good.replace("A", "-", 1), "not valid base64"),  # the URL-safe alphabet
        (" " + good, "not valid base64"),
        ("é" * 44, "not valid base64"),
        ("", "32 bytes, got 0"),
        (base64.b64encode(bytes(31)).decode(), "32 bytes, got 31"),
        (12345, "expected a base64 string"),
    ):
        body = {"protocol_version": 1, "account_key": value}
        msg = _error(client.post("/v1/account-key", headers=h, json=body), 400, "malformed_request")
        assert "'account_key'" in msg and reason in msg, (value, msg)
