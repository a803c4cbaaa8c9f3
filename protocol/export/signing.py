"""The signed package file: an Ed25519 signature over every line, in a trailer.

Invariants:
- A signed package is the unsigned package (``layout.write_package``'s lines) with its
  last line (``"totals":{...}}``) ending ``},`` instead and one more line, the trailer
  ``"signature":{...}}``: still one JSON object, the signature its last field.
- Every line of the unsigned package, as bytes with its newline, is chained:
  ``d_0 = sha256(CHAIN_DOMAIN)``, ``d_i = sha256(d_{i-1} || line_i)``; the trailer lists
  every ``d_i`` and the signature covers (domain, verify key, line count, the last
  digest, the sorted device-only ids). So a changed byte, a replaced text, a line
  removed, added or moved, or a cut file changes the chain, and the first line whose
  digest differs is the first bad item.
- The signing key is the account key (``protocol.strongauth.account_signing_key``); its
  messages start with ``SIGN_DOMAIN``, which no strong-authentication challenge starts
  with, so a package signature is never a proof and a proof never a signature.
- ``verify`` never trusts the listed digests before the signature over them checks:
  they only locate the first bad line. Nothing here does I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Literal

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey
from pydantic import Field, ValidationError

from protocol.errors import PackageError
from protocol.wire import WireModel

CHAIN_DOMAIN = b"memsync-export-lines/1"
SIGN_DOMAIN = b"memsync-export-signature/1|"
TRAILER_PREFIX = '"signature":'
MAX_ID_SHOWN = 40

Hex32 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Hex64 = Annotated[str, Field(pattern=r"^[0-9a-f]{128}$")]


class PackageSignature(WireModel):
    """The trailer of a signed package file."""

    algorithm: Literal["ed25519"] = "ed25519"
    signer: Hex32  # the account's verify key (public), hex
    lines: Annotated[int, Field(ge=1)]
    chain: list[Hex32]  # d_1 .. d_lines
    device_only: list[Annotated[str, Field(max_length=200)]] = []  # ids kept device-only
    signature: Hex64


def _next(previous: bytes, line: bytes) -> bytes:
    return hashlib.sha256(previous + line).digest()


def chain_of(lines: Iterable[bytes]) -> list[bytes]:
    digest = hashlib.sha256(CHAIN_DOMAIN).digest()
    out = []
    for line in lines:
        digest = _next(digest, line)
        out.append(digest)
    return out


def _message(verify_key: str, lines: int, last: str, device_only: Iterable[str]) -> bytes:
    body = json.dumps([verify_key, lines, last, sorted(device_only)], separators=(",", ":"))
    return SIGN_DOMAIN + body.encode()


class Signer:
    """Chains lines as they are written, then makes the trailer."""

    def __init__(self, key: SigningKey) -> None:
        self._key = key
        self._digest = hashlib.sha256(CHAIN_DOMAIN).digest()
        self._chain: list[str] = []

    def add(self, line: str) -> None:
        self._digest = _next(self._digest, line.encode("utf-8"))
        self._chain.append(self._digest.hex())

    def trailer(self, device_only: Iterable[str] = ()) -> PackageSignature:
        if not self._chain:
            raise PackageError("an empty package cannot be signed")
        ids = sorted(set(device_only))
        verify_key = bytes(self._key.verify_key).hex()
        message = _message(verify_key, len(self._chain), self._chain[-1], ids)
        return PackageSignature(
            signer=verify_key,
            lines=len(self._chain),
            chain=list(self._chain),
            device_only=ids,
            signature=self._key.sign(message).signature.hex(),
        )


def close_signed(last_line: str, trailer: PackageSignature) -> tuple[str, str]:
    """The unsigned package's last line as a signed file writes it, and the trailer."""
    if not last_line.endswith("}}\n"):
        raise PackageError("the package's last line is not its closing totals")
    return last_line[:-2] + ",\n", TRAILER_PREFIX + trailer.model_dump_json() + "}\n"


@dataclass(frozen=True, slots=True)
class Split:
    body: bytes  # the unsigned package
    signature: PackageSignature | None  # None: the file carries no trailer


def split(data: bytes) -> Split:
    """Take the trailer off a package file's bytes (``PackageError`` if it has one that
    cannot be read); a file without one is returned as it is, unsigned."""
    text = data.rstrip(b"\r\n \t")
    cut = text.rfind(b"\n")
    last = text[cut + 1 :]
    if not last.startswith(TRAILER_PREFIX.encode()):
        return Split(data, None)
    if not last.endswith(b"}}"):
        raise PackageError("the signature line is cut short or altered")
    try:
        signature = PackageSignature.model_validate_json(last[len(TRAILER_PREFIX) : -1])
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(signature)"
        raise PackageError(f"the signature line is invalid at {where!r}: {first['msg']}") from exc
    body = text[: cut + 1]
    if not body.endswith(b"},\n"):
        raise PackageError("the line before the signature is not the package's closing totals")
    return Split(body[:-3] + b"}}\n", signature)


def _item_of(line: bytes) -> str:
    text = line.decode("utf-8", "replace").strip().lstrip(",")
    try:
        raw = json.loads(text)
    except ValueError:
        raw = None
    if isinstance(raw, dict) and isinstance(raw.get("id"), str):
        return f"item {raw['id'][:MAX_ID_SHOWN]!r}"
    return f"{text[:MAX_ID_SHOWN]!r}"


def verify(body: bytes, signature: PackageSignature) -> None:
    """Check ``signature`` over ``body`` (an unsigned package's bytes), or raise a
    ``PackageError`` naming the first line (and item id) that does not match."""
    try:
        key = VerifyKey(bytes.fromhex(signature.signer))
        if len(signature.chain) != signature.lines:
            raise BadSignatureError("the line count disagrees with the digests")
        last = signature.chain[-1] if signature.chain else ""
        key.verify(
            _message(signature.signer, signature.lines, last, signature.device_only),
            bytes.fromhex(signature.signature),
        )
    except (BadSignatureError, ValueError) as exc:
        raise PackageError(
            "the package's signature does not verify: its signature line was altered"
        ) from exc
    lines = body.splitlines(keepends=True)
    actual = chain_of(lines)
    for number, (got, want) in enumerate(zip(actual, signature.chain, strict=False), 1):
        if got.hex() != want:
            raise PackageError(
                f"line {number} of the package ({_item_of(lines[number - 1])}) is not what "
                "was signed: the file was altered or its lines moved"
            )
    if len(actual) < signature.lines:
        raise PackageError(
            f"the package holds {len(actual)} line(s) but {signature.lines} were signed: "
            f"it was cut short after line {len(actual)}"
        )
    if len(actual) > signature.lines:
        raise PackageError(
            f"line {signature.lines + 1} of the package ({_item_of(lines[signature.lines])}) "
            f"was added after signing: {signature.lines} line(s) were signed"
        )


def signed_by(signature: PackageSignature, verify_key: bytes | None) -> bool:
    return verify_key is not None and signature.signer == verify_key.hex()
