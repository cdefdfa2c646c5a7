"""The frame/header codec: round trips, garbage, and byte-for-byte agreement
between the compiled codec (rmq._fast.remoting_codec) and its twin."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq._fast import compiled_or_none
from rmq.remoting import codec
from rmq.remoting.exceptions import RemotingCommandError

TWIN = (codec.py_encode, codec.py_decode, codec.py_frame_length, codec.py_decode_frames)
FAST = compiled_or_none("remoting_codec")

int16 = st.integers(-32768, 32767)
int32 = st.integers(-(2**31), 2**31 - 1)
texts = st.text(max_size=40)
ext_maps = st.one_of(st.none(), st.dictionaries(texts, texts, max_size=8))
bodies = st.one_of(st.none(), st.binary(min_size=1, max_size=300))
commands = st.tuples(int16, st.integers(0, 12), int16, int32, int32,
                     st.one_of(st.none(), texts), ext_maps, st.sampled_from([0, 1]), bodies)


def frame_of(encode, cmd) -> bytes:
    code, lang, ver, opaque, flag, remark, ext, stype, body = cmd
    head = encode(code, lang, ver, opaque, flag, remark, ext, stype, len(body or b""))
    return head + (body or b"")


def expected_after_round_trip(cmd):
    """What decoding gives back: ROCKETMQ drops empty remark/keys/values."""
    code, lang, ver, opaque, flag, remark, ext, stype, body = cmd
    if stype == 1:
        remark = remark or None
        ext = {k: v for k, v in ext.items() if k and v} if ext else None
    return code, lang, ver, opaque, flag, remark, ext, stype


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(commands)
def test_twin_round_trip(cmd):
    frame = frame_of(codec.py_encode, cmd)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    fields = codec.py_decode(frame[4:])
    assert fields[:8] == expected_after_round_trip(cmd)
    assert frame[4 + fields[8]:] == (cmd[8] or b"")


@pytest.mark.compiled_only
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(commands)
def test_compiled_matches_twin_bytes(cmd):
    assert FAST is not None, "rmq._fast.remoting_codec is not built (make ext)"
    frame = frame_of(codec.py_encode, cmd)
    assert frame_of(FAST.encode, cmd) == frame
    assert FAST.decode(frame[4:]) == codec.py_decode(frame[4:])
    buf = bytearray(frame * 3 + frame[:7])
    assert FAST.decode_frames(buf, 0, len(buf), 1 << 24) == codec.py_decode_frames(
        buf, 0, len(buf), 1 << 24)


def outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except RemotingCommandError:
        return ("error", None)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_random_garbage_is_rejected_cleanly(data):
    frame = struct.pack(">i", len(data)) + data
    kind, _ = outcome(codec.py_decode, data)
    assert kind in ("ok", "error")
    frames, pos, err = codec.py_decode_frames(frame, 0, len(frame), 1 << 24)
    assert err is None or isinstance(err, RemotingCommandError)
    if FAST is not None:
        assert outcome(FAST.decode, data) == outcome(codec.py_decode, data)
        fast = FAST.decode_frames(frame, 0, len(frame), 1 << 24)
        assert fast[:2] == (frames, pos) and type(fast[2]) is type(err)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False)
    | texts, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["code", "language", "version", "opaque", "flag",
                                        "remark", "extFields", "other"]), json_values))
def test_lenient_json_headers_agree(obj):
    import orjson

    raw = orjson.dumps(obj)
    frame = struct.pack(">i", len(raw)) + raw
    twin = outcome(codec.py_decode, frame)
    if FAST is not None:
        assert outcome(FAST.decode, frame) == twin


@pytest.mark.parametrize("impl", ["twin", "fast"])
def test_frame_length_limits(impl):
    fn = codec.py_frame_length if impl == "twin" else (FAST.frame_length if FAST else None)
    if fn is None:
        fn = codec.py_frame_length
    buf = struct.pack(">i", 10) + bytes(6)
    assert fn(buf, 0, len(buf), 100) == -1
    assert fn(buf + bytes(4), 0, len(buf) + 4, 100) == 10
    assert fn(buf, 0, 3, 100) == -1
    for bad in (struct.pack(">i", 3), struct.pack(">i", 101), struct.pack(">i", -1)):
        with pytest.raises(RemotingCommandError):
            fn(bad + bytes(8), 0, 12, 100)


HEADER = (b'{"code":310,"extFields":{"a":"PG","d":4,"k":false,"i":"U\\u0001V\\n\\"\xc3\xa9",'
          b'"x":null},"flag":0,"language":"CPP","opaque":7,"remark":"","version":63}\n')


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(HEADER)), st.binary(max_size=3)), max_size=3),
       st.integers(0, 3))
def test_mutated_json_headers_agree(edits, cut):
    """Byte-level damage to a realistic header: compiled and twin agree on
    every outcome (decoded values, or a RemotingCommandError)."""
    raw = bytearray(HEADER)
    for at, data in edits:
        raw[at:at + cut] = data
    frame = struct.pack(">i", len(raw)) + bytes(raw)
    twin = outcome(codec.py_decode, frame)
    if FAST is not None:
        assert outcome(FAST.decode, frame) == twin


def test_realistic_json_header_decodes():
    frame = struct.pack(">i", len(HEADER)) + HEADER
    code, lang, ver, opaque, flag, remark, ext, stype, off = codec.py_decode(frame)
    assert (code, lang, ver, opaque, flag, remark, stype) == (310, 1, 63, 7, 0, "", 0)
    assert ext == {"a": "PG", "d": "4", "k": "false", "i": "U\x01V\n\"é"}
    if FAST is not None:
        assert FAST.decode(frame) == codec.py_decode(frame)


@pytest.mark.compiled_only
@pytest.mark.compiled_only  # asserts the compiled encode is the one selected
def test_compiled_module_imports_first():
    """rmq.remoting imports the compiled codec; importing it first must work too."""
    import subprocess
    import sys

    code = ("import rmq._fast.remoting_codec as c, rmq.remoting.codec as t;"
            "assert t.encode is c.encode")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
