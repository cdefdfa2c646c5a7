"""The hand-written JSON header writer and reader of the compiled codec
against the twin (orjson): the same bytes, values or errors for every input,
including the forms the compiled codec hands over to orjson."""

from __future__ import annotations

import enum
import struct

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq._fast import compiled_or_none
from rmq.remoting import codec
from rmq.remoting.exceptions import RemotingCommandError

FAST = compiled_or_none("remoting_codec")
pytestmark = pytest.mark.compiled_only

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# every code point, lone surrogates included
any_text = st.text(st.characters(blacklist_categories=()), max_size=24)
plain_text = st.text(max_size=24)
edge_ints = st.sampled_from([0, 1, -1, 7, 12, 13, 409, INT32_MIN, INT32_MAX, INT32_MIN - 1,
                             INT32_MAX + 1, 2**63, -(2**63) - 1, 10**18, 10**19])


def outcome(fn, *args):
    """The value, or the error's type and message (what must match)."""
    try:
        return ("ok", fn(*args))
    except (RemotingCommandError, TypeError, ValueError) as e:
        return ("error", type(e), str(e))


def both(fn_name, *args):
    twin = outcome(getattr(codec, "py_" + fn_name), *args)
    assert FAST is not None, "rmq._fast.remoting_codec is not built (make ext)"
    assert outcome(getattr(FAST, fn_name), *args) == twin
    if fn_name == "decode" and twin[0] == "error":
        assert twin[1] is RemotingCommandError, twin
    return twin


# ---------------------------------------------------------------------------
# writer


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.tuples(st.integers(INT32_MIN, INT32_MAX) | edge_ints, st.integers(-3, 20) | edge_ints,
                 st.integers(INT32_MIN, INT32_MAX) | edge_ints,
                 st.integers(INT32_MIN, INT32_MAX) | edge_ints,
                 st.integers(INT32_MIN, INT32_MAX) | edge_ints,
                 st.none() | any_text, st.none() | st.dictionaries(any_text, any_text, max_size=6),
                 st.integers(0, 2**31)))
def test_writer_matches_twin_for_any_text(args):
    """Lone surrogates anywhere, control characters, quotes, backslashes,
    non-ASCII; int32 bounds and beyond; a body length past the frame limit."""
    code, lang, ver, opaque, flag, remark, ext, body_len = args
    both("encode", code, lang, ver, opaque, flag, remark, ext, 0, body_len)


class Lang(enum.IntEnum):
    CPP = 1


class Text(str):
    pass


class Map(dict):
    pass


odd_values = st.sampled_from([None, True, False, 0, -5, 2**70, 1.5, float("inf"), Text("t"),
                              [1, "x"], {"n": None}, b"raw", Lang.CPP])
odd_scalars = st.sampled_from([True, False, 1.0, 310.0, Lang.CPP, Text("x"), None, "7", b"1"])


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 5), odd_scalars), max_size=3),
       st.dictionaries(plain_text | st.sampled_from([1, Text("k"), None]),
                       plain_text | odd_values, max_size=5),
       st.sampled_from([dict, Map, None]))
def test_writer_matches_twin_for_odd_types(swaps, ext, ext_type):
    """bool / float / IntEnum / str-subclass arguments, non-str keys and values,
    dict subclasses: whatever the twin writes or raises, the compiled one too."""
    args = [310, 0, 409, 123456, 0, "r", None]
    for at, value in swaps:
        args[at] = value
    if ext_type is not None:
        args[6] = ext_type(ext)
    both("encode", *args, 0, 0)


def test_writer_bytes_for_a_known_header():
    ext = {"a": "g\"\\/\x00\x01\x1f\x7f\u2028é\U0001f600", "": "", "k\n": "v\t"}
    head = FAST.encode(310, 1, 409, -7, 2, "rem\bark\x0c\r", ext, 0, 5)
    assert head == codec.py_encode(310, 1, 409, -7, 2, "rem\bark\x0c\r", ext, 0, 5)
    assert head[8:] == orjson.dumps({
        "code": 310, "extFields": ext, "flag": 2, "language": "CPP", "opaque": -7,
        "remark": "rem\bark\x0c\r", "serializeTypeCurrentRPC": "JSON", "version": 409})
    assert b'\\u0000\\u0001\\u001f\x7f' in head and b"\\b" in head and b"\\f" in head


@pytest.mark.parametrize("size", [40, 70_000, 400_000])
def test_writer_large_headers(size):
    """Many entries and headers past the kept buffer size, then a small one."""
    ext = {f"k{i}": "v\x01" * (size // 400) for i in range(200)}
    both("encode", 105, 0, 409, 1, 0, None, ext, 0, 0)
    both("encode", 105, 0, 409, 1, 0, "x" * size, None, 0, 0)
    both("encode", 105, 0, 409, 1, 0, None, {"a": "b"}, 0, 0)


# ---------------------------------------------------------------------------
# writer fast paths: short texts as sixteen-byte blocks, extFields entries
# read in place, one-digit ints read in place


SPECIALS = ['"', "\\", "\x00", "\x01", "\x08", "\n", "\x1f", "\x7f", "/", "\xe9", "\u2028",
            "\U0001f600", "\ud800"]


def test_writer_texts_of_every_short_length_and_escape_position():
    """Keys, values and remarks of 0..40 characters with one character to
    escape (or non-ASCII) at every position: each side of the block copy of
    short texts (16-character keys, 32-character values) and of the
    sixteen-byte steps and overlapping tail of longer ones."""
    for n in range(41):
        plain = "".join(chr(97 + i % 26) for i in range(n))
        both("encode", 310, 0, 409, 1, 0, plain, {plain: plain, "k": plain}, 0, 0)
        for at in range(n):
            for c in SPECIALS:
                text = plain[:at] + c + plain[at + 1:]
                both("encode", 310, 0, 409, 1, 0, text, {text: "v", "k": text}, 0, 0)


ascii_text = st.text(st.characters(max_codepoint=127), max_size=40)
mixed_text = ascii_text | any_text | st.sampled_from(["", "0", "false", "TBW102"])


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(mixed_text, mixed_text, max_size=40), st.none() | mixed_text,
       st.lists(mixed_text, max_size=8))
def test_writer_many_fields_match_twin(ext, remark, deleted):
    """Up to 40 entries of ASCII, control and non-ASCII texts, empty keys and
    values, with some deleted again (holes in the table)."""
    both("encode", 310, 0, 409, 123456, 0, remark, ext, 0, 0)
    for key in deleted:
        ext.pop(key, None)
    if ext:
        ext.pop(next(iter(ext)))
    both("encode", 310, 0, 409, 123456, 0, remark, ext, 0, 0)


class Holder:
    pass


def test_writer_dict_layouts():
    """Tables the in-place reader takes and those left to PyDict_Next: split
    (an instance's __dict__), holes from deletes, an emptied map, non-str
    and str-subclass keys, re-inserted keys, a large table."""
    obj = Holder()
    obj.a, obj.b, obj.c = "x", "y\x01", "z"
    ext = dict.fromkeys("abcdefghijklmnop", "v")
    for key in "bdfhp":
        del ext[key]
    ext["b"] = "again"
    emptied = {"a": "1"}
    del emptied["a"]
    big = {f"key{i}": f"value{i}" for i in range(3000)}
    for i in range(0, 3000, 7):
        del big[f"key{i}"]
    for value in (vars(obj), ext, emptied, {}, {1: "x", "a": "b"}, {Text("k"): "v"},
                  {"a": "b", Text("k"): "v"}, big):
        both("encode", 105, 0, 409, 1, 0, None, value, 0, 0)


def test_writer_int_arguments_around_one_digit():
    """Values either side of the one-digit (2**30) bound of the in-place int
    read, int subclasses and bools in every numeric place."""
    values = [0, 1, -1, 2**30 - 1, 2**30, -(2**30) + 1, -(2**30), INT32_MAX, INT32_MIN,
              INT32_MAX + 1, INT32_MIN - 1, 2**62, Lang.CPP, True, False, 12, 13, 20]
    for v in values:
        for at in range(5):
            args = [310, 0, 409, 123456, 0]
            args[at] = v
            both("encode", *args, "r", {"a": "b"}, 0, 0)


# ---------------------------------------------------------------------------
# reader: JSON texts written with every freedom JSON allows


WS = st.sampled_from(["", "", "", " ", "\n", "\t", "\r\n ", "  "])


@st.composite
def json_string(draw, text_strategy=any_text):
    """A JSON string for a random text: each character raw, \\u-escaped
    (surrogate pairs for astral ones) or short-escaped, at random; lone
    surrogates can only be written as escapes (giving JSON orjson refuses)."""
    text = draw(text_strategy)
    out = ['"']
    for ch in text:
        cp = ord(ch)
        short = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                 "\b": "\\b", "\f": "\\f", "/": "\\/"}.get(ch)
        mode = draw(st.integers(0, 2))
        if 0xD800 <= cp <= 0xDFFF or (mode == 1 and cp >= 0x20 and ch not in '"\\'):
            if mode == 2 and not 0xD800 <= cp <= 0xDFFF:
                out.append(ch)
            elif cp > 0xFFFF:
                hi, lo = 0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)
                out.append(f"\\u{hi:04x}\\u{lo:04X}")
            else:
                out.append(f"\\u{cp:04x}")
        elif short is not None and mode != 1:
            out.append(short)
        elif cp < 0x20 or ch in '"\\':
            out.append(f"\\u{cp:04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


json_numbers = st.one_of(
    edge_ints.map(str), st.integers(-(10**20), 10**20).map(str),
    st.sampled_from(["-0", "0.0", "1.5", "-2.25", "1e3", "1E+2", "2e-1", "1e400", "0e5",
                     "12345678901234567890.5", "1" * 40]))
json_scalars = st.one_of(json_string(), json_numbers, st.sampled_from(["true", "false", "null"]))


def json_object(members):
    return members.map(lambda items: "{" + ",".join(
        a + k + b + ":" + c + v + d for a, k, b, c, v, d in items) + "}")


def json_any(depth=0):
    if depth >= 3:
        return json_scalars
    inner = st.deferred(lambda: json_any(depth + 1))
    return st.one_of(
        json_scalars,
        st.lists(st.tuples(WS, inner, WS), max_size=3).map(
            lambda items: "[" + ",".join(a + v + b for a, v, b in items) + "]"),
        json_object(st.lists(st.tuples(WS, json_string(plain_text), WS, WS, inner, WS),
                             max_size=3)))


ext_object = json_object(st.lists(st.tuples(WS, json_string(), WS, WS, json_scalars, WS),
                                  max_size=8))
known = {
    "code": json_numbers | st.sampled_from(['"12"', "null", "true", "[]"]),
    "flag": json_numbers | st.sampled_from(["null", '"x"']),
    "opaque": json_numbers,
    "version": json_numbers,
    "language": st.sampled_from(['"JAVA"', '"CPP"', '"RUST"', '"NOPE"', '"C\\u0050P"', "3",
                                 "13", "-1", "null", "true", "1.0", '"JAV\xc3\xa1"']),
    "remark": json_scalars | st.sampled_from(["[1]", "{}"]),
    "extFields": ext_object | st.sampled_from(["null", "[]", "3", '"x"']),
    "serializeTypeCurrentRPC": st.sampled_from(['"JSON"', '"ROCKETMQ"']),
}
members = st.lists(st.one_of(
    *[st.tuples(WS, st.just(f'"{name}"'), WS, WS, values, WS) for name, values in known.items()],
    st.tuples(WS, json_string(plain_text), WS, WS, json_any(), WS),
    st.tuples(WS, st.sampled_from(['"c\\u006fde"', '"\\u0065xtFields"']), WS, WS,
              json_scalars, WS)), max_size=10)


def frame_of(text: str | bytes) -> bytes:
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return struct.pack(">i", len(raw)) + raw


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(json_object(members), WS, WS)
def test_reader_matches_twin(obj, lead, trail):
    """Any key order, duplicates, whitespace, unknown keys with nested values,
    escapes, numbers at and past the int32 bounds, wrong value types."""
    both("decode", frame_of(lead + obj + trail))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(json_object(members))
def test_reader_truncated_and_trailing(obj):
    raw = obj.encode("utf-8", "surrogatepass")
    for cut in sorted({0, 1, len(raw) // 2, len(raw) - 1}):
        both("decode", frame_of(raw[:cut]))
    for extra in (b"}", b",", b"x", b"\x00", b" {}", b"\xef\xbb\xbf"):
        both("decode", frame_of(raw + extra))
        both("decode", frame_of(extra + raw))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(any_text, any_text, max_size=6), st.none() | any_text)
def test_round_trip_any_text(ext, remark):
    """What the twin writes (when it can), both read back to the same values."""
    got = both("encode", 11, 1, 63, 9, 0, remark, ext, 0, 0)
    if got[0] == "ok":
        frame = got[1][4:]
        assert both("decode", frame) == ("ok", (11, 1, 63, 9, 0, remark, ext, 0, len(frame)))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=12), st.integers(0, 200), st.booleans())
def test_reader_raw_bytes_in_strings(junk, at, in_key):
    """Invalid UTF-8 (overlong, surrogates, past U+10FFFF, cut sequences) and
    raw control bytes inside keys, values and ignored strings."""
    base = b'{"code":1,"extFields":{"k":"v","%s":"%s"},"x":["%s"],"remark":"%s"}'
    parts = [b"k", b"v", b"s", b"r"]
    parts[at % 4] = junk
    raw = base % tuple(parts)
    both("decode", frame_of(raw))


def test_reader_specific_forms():
    cases = [
        b'{"extFields":{"a":"1","a":null}}', b'{"extFields":{"a":null,"b":"2","a":"3"}}',
        b'{"extFields":{"d":4,"k":false,"t":true,"n":-12,"z":0}}',
        b'{"extFields":{"f":1.5}}', b'{"extFields":{"e":1e2}}', b'{"extFields":{"m":-0}}',
        b'{"extFields":{"o":{}}}', b'{"extFields":{"l":[]}}', b'{"extFields":{}}',
        b'{"extFields":{"a":"1"},"extFields":null}', b'{"extFields":{,}}', b'{"a":1,}',
        b'{"code":2147483647,"flag":-2147483648}', b'{"code":2147483648}',
        b'{"opaque":-2147483649}', b'{"code":01}', b'{"code":"12"}', b'{"code":1.0}',
        b'{"language":13}', b'{"language":-1}', b'{"language":99999999999999999999}',
        b'{"remark":5}', b'{"remark":false}', b'{"remark":[1,{"a":null}]}', b'{"remark":null}',
        b'{"x":"\\ud83d\\ude00","extFields":{"\\ud83d\\ude00":"\\u00e9\\u20ac"}}',
        b'{"extFields":{"a":"\\ud83d"}}', b'{"extFields":{"a":"\\ude00"}}',
        b'{"extFields":{"a":"\\ud83d\\u0041"}}', b'{"extFields":{"a":"\\x41"}}',
        b'{"extFields":{"a":"\\u00"}}', b'{"extFields":{"a":"\\u00G0"}}',
        b'{"x":' + b"[" * 70 + b"]" * 70 + b"}", b'{"x":' + b"[" * 63 + b"]" * 63 + b"}",
        b'{"x":{"y":{"z":[1,2.5,-0.125,true,null,"s"]}}}', b'{"x":[1,]}', b'{"x":[01]}',
        b"{}", b" {} ", b"[]", b'""', b"", b"{", b'{"code"', b'{"code":', b'{"code":1',
        b'{"code":1}x', b"\xef\xbb\xbf{}", b'{"code":1}\n', b"\x0c{}",
        b'{"extFields":{"i":"UNIQ_KEY\\u00017F\\u0002WAIT\\u0001true"},"code":310}',
    ]
    # the canonical order (Java, this codec, the C++ client) and near misses
    canon = (b'{"code":310,"extFields":{"a":"g","d":4},"flag":2,"language":"CPP","opaque":-7,'
             b'"remark":"r\\n\xc3\xa9","serializeTypeCurrentRPC":"JSON","version":409}')
    cases += [canon, canon + b"\n", canon + b" x", canon.replace(b'"JSON"', b'"ROCKETMQ"'),
              canon.replace(b',"serializeTypeCurrentRPC":"JSON"', b""),
              canon.replace(b'"remark":"r\\n\xc3\xa9"', b'"remark":5'),
              canon.replace(b'"remark":"r\\n\xc3\xa9"', b'"remark":null'),
              canon.replace(b'"remark":"r\\n\xc3\xa9"', b'"remark":"\xed\xa0\x80"'),
              canon.replace(b'"CPP"', b'"C\\u0050P"'), canon.replace(b'"CPP"', b'"\xc3\xa9"'),
              canon.replace(b'"CPP"', b"1"), canon.replace(b"409", b"2147483648"),
              canon.replace(b"310", b"0310"), canon.replace(b"-7", b"-0"),
              canon.replace(b'{"a":"g","d":4}', b"null"), canon.replace(b'{"a":"g","d":4}', b"{}"),
              canon.replace(b'{"a":"g","d":4}', b'{"a":1.5}'), canon.replace(b'"flag":2', b'"flag":2.0'),
              canon.replace(b',"version":409}', b',"version":409,"code":1}'),
              canon.replace(b'"extFields"', b'"extFields" ')]
    for raw in cases:
        both("decode", frame_of(raw))


def test_reader_many_entries_and_long_strings():
    ext = {f"key{i}": ("v" * (i % 50)) + "\x01é" * (i % 3) for i in range(300)}
    raw = orjson.dumps({"code": 1, "extFields": ext})
    assert both("decode", frame_of(raw))[1][6] == ext
    long_ext = {"s" * 5000: "t\n" * 5000, "u": "é" * 3000}
    assert both("decode", frame_of(orjson.dumps({"extFields": long_ext})))[1][6] == long_ext


def test_reader_shared_texts_stay_right():
    """Short texts come from a cache: thousands of distinct ones (colliding
    slots) still decode to exactly their own value."""
    for i in range(5000):
        value = f"v{i * 7919 % 100003}"
        raw = b'{"extFields":{"%s":"%s","n":%d}}' % (value[::-1].encode(), value.encode(), i)
        fields = FAST.decode(frame_of(raw))[6]
        assert fields == {value[::-1]: value, "n": str(i)}


shape_keys = st.sampled_from([("a", "b", "c"), ("a", "c", "b"), ("a", "b", "d"), ("b", "a", "c"),
                              ("a", "b"), ("topic", "queueId", "x" * 40), ("a", "b", "c", "a"),
                              ("a", "\\u0062", "c"), ("é", "b", "c"), ("é", "\\u00e9", "c")])
shape_values = st.sampled_from(['"v"', '"w"', '"0"', "0", "7", "true", '"true"', "null",
                                r'"\u0001x"', '"' + "y" * 40 + '"', r'"\u00e9"', '"é"', r'"\u0076"',
                                '"\u0001x"'])


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(shape_keys, st.lists(shape_values, min_size=4, max_size=4)),
                min_size=1, max_size=12))
def test_reader_maps_of_recurring_shapes(headers):
    """Maps of the same keys again and again (the reader copies a private
    template of each shape): values, order and independence from earlier
    results (mutated here) all as if each were read alone."""
    for keys, values in headers:
        raw = "{" + ",".join(f'"{k}":{v}' for k, v in zip(keys, values, strict=False)) + "}"
        frame = frame_of('{"code":1,"extFields":' + raw + "}")
        got = both("decode", frame)
        if got[0] == "ok":
            ext = got[1][6]
            assert list(ext) == list(codec.py_decode(frame)[6])
            ext["mutated"] = "yes"
            ext.pop(keys[0], None)
    for keys, values in headers:
        raw = "{" + ",".join(f'"{k}":{v}' for k, v in zip(keys, values, strict=False)) + "}"
        both("decode", frame_of('{"extFields":' + raw + "}"))


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(json_object(members), min_size=1, max_size=4), st.binary(max_size=3))
def test_decode_frames_matches_twin(objs, body):
    buf = bytearray()
    for obj in objs:
        raw = obj.encode("utf-8", "surrogatepass")
        buf += struct.pack(">ii", 4 + len(raw) + len(body), len(raw)) + raw + body
    fast = FAST.decode_frames(buf, 0, len(buf), 1 << 24)
    twin = codec.py_decode_frames(buf, 0, len(buf), 1 << 24)
    assert fast[:2] == twin[:2]
    assert (type(fast[2]), str(fast[2])) == (type(twin[2]), str(twin[2]))
