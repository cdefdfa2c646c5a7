"""Every path of crc32_fast.h (zlib, 128-bit and 512-bit carry-less multiply
folding), forced in turn with ``rmq._fast.crc32._force_path``, gives exactly
zlib.crc32: every length around the folding thresholds, random lengths up to
5000 bytes, unaligned starts, non-zero initial values and 1 MiB + 1."""

from __future__ import annotations

import random
import re
import zlib
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rmq._fast
from rmq._fast import compiled_or_none

FAST = compiled_or_none("crc32")
PATHS = ("zlib", "clmul", "vpclmul")
DATA = random.Random(9).randbytes(5000 + 64)
BIG = random.Random(10).randbytes((1 << 20) + 1 + 7)


def _runnable() -> tuple[str, ...]:
    """The paths this CPU can run: the best one and every one below it."""
    assert FAST is not None, "rmq._fast.crc32 is not built (make ext)"
    best = FAST._force_path(None)
    return PATHS[:PATHS.index(best) + 1]


@pytest.fixture(params=PATHS)
def path(request):
    """Force one path for the test; a path this CPU lacks must be refused
    (then the test checks nothing else: there is nothing to run)."""
    name = request.param
    if name not in _runnable():
        with pytest.raises(ValueError, match="cannot run"):
            FAST._force_path(name)
        assert FAST.path() == _runnable()[-1]
        return None
    assert FAST._force_path(name) == name
    assert FAST.path() == name
    yield name
    FAST._force_path(None)


def _check(data, value: int = 0) -> None:
    """crc32 and body_crc of ``data`` against zlib, as bytes and as a view."""
    expect = zlib.crc32(data, value)
    assert FAST.crc32(data, value) == expect, (len(data), value)
    assert FAST.body_crc(data) == zlib.crc32(data) & 0x7FFFFFFF, len(data)


@pytest.mark.compiled_only
@pytest.mark.timeout(60)
def test_every_length_to_1100_and_the_thresholds(path):
    if path is None:
        return
    lengths = list(range(1101)) + [n + d for n in (2048, 4096, 5000 - 1) for d in (-17, -16, -1, 0, 1, 15)]
    for start in (0, 1, 7, 13):
        for n in lengths:
            _check(memoryview(DATA)[start:start + n], 0x5A5A5A5A if n & 1 else 0)


@pytest.mark.compiled_only
@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 5000), start=st.integers(0, 63), value=st.integers(0, 2**32 - 1),
       seed=st.integers(0, 2**32 - 1))
def test_random_lengths_starts_and_values(n, start, value, seed):
    data = random.Random(seed).randbytes(n)
    view = memoryview(bytearray(start) + data)[start:]
    for name in _runnable():
        FAST._force_path(name)
        try:
            assert FAST.crc32(view, value) == zlib.crc32(data, value), (name, n, start)
            assert FAST.body_crc(data) == zlib.crc32(data) & 0x7FFFFFFF, (name, n)
        finally:
            FAST._force_path(None)


@pytest.mark.compiled_only
def test_large_input_unaligned_with_a_start_value(path):
    if path is None:
        return
    for start in (0, 3):
        view = memoryview(BIG)[start:start + (1 << 20) + 1]
        _check(view, 0xDEADBEEF)
        _check(view)


@pytest.mark.compiled_only
def test_incremental_pieces_across_paths(path):
    """Feeding a buffer in pieces of every size class (zlib, one block,
    128-bit lanes, 512-bit lanes) carries the register exactly."""
    if path is None:
        return
    cuts = [0, 5, 21, 85, 341, 1365, 4000, len(DATA)]
    crc = 0
    for a, b in pairwise(cuts):
        crc = FAST.crc32(memoryview(DATA)[a:b], crc)
    assert crc == zlib.crc32(DATA)


@pytest.mark.compiled_only
def test_force_path_refuses_unknown_names_and_restores_the_best():
    assert FAST is not None, "rmq._fast.crc32 is not built (make ext)"
    best = FAST._force_path(None)
    for bad in ("avx2", "", "ZLIB"):
        with pytest.raises(ValueError, match="unknown CRC-32 path"):
            FAST._force_path(bad)
        assert FAST.path() == best
    FAST._force_path("zlib")
    assert FAST.path() == "zlib"
    assert FAST._force_path(None) == best == FAST.path()


def _reflected_x_pow_mod_p(e: int) -> int:
    """x^e mod P (P = 0x104C11DB7), bit-reversed over 32 bits, shifted left
    by one: a folding constant as the reflected carry-less multiply uses it."""
    r = 1
    for _ in range(e):
        r <<= 1
        if r & (1 << 32):
            r ^= 0x104C11DB7
    return int(f"{r:032b}"[::-1], 2) << 1


def test_header_constants_are_the_documented_powers_of_x():
    """Each RMQ_K_<D> pair of crc32_fast.h is (x^(D+32), x^(D-32)) mod P, and
    RMQ_K_64 is x^64 mod P: the derivation its comment gives."""
    header = (Path(rmq._fast.__file__).parent / "crc32_fast.h").read_text()
    pairs = re.findall(r"#define RMQ_K_(\d+) (0x[0-9a-f]+)ULL, (0x[0-9a-f]+)ULL", header)
    assert sorted(int(d) for d, _, _ in pairs) == [128, 256, 384, 512, 1024, 1536, 2048]
    for d, lo, hi in pairs:
        assert int(lo, 16) == _reflected_x_pow_mod_p(int(d) + 32), d
        assert int(hi, 16) == _reflected_x_pow_mod_p(int(d) - 32), d
    k64 = re.search(r"#define RMQ_K_64 (0x[0-9a-f]+)ULL", header)
    assert k64 is not None and int(k64.group(1), 16) == _reflected_x_pow_mod_p(64)
