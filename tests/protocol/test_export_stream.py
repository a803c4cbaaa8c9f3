"""The sealed export stream: only a whole, untouched stream for this export opens."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nacl.public import PrivateKey, SealedBox

from protocol.errors import PackageError, SealError
from protocol.export.stream import (
    CHUNK_BYTES,
    StreamAborted,
    StreamSealer,
    frames,
    open_stream,
)

EXPORT = "exp_aaaaaaaaaaaaaaaa"
DEVICE = PrivateKey(b"\x11" * 32)
PLAINTEXT = b"".join(f"line {i}\n".encode() for i in range(30_000))


def sealed(plaintext: bytes = PLAINTEXT, export_id: str = EXPORT) -> list[bytes]:
    key = os.urandom(32)
    sealer = StreamSealer(key, os.urandom(16), export_id)
    head = sealer.header(SealedBox(DEVICE.public_key).encrypt(key))
    return [
        head,
        *sealer.seal_all([plaintext[i : i + 1000] for i in range(0, len(plaintext), 1000)]),
    ]


def opened(data: list[bytes], export_id: str = EXPORT, device: PrivateKey = DEVICE) -> bytes:
    return b"".join(open_stream(data, export_id, SealedBox(device).decrypt))


def test_a_whole_stream_opens_to_the_plaintext_in_chunks() -> None:
    data = sealed()
    assert len(data) > 3  # several chunks: the package is never one buffer
    assert opened(data) == PLAINTEXT
    assert opened([b"".join(data)]) == PLAINTEXT  # however the bytes arrive


def test_only_the_device_it_was_sealed_to_opens_it() -> None:
    with pytest.raises(PackageError, match="does not open with this device's key"):
        opened(sealed(), device=PrivateKey(b"\x22" * 32))


def test_a_stream_of_another_export_does_not_open() -> None:
    with pytest.raises(PackageError, match="chunk 0 does not open"):
        opened(sealed(export_id="exp_bbbbbbbbbbbbbbbb"))


def test_a_dropped_or_reordered_chunk_does_not_open() -> None:
    data = sealed()
    with pytest.raises(PackageError, match="chunk 1 does not open"):
        opened([data[0], data[1], data[3], *data[4:]])
    with pytest.raises(PackageError, match="chunk 0 does not open"):
        opened([data[0], data[2], data[1], *data[3:]])


def test_a_flipped_bit_does_not_open() -> None:
    data = sealed()
    bad = bytearray(data[2])
    bad[40] ^= 1
    with pytest.raises(PackageError, match="chunk 1 does not open"):
        opened([data[0], data[1], bytes(bad), *data[3:]])


def test_a_stream_without_its_final_chunk_is_cut_short() -> None:
    data = sealed()
    with pytest.raises(PackageError, match="without its final chunk"):
        opened(data[:-1])


def test_frames_after_the_final_chunk_are_refused() -> None:
    data = sealed()
    with pytest.raises(PackageError, match="follow the final chunk"):
        opened([*data, data[-1]])


def test_an_error_chunk_stops_the_stream_with_the_senders_reason() -> None:
    key = os.urandom(32)
    sealer = StreamSealer(key, os.urandom(16), EXPORT)
    data = [
        sealer.header(SealedBox(DEVICE.public_key).encrypt(key)),
        sealer.data(b"partial"),
        sealer.error("record rec_x v2: its data key is missing"),
    ]
    with pytest.raises(StreamAborted, match="rec_x v2: its data key is missing"):
        opened(data)
    with pytest.raises(SealError, match="already closed"):
        sealer.final()


def test_an_oversized_frame_is_refused_before_it_is_buffered() -> None:
    with pytest.raises(PackageError, match="at most"):
        list(frames([(CHUNK_BYTES * 4).to_bytes(4, "big") + b"x"]))


def test_garbage_is_not_a_stream() -> None:
    with pytest.raises(PackageError, match="not a memsync export stream"):
        opened([b"\x00\x00\x00\x03abc"])


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_any_cut_of_a_stream_never_opens_as_whole(data: st.DataObject) -> None:
    stream = b"".join(sealed(PLAINTEXT[:200_000]))
    cut = data.draw(st.integers(min_value=0, max_value=len(stream) - 1))
    with pytest.raises(PackageError):
        opened([stream[:cut]])
