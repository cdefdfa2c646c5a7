"""The client's pull-body decoder: Java's property-string semantics, hosts and
ids, errors on truncated or corrupt bodies, and field-for-field agreement
between the compiled decoder (rmq._fast.client_codec) and its twin."""

from __future__ import annotations

import socket
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq._fast import compiled_or_none
from rmq.client import codec
from rmq.client.exceptions import MessageDecodeError
from rmq.client.message import Message, MessageExt
from rmq.store.message_codec import _record_size, _write_record

TWIN = codec._decode_messages
FAST = compiled_or_none("client_codec")
SLOTS = ("topic", "body", "flag", "properties") + MessageExt.__slots__

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
# pieces of property strings: separators, ASCII, multi-byte and broken UTF-8
prop_pieces = st.sampled_from([b"\x01", b"\x02", b"a", b"KEYS", b"UNIQ_KEY", b"TAGS", b"7",
                               b"\xc3\xa9", b"\xe2\x82", b"\xff", b" "])
prop_bytes = st.one_of(st.lists(prop_pieces, max_size=30).map(b"".join),
                       st.binary(max_size=40))


def java_string2properties(text: str) -> dict[str, str]:
    """MessageDecoder.string2messageProperties transcribed index by index."""
    out: dict[str, str] = {}
    index, n = 0, len(text)
    while index < n:
        new_index = text.find("\x02", index)
        if new_index < 0:
            new_index = n
        if new_index - index >= 3:
            kv = text.find("\x01", index)
            if index < kv < new_index - 1:
                out[text[index:kv]] = text[kv + 1:new_index]
        index = new_index + 1
    return out


def host_field(v6: bool, ip: bytes, port: int) -> bytes:
    return (ip[:16] if v6 else ip[:4]) + struct.pack(">i", port)


def record(*, queue_id=1, flag=0, queue_offset=0, phy=0, sys_flag=0, born_ts=1,
           born=b"\x7f\0\0\x01\0\0\x04\xd2", store_ts=2, store=b"\x7f\0\0\x01\0\0\x2a\x9f",
           reconsume=0, prepared=0, body=b"", topic=b"T", props=b"") -> bytes:
    """One stored record, raw fields as given (the v6 bits follow the host lengths)."""
    sys_flag = (sys_flag & ~0x30) | (0x10 if len(born) == 20 else 0) | \
        (0x20 if len(store) == 20 else 0)
    out = bytearray(_record_size(sys_flag, len(body), len(topic), len(props)))
    _write_record(out, 0, queue_id, flag, queue_offset, phy, sys_flag, born_ts, born, store_ts,
                  store, reconsume, prepared, body, topic, props)
    return bytes(out)


@st.composite
def records(draw) -> bytes:
    compressed = draw(st.booleans())
    payload = draw(st.binary(max_size=300))
    sys_flag = draw(st.integers(0, 0xFFFF)) & ~0x701
    if compressed:
        body = zlib.compress(payload, draw(st.integers(0, 9)))
        sys_flag |= 1 | draw(st.sampled_from([0, 0x300, 0x100]))
    else:
        body = payload
    topic = draw(st.one_of(st.text(min_size=1, max_size=20).map(str.encode),
                           st.binary(min_size=1, max_size=20)))
    v6b, v6s = draw(st.booleans()), draw(st.booleans())
    return record(queue_id=draw(int32), flag=draw(int32), queue_offset=draw(int64),
                  phy=draw(int64), sys_flag=sys_flag, born_ts=draw(int64),
                  born=host_field(v6b, draw(st.binary(min_size=16, max_size=16)), draw(int32)),
                  store_ts=draw(int64),
                  store=host_field(v6s, draw(st.binary(min_size=16, max_size=16)), draw(int32)),
                  reconsume=draw(int32), prepared=draw(int64), body=body, topic=topic,
                  props=draw(prop_bytes))


def fields(msgs: list[MessageExt]) -> list[tuple]:
    return [tuple(getattr(m, s) for s in SLOTS) for m in msgs]


def outcome(decode, body: bytes, *args, **kw):
    """Fields of every message, or the error's type and text."""
    try:
        return fields(decode(body, *args, **kw))
    except MessageDecodeError as e:
        return ("error", str(e))


def test_decoder_in_use_is_the_compiled_one_when_built():
    expected = FAST.decode_messages if codec._c is not None else TWIN
    assert codec.decode_messages is expected


@pytest.mark.compiled_only
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records(), min_size=1, max_size=4), st.text(max_size=10),
       st.one_of(st.none(), int64), st.one_of(st.none(), int64), st.booleans())
def test_compiled_matches_twin_on_random_records(recs, broker, mn, mx, crc):
    assert FAST is not None, "rmq._fast.client_codec is not built (make ext)"
    body = b"".join(recs)
    assert outcome(FAST.decode_messages, body, broker, mn, mx, crc) == \
        outcome(TWIN, body, broker, mn, mx, crc)


# properties that repeat from record to record with some values changing, as
# a batch's do (the compiled decoder copies an earlier record's dict for them):
# the same keys in the same order, a changed value, a changed order, a
# duplicate key, a segment without a value, MIN_OFFSET as a property
_KEYS = ["UNIQ_KEY", "WAIT", "TAGS", "KEYS", "MIN_OFFSET"]
_VALUES = ["true", "A", "x" * 25, "y" * 25, "é", "", "7"]


@st.composite
def _similar_props(draw) -> bytes:
    keys = draw(st.lists(st.sampled_from(_KEYS), min_size=1, max_size=4))
    segs = [f"{k}\x01{draw(st.sampled_from(_VALUES))}" for k in keys]
    text = "\x02".join(segs)
    if draw(st.integers(0, 4)) == 0:
        text += "\x02"
    return text.encode()


@pytest.mark.compiled_only
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_similar_props(), min_size=1, max_size=3), st.lists(st.integers(0, 2),
       min_size=1, max_size=12), st.one_of(st.none(), int64), st.one_of(st.none(), int64))
def test_compiled_matches_twin_on_repeating_properties(shapes, picks, mn, mx):
    assert FAST is not None, "rmq._fast.client_codec is not built (make ext)"
    body = b"".join(record(queue_offset=i, props=shapes[k % len(shapes)])
                    for i, k in enumerate(picks))
    assert outcome(FAST.decode_messages, body, "b", mn, mx) == \
        outcome(TWIN, body, "b", mn, mx)
    assert [list(m.properties.items()) for m in FAST.decode_messages(body, "b", mn, mx)] == \
        [list(m.properties.items()) for m in TWIN(body, "b", mn, mx)]


@pytest.mark.compiled_only
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records(), min_size=1, max_size=3), st.data())
def test_compiled_matches_twin_on_truncated_and_corrupt_bodies(recs, data):
    assert FAST is not None, "rmq._fast.client_codec is not built (make ext)"
    body = bytearray(b"".join(recs))
    cut = data.draw(st.integers(0, len(body)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(body) - 1), st.integers(0, 255)),
                               max_size=3))
    for at, value in flips:
        body[at] = value
    for variant in (bytes(body[:cut]), bytes(body)):
        for crc in (False, True):
            assert outcome(FAST.decode_messages, variant, "b", None, None, crc) == \
                outcome(TWIN, variant, "b", None, None, crc)


@settings(max_examples=300)
@given(prop_bytes)
def test_properties_follow_java_string2properties(raw):
    rec = record(props=raw)
    want = java_string2properties(raw.decode("utf-8", "replace"))
    assert codec.decode_messages(rec)[0].properties == want
    assert TWIN(rec)[0].properties == want


def test_odd_separators():
    raw = b"\x01x\x02a\x01\x02b\x011\x01\x01\x02\x02c\x012\x02a\x013\x02noval\x02d\x01"
    want = {"b": "1\x01\x01", "c": "2", "a": "3"}
    for decode in (codec.decode_messages, TWIN):
        props = decode(record(props=raw))[0].properties
        assert props == want and list(props) == list(want)


def test_hosts_ids_and_offsets():
    v6 = socket.inet_pton(socket.AF_INET6, "2001:db8::1")
    rec = record(born=v6 + struct.pack(">i", 40000), store=b"\xc0\xa8\x00\x01" + struct.pack(
        ">i", 10911), phy=4096, props=b"TAGS\x01A")
    for decode in (codec.decode_messages, TWIN):
        m = decode(rec, "broker-a", 3, 9)[0]
        assert m.born_host == "2001:db8::1:40000" and m.store_host == "192.168.0.1:10911"
        assert m.offset_msg_id == m.msg_id == "C0A8000100002A9F0000000000001000"
        assert m.properties == {"TAGS": "A", "MIN_OFFSET": "3", "MAX_OFFSET": "9"}
        assert m.sys_flag & 0x10 and m.broker_name == "broker-a"
        with_uniq = decode(record(props=b"UNIQ_KEY\x01ABC"))[0]
        assert with_uniq.msg_id == "ABC" and with_uniq.offset_msg_id != "ABC"


def test_compressed_bodies_and_unsupported_compression():
    payload = b"y" * 5000
    for decode in (codec.decode_messages, TWIN):
        assert decode(record(body=zlib.compress(payload), sys_flag=0x301))[0].body == payload
        with pytest.raises(MessageDecodeError, match="unsupported compression"):
            decode(record(body=zlib.compress(payload), sys_flag=0x201))
        with pytest.raises(MessageDecodeError, match="corrupt compressed body"):
            decode(record(body=b"not zlib", sys_flag=1))


def test_crc_checked_only_when_asked():
    body = b"hello"
    good = bytearray(record(body=body))
    struct.pack_into(">i", good, 8, zlib.crc32(body) & 0x7FFFFFFF)
    bad = bytearray(good)
    struct.pack_into(">i", bad, 8, 12345)
    for decode in (codec.decode_messages, TWIN):
        assert decode(bytes(good), check_crc=True)[0].body == body
        assert decode(bytes(bad))[0].body_crc == 12345
        with pytest.raises(MessageDecodeError, match="CRC"):
            decode(bytes(bad), check_crc=True)


def test_every_truncation_is_a_clean_error():
    rec = record(body=b"abc", props=b"TAGS\x01A")
    for decode in (codec.decode_messages, TWIN):
        assert decode(b"") == []
        for cut in range(1, len(rec)):
            with pytest.raises(MessageDecodeError, match="bad message record"):
                decode(rec + rec[:cut])


# ---- SEND_BATCH_MESSAGE bodies (encode_batch) -------------------------------------

def _batch_wire(msgs) -> bytes:
    """PROTOCOL.md 5.3 written out field by field, independently of the codec."""
    out = bytearray()
    for m in msgs:
        props = "\x02".join(f"{k}\x01{v}" for k, v in m.properties.items()
                            if v is not None).encode()
        out += struct.pack(">iiiii", 22 + len(m.body) + len(props), 0, 0, m.flag, len(m.body))
        out += bytes(m.body) + struct.pack(">h", len(props)) + props
    return bytes(out)


prop_text = st.text(st.characters(blacklist_characters="\x01\x02",
                                  blacklist_categories=("Cs",)), min_size=1, max_size=12)
batch_messages = st.lists(st.builds(
    lambda body, flag, props: Message("T", body, flag=flag, properties=props),
    st.binary(max_size=64), int32,
    st.dictionaries(prop_text, st.one_of(prop_text, st.none(), st.integers()), max_size=5)),
    min_size=1, max_size=8)


def _encoded(encode, msgs):
    try:
        return encode(msgs)
    except (struct.error, TypeError) as e:
        return ("error", type(e))


def test_batch_encoder_in_use_is_the_compiled_one_when_built():
    expected = FAST.encode_batch if codec._c is not None else codec._encode_batch
    assert codec.encode_batch is expected


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(batch_messages)
def test_batch_twin_matches_the_wire_layout(msgs):
    for m in msgs:  # the reference drops None values and str()s the rest, as Java's toString
        m.properties = {k: (v if v is None else str(v)) for k, v in m.properties.items()}
    assert codec._encode_batch(msgs) == _batch_wire(msgs)


@pytest.mark.compiled_only
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(batch_messages)
def test_batch_compiled_matches_twin(msgs):
    assert _encoded(FAST.encode_batch, msgs) == _encoded(codec._encode_batch, msgs)


@pytest.mark.compiled_only
@pytest.mark.parametrize("flag", [2**31, -(2**31) - 1, "x", 1.5])
def test_batch_bad_flag_is_the_same_error(flag):
    msgs = [Message("T", b"b", flag=0), Message("T", b"b")]
    msgs[1].flag = flag
    assert _encoded(FAST.encode_batch, msgs) == _encoded(codec._encode_batch, msgs) \
        == ("error", struct.error)


@pytest.mark.compiled_only
def test_batch_oversized_properties_and_other_body_types():
    big = [Message("T", b"b", properties={"k": "v" * 40000})]
    assert _encoded(FAST.encode_batch, big) == _encoded(codec._encode_batch, big) \
        == ("error", struct.error)
    views = [Message("T", bytearray(b"abc")), Message("T", memoryview(b"defg"), flag=-3)]
    assert FAST.encode_batch(views) == codec._encode_batch(views) == _batch_wire(views)
