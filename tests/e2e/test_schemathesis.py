"""Schemathesis against the cloud's own OpenAPI document, over real HTTP.

The real app runs under uvicorn on loopback (``RunningCloud``) and schemathesis loads
the contract from ``/openapi.json`` with ``from_url``, so what is tested is what a
device talks to: the ASGI server, the body reading, the stores. Every operation is
fuzzed with schema-valid (positive) and schema-breaking (negative) data, once with a
real enrolled device's Bearer credential and once with none. Checks: never a 5xx, every
status and body as documented, JSON content type, negative data refused with a 4xx,
and (with a credential) that the route refuses requests without it.

Bounded for CI: ``MEMSYNC_SCHEMATHESIS_EXAMPLES`` examples per operation and mode
(default 25), derandomized, no example database. Run bigger with e.g.
``MEMSYNC_SCHEMATHESIS_EXAMPLES=500 .venv/bin/python -m pytest tests/e2e/test_schemathesis.py``.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from nacl.public import PrivateKey
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from cloud.app import create_app
from cloud.config import CloudConfig
from cloud.openapi import CONTRACTS
from simulator.cloud_runner import RunningCloud

pytestmark = pytest.mark.e2e

EXAMPLES = int(os.environ.get("MEMSYNC_SCHEMATHESIS_EXAMPLES", "25"))
# what a refusal of schema-breaking data may be (413: an op count over the limit)
REFUSALS = ["400", "401", "403", "404", "405", "409", "413", "415"]
CONFIG = schemathesis.Config.from_dict(
    {"checks": {"negative_data_rejection": {"expected-statuses": REFUSALS}}}
)
ALWAYS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


def _runs() -> list[tuple[str, str, str, str]]:
    """(method, path, generation mode, credential): negative only where there is input to
    break; both credentials only where the route needs one."""
    runs = []
    for (method, path), contract in sorted(CONTRACTS.items()):
        modes = ["positive"]
        if contract.request is not None or contract.record_id_param:
            modes.append("negative")
        credentials = ["device", "none"] if contract.authenticated else ["none"]
        runs += [(method, path, m, c) for m in modes for c in credentials]
    return runs


RUNS = _runs()


class Target:
    """A running cloud, its loaded contract and one enrolled device's headers."""

    def __init__(self, cloud: RunningCloud) -> None:
        self.cloud = cloud
        self.schema = schemathesis.openapi.from_url(f"{cloud.url}/openapi.json", config=CONFIG)
        _space, code = cloud.operator.add_user("fuzz")
        enrolled = httpx.post(
            f"{cloud.url}/v1/enroll",
            json={
                "protocol_version": 1,
                "code": code,
                "device_name": "fuzzer",
                "public_key": base64.b64encode(bytes(PrivateKey.generate().public_key)).decode(),
            },
        )
        assert enrolled.status_code == 200, enrolled.text
        self.device_headers = {"Authorization": f"Bearer {enrolled.json()['credential']}"}


def _postgres_url(pg_admin: tuple[psycopg.Connection[Any], str, list[str]]) -> str:
    conn, prefix, created = pg_admin
    name = f"{prefix}_{len(created)}"
    conn.execute(f'CREATE DATABASE "{name}"')
    created.append(name)
    return f"postgresql://postgres@127.0.0.1:5432/{name}"


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    folder: Path = tmp_path_factory.mktemp("schemathesis")
    if request.param == "sqlite":
        cloud = RunningCloud.sqlite(folder)
    else:
        url = _postgres_url(request.getfixturevalue("pg_admin"))
        cloud = RunningCloud(CloudConfig(store_url=url, key_store_path=folder / "keys.db"))
    with cloud:
        yield Target(cloud)


@pytest.mark.parametrize(
    ("method", "path", "mode", "credential"), RUNS, ids=[" ".join(run) for run in RUNS]
)
def test_the_cloud_keeps_its_contract_under_fuzzing(
    target: Target, method: str, path: str, mode: str, credential: str
) -> None:
    operation = target.schema[path][method]
    generation = schemathesis.GenerationMode(mode)
    headers = target.device_headers if credential == "device" else {}
    checks = list(ALWAYS)
    if generation is schemathesis.GenerationMode.NEGATIVE:
        checks.append(negative_data_rejection)
    if credential == "device":
        checks.append(ignored_auth)

    @given(case=operation.as_strategy(generation_mode=generation))
    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    def fuzz(case: Any) -> None:
        case.call_and_validate(
            base_url=target.cloud.url, headers=headers, checks=checks, timeout=30
        )

    fuzz()


def test_the_contract_describes_every_served_route(target: Target) -> None:
    app = create_app(target.cloud.config)
    served = {
        (method, path)
        for route in app.routes
        if (path := getattr(route, "path", "")).startswith("/v1/")
        for method in getattr(route, "methods", set()) - {"HEAD"}
    }
    assert served == set(CONTRACTS), "a new route needs a RouteContract in cloud/openapi.py"
    paths = target.schema.raw_schema["paths"]
    assert {(m.upper(), p) for p, item in paths.items() for m in item} == served
    served_document = httpx.get(f"{target.cloud.url}/openapi.json")
    assert served_document.status_code == 200
    assert served_document.headers["content-type"] == "application/json"
    for (method, path), contract in CONTRACTS.items():
        operation = paths[path][method.lower()]
        assert operation["security"] == ([{"bearer": []}] if contract.authenticated else [])
        if contract.request is not None:
            body = operation["requestBody"]["content"]["application/json"]["schema"]
            assert body == {"$ref": f"#/components/schemas/{contract.request.__name__}"}
        if contract.authenticated:
            assert "401" in operation["responses"], (method, path)
