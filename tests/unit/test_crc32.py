"""rmq._fast.crc32 (carry-less multiply folding, crc32_fast.h) gives exactly
zlib.crc32 for every length, alignment and starting value, and its masked
body_crc equals the store's twin."""

from __future__ import annotations

import mmap
import os
import random
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq._fast import compiled_or_none
from rmq.store import message_codec

FAST = compiled_or_none("crc32")
# the twin is zlib itself; the compiled side joins when it is built
CRCS = [zlib.crc32] + ([FAST.crc32] if FAST is not None else [])
BODY_CRCS = [message_codec.body_crc] + ([FAST.body_crc] if FAST is not None else [])
DATA = random.Random(98).randbytes(4096 + 64)


def _reference_crc32(data: bytes, crc: int = 0) -> int:
    """Bit-at-a-time CRC-32 (reflected polynomial 0xEDB88320): the definition."""
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_short_inputs_match_the_definition():
    for n in (0, 1, 15, 16, 17, 63, 64, 65, 79, 80, 127, 128, 129, 200, 333):
        chunk = DATA[3:3 + n]
        for crc in CRCS:
            assert crc(chunk) == _reference_crc32(chunk), n
            assert crc(chunk, 0xDEADBEEF) == _reference_crc32(chunk, 0xDEADBEEF), n


@pytest.mark.timeout(60)
def test_every_length_and_alignment_matches_zlib():
    for crc in CRCS:
        for start in (0, 1, 5, 8, 15):
            for n in range(0, 4097):
                chunk = DATA[start:start + n]
                assert crc(chunk) == zlib.crc32(chunk), (start, n)


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=4096), start=st.integers(0, 31), value=st.integers(0, 2**32 - 1))
def test_any_input_start_and_value_matches_zlib(data, start, value):
    view = memoryview(bytes(start) + data)[start:]
    for crc in CRCS:
        assert crc(view, value) == zlib.crc32(data, value)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=600), cut=st.integers(0, 600))
def test_incremental_equals_whole(data, cut):
    cut = min(cut, len(data))
    for crc in CRCS:
        assert crc(data[cut:], crc(data[:cut])) == zlib.crc32(data)


def test_buffer_kinds_and_large_input():
    big = os.urandom(3 * 1024 * 1024 + 13)  # above the GIL-release threshold
    with mmap.mmap(-1, len(big)) as mm:
        mm[:] = big
        for crc in CRCS:
            assert crc(big) == zlib.crc32(big)
            assert crc(bytearray(big), 7) == zlib.crc32(big, 7)
            assert crc(memoryview(mm)[11:]) == zlib.crc32(big[11:])
            assert crc(b"") == 0 and crc(b"", 12345) == 12345
            with pytest.raises(TypeError):
                crc("not bytes")


@pytest.mark.parametrize("body_crc", BODY_CRCS)
def test_masked_body_crc(body_crc):
    for n in (0, 1, 63, 64, 65, 1024, 4096, 4099):
        body = DATA[3:3 + n]
        assert body_crc(body) == zlib.crc32(body) & 0x7FFFFFFF
    assert body_crc(b"123456789") == 0xCBF43926 & 0x7FFFFFFF  # the CRC-32 check value


def test_compiled_module_reports_its_path():
    if FAST is None:
        assert compiled_or_none("crc32") is None
        return
    flags = Path("/proc/cpuinfo").read_text() if os.path.exists("/proc/cpuinfo") else ""
    if all(f" {f}" in flags for f in ("avx512f", "avx512vl", "vpclmulqdq", "pclmulqdq", "sse4_1")):
        expect = "vpclmul"
    elif " pclmulqdq" in flags and " sse4_1" in flags:
        expect = "clmul"
    else:
        expect = "zlib"
    assert FAST.path() == expect
