"""The sealed export stream: a package delivered in chunks that only one device opens.

Invariants:
- The stream is a sequence of frames (4-byte big-endian length, then the body). The
  first frame is the header: ``MAGIC``, a 16-byte nonce prefix and the stream key
  sealed to the device's public key (by the caller: this module makes no randomness).
- Every later frame is one chunk sealed with ``protocol.sealing`` under the stream key;
  its nonce is the prefix and the chunk's index, and its associated data binds the
  export id, the index and the chunk's kind (data, final, error). A chunk moved,
  dropped, replayed, altered or taken from another export does not open.
- Only a ``final`` chunk ends a stream: a stream that stops before one is refused as
  cut short, so a reader never takes a partial package for a whole one. An ``error``
  chunk ends it too, carrying the sender's reason (``StreamAborted``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from enum import IntEnum

from protocol.errors import PackageError, SealError
from protocol.sealing import KEY_BYTES, open_sealed, seal

MAGIC = b"MSX1"
PREFIX_BYTES = 16
CHUNK_BYTES = 64 * 1024
MAX_FRAME_BYTES = CHUNK_BYTES + 1024
MEDIA_TYPE = "application/vnd.memsync.export-stream"


class ChunkKind(IntEnum):
    DATA = 0
    FINAL = 1
    ERROR = 2


class StreamAborted(PackageError):
    """The sender stopped the stream and said why (nothing partial is kept)."""


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def _binding(export_id: str, index: int, kind: ChunkKind) -> bytes:
    return f"memsync/1|export|{export_id}|{index}|{int(kind)}".encode()


def _nonce(prefix: bytes, index: int) -> bytes:
    return prefix + index.to_bytes(8, "big")


class StreamSealer:
    """Seals one export's chunks (the caller hands in the key and the nonce prefix)."""

    def __init__(self, key: bytes, nonce_prefix: bytes, export_id: str) -> None:
        if len(key) != KEY_BYTES or len(nonce_prefix) != PREFIX_BYTES:
            raise SealError(
                f"a stream needs a {KEY_BYTES}-byte key and a {PREFIX_BYTES}-byte nonce prefix"
            )
        self._key = key
        self._prefix = nonce_prefix
        self._export_id = export_id
        self._index = 0
        self.closed = False

    def header(self, sealed_key: bytes) -> bytes:
        return _frame(MAGIC + self._prefix + sealed_key)

    def _chunk(self, kind: ChunkKind, plaintext: bytes) -> bytes:
        if self.closed:
            raise SealError(f"export {self._export_id}: the stream is already closed")
        index = self._index
        self._index += 1
        self.closed = kind is not ChunkKind.DATA
        body = bytes([kind]) + seal(
            self._key,
            _nonce(self._prefix, index),
            plaintext,
            _binding(self._export_id, index, kind),
        )
        return _frame(body)

    def data(self, plaintext: bytes) -> bytes:
        return self._chunk(ChunkKind.DATA, plaintext)

    def final(self, plaintext: bytes = b"") -> bytes:
        return self._chunk(ChunkKind.FINAL, plaintext)

    def error(self, reason: str) -> bytes:
        return self._chunk(ChunkKind.ERROR, reason.encode("utf-8"))

    def seal_all(self, pieces: Iterable[bytes]) -> Iterator[bytes]:
        """Data frames of about ``CHUNK_BYTES`` each, then the final frame."""
        buffer = bytearray()
        for piece in pieces:
            buffer += piece
            while len(buffer) >= CHUNK_BYTES:
                yield self.data(bytes(buffer[:CHUNK_BYTES]))
                del buffer[:CHUNK_BYTES]
        yield self.final(bytes(buffer))


def frames(data: Iterable[bytes], max_frame: int = MAX_FRAME_BYTES) -> Iterator[bytes]:
    """The frame bodies in a byte stream, in flat memory; a frame larger than
    ``max_frame`` or a stream ending inside a frame raises ``PackageError``."""
    buffer = bytearray()
    for piece in data:
        buffer += piece
        while len(buffer) >= 4:
            size = int.from_bytes(buffer[:4], "big")
            if size > max_frame:
                raise PackageError(
                    f"an export stream frame says {size} bytes; at most {max_frame} are allowed"
                )
            if len(buffer) < 4 + size:
                break
            yield bytes(buffer[4 : 4 + size])
            del buffer[: 4 + size]
    if buffer:
        raise PackageError("the export stream ends inside a frame: it was cut short")


def open_stream(
    data: Iterable[bytes], export_id: str, open_key: Callable[[bytes], bytes]
) -> Iterator[bytes]:
    """The plaintext of a sealed stream, chunk by chunk. ``open_key`` opens the sealed
    stream key with the device's private key. Raises ``PackageError`` (or
    ``StreamAborted``) for anything but a whole, untouched stream."""
    bodies = frames(data)
    head = next(bodies, None)
    if head is None or not head.startswith(MAGIC) or len(head) <= len(MAGIC) + PREFIX_BYTES:
        raise PackageError("this is not a memsync export stream (no stream header)")
    try:
        key = open_key(head[len(MAGIC) + PREFIX_BYTES :])
    except Exception as exc:  # the caller's box raises its own CryptoError
        raise PackageError(
            f"export {export_id}: the stream key does not open with this device's key ({exc})"
        ) from exc
    index = 0
    for body in bodies:
        if not body:
            raise PackageError(f"export {export_id}: chunk {index} is empty")
        try:
            kind = ChunkKind(body[0])
        except ValueError as exc:
            raise PackageError(
                f"export {export_id}: chunk {index} has unknown kind {body[0]}"
            ) from exc
        try:
            plaintext = open_sealed(key, body[1:], _binding(export_id, index, kind))
        except SealError as exc:
            raise PackageError(
                f"export {export_id}: chunk {index} does not open (altered, reordered or "
                "from another export)"
            ) from exc
        if kind is ChunkKind.ERROR:
            raise StreamAborted(
                f"the cloud stopped export {export_id}: {plaintext.decode('utf-8', 'replace')}"
            )
        yield plaintext
        index += 1
        if kind is ChunkKind.FINAL:
            if next(bodies, None) is not None:
                raise PackageError(f"export {export_id}: frames follow the final chunk")
            return
    raise PackageError(
        f"export {export_id}: the stream ended after {index} chunk(s) without its final "
        "chunk: it was cut short, and no package was kept"
    )
