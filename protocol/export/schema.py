"""The package's JSON Schema, generated from the models (committed in docs/).

Invariants: ``docs/export-package.schema.json`` is exactly ``package_schema_json()``
(the current version, 2); a test fails when a model changes and the committed schema
does not. The schema of each older version a reader still reads is frozen beside it
(``docs/export-package.v1.schema.json``) and never regenerated.
"""

from __future__ import annotations

import json
from typing import Any

from protocol.export.package import PACKAGE_SCHEMA_VERSION, ExportPackage

SCHEMA_ID = f"https://memsync.invalid/schemas/export-package/v{PACKAGE_SCHEMA_VERSION}.json"


def package_schema() -> dict[str, Any]:
    schema = ExportPackage.model_json_schema(mode="serialization")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"memsync export package, schema version {PACKAGE_SCHEMA_VERSION}",
        **schema,
    }


def package_schema_json() -> str:
    return json.dumps(package_schema(), indent=2, sort_keys=True) + "\n"
