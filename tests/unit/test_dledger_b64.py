"""The compiled base64 of entry bodies (rmq._fast.b64) against binascii, its
twin: the same text for every body, the same bytes -- or the same refusal --
for every input, canonical or not (whitespace, stray characters, bad or
early padding, bits left under the padding)."""

from __future__ import annotations

import binascii
import os
import random

import pytest

from rmq._fast import compiled_or_none
from rmq.dledger.entry import Entry

pytestmark = pytest.mark.timeout(60)
C = compiled_or_none("b64")


@pytest.mark.compiled_only
def test_bodies_encode_and_decode_as_binascii_does():
    assert C is not None, "rmq._fast.b64 is not built (make ext)"
    for n in [*range(70), 1200, 4096, 65537]:
        for _ in range(10):
            data = os.urandom(n)
            text = binascii.b2a_base64(data, newline=False)
            assert C.encode(data) == text and C.encode(bytearray(data)) == text
            assert C.decode(text.decode()) == data and C.decode(text) == data


@pytest.mark.compiled_only
def test_every_twelve_bits_in_either_half_of_a_group_encode_as_binascii_does():
    """A group of three bytes is written as two 12-bit halves: every value in
    each half, beside a different one in the other."""
    data = b"".join(((v << 12) | (v ^ 0xABC)).to_bytes(3, "big") for v in range(4096))
    assert C.encode(data) == binascii.b2a_base64(data, newline=False)


def _outcome(fn, text):
    try:
        return True, fn(text)
    except ValueError as exc:  # binascii.Error, or a str that is not ASCII
        return False, type(exc)


@pytest.mark.compiled_only
def test_odd_text_is_read_or_refused_as_binascii_does():
    assert C is not None, "rmq._fast.b64 is not built (make ext)"
    rnd = random.Random(5)
    alphabet = "ABCab+/=\n -_*019"
    cases = ["QQ==", "QR==", "QUI=", "QUJ=", "QUJD", "Q===", "====", "QUJD\n", "é", "QU=D"]
    cases += ["".join(rnd.choice(alphabet) for _ in range(rnd.randrange(13)))
              for _ in range(50_000)]
    for text in cases:
        assert _outcome(C.decode, text) == _outcome(binascii.a2b_base64, text), text


def test_an_entry_reads_back_its_push_json():
    entry = Entry(3, 2, os.urandom(1201), 4096)
    again = Entry.from_json_obj(Entry.to_json_obj(entry))
    assert again.same(entry) and again.body == entry.body


@pytest.mark.compiled_only
def test_every_byte_in_every_place_of_a_group_is_read_as_binascii_reads_it():
    assert C is not None, "rmq._fast.b64 is not built (make ext)"
    for at in range(8):
        for value in range(256):
            text = bytearray(b"QUJDRUZH")
            text[at] = value
            assert _outcome(C.decode, bytes(text)) == \
                _outcome(binascii.a2b_base64, bytes(text)), (at, value)


@pytest.mark.compiled_only
def test_both_encoder_paths_write_what_binascii_writes():
    """The AVX2 steps (24 bytes each, from 28 bytes on) and the scalar loop
    after them, at every length around a step's edges and from every
    alignment of the input; then the scalar path alone."""
    assert C is not None, "rmq._fast.b64 is not built (make ext)"
    rnd = random.Random(7)
    block = bytes(rnd.randrange(256) for _ in range(4200))
    paths = ["scalar"] + (["avx2"] if C.path() == "avx2" else [])
    try:
        for name in paths:
            assert C.set_path(name) == name
            for n in [*range(130), 1199, 1200, 1201, 1250, 4096]:
                for at in (0, 1, 5, 31):
                    data = block[at:at + n]
                    assert C.encode(data) == binascii.b2a_base64(data, newline=False), (name, n, at)
            every = b"".join(((v << 12) | (v ^ 0xABC)).to_bytes(3, "big") for v in range(4096))
            assert C.encode(every) == binascii.b2a_base64(every, newline=False), name
    finally:
        C.set_path(None)
    with pytest.raises(ValueError):
        C.set_path("neon")


def _paths() -> list[str]:
    return ["scalar"] + (["avx2"] if C.path() == "avx2" else [])


@pytest.mark.compiled_only
def test_both_decoder_paths_read_what_binascii_reads():
    """The AVX2 steps (32 characters each, from 48 characters on, never the
    last group) and the scalar loop after them, at every length around a
    step's edges, from every alignment of the text, with each padding; then
    the scalar path alone."""
    assert C is not None, "rmq._fast.b64 is not built (make ext)"
    rnd = random.Random(11)
    block = bytes(rnd.randrange(256) for _ in range(4200))
    texts = {n: binascii.b2a_base64(block[:n], newline=False) for n in range(300)}
    try:
        for name in _paths():
            assert C.set_path(name) == name
            for n in [*range(300), 1199, 1200, 1201, 1250, 4096]:
                data = block[:n]
                text = texts.get(n) or binascii.b2a_base64(data, newline=False)
                for at in (0, 1, 5, 31):
                    shifted = memoryview(b"x" * at + text)[at:]  # the text at another alignment
                    assert C.decode(shifted) == data, (name, n, at)
                assert C.decode(text.decode()) == data, (name, n)
            every = bytes(range(256)) * 3  # every character of the alphabet in every place of a step
            text = binascii.b2a_base64(every, newline=False)
            for at in range(0, 64, 4):
                assert C.decode(text[at:]) == binascii.a2b_base64(text[at:]), (name, at)
    finally:
        C.set_path(None)


@pytest.mark.compiled_only
def test_every_byte_in_every_place_of_a_step_is_read_or_refused_as_binascii_does():
    """A byte outside the alphabet anywhere within the AVX2 steps, the
    scalar groups after them or the last group: the same bytes or the same
    refusal as binascii (the decoder hands odd text to binascii), on either
    path."""
    assert C is not None, "rmq._fast.b64 is not built (make ext)"
    text = binascii.b2a_base64(bytes(range(60)), newline=False)  # 80 characters: 1 step, 12 groups
    try:
        for name in _paths():
            C.set_path(name)
            for at in range(len(text)):
                for value in range(256):
                    odd = bytearray(text)
                    odd[at] = value
                    odd = bytes(odd)
                    assert _outcome(C.decode, odd) == _outcome(binascii.a2b_base64, odd), \
                        (name, at, value)
    finally:
        C.set_path(None)
