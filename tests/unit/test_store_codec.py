"""Stored-message codec: the worked example of STORE_FORMAT.md 17 and round
trips, for the pure-Python twins and the compiled module byte for byte."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq._fast import compiled_or_none
from rmq.common.message_id import create_message_id, decode_message_id, socket_address_bytes
from rmq.store import message_codec as codec
from rmq.store.message import MessageExt

GOLDEN_HEX = (  # STORE_FORMAT.md 17.2, FULL HEX
    "000000ADDAA320A758932AAC00000000000000000000000000000000000000000000000000000000"
    "0000018BCFE568000A0000010000C3500000018BCFE5687B0A00000200002A9F0000000000000000"
    "000000000000000268690154004F4B455953016B3102554E49515F4B455901304130303030303133"
    "303339313233343536373830303030454136303030303002434C55535445520144656661756C7443"
    "6C757374657202544147530141"
)
GOLDEN = bytes.fromhex(GOLDEN_HEX)

C = compiled_or_none("store_codec")


class _Twin:
    record_size = staticmethod(codec._record_size)
    write_record = staticmethod(codec._write_record)
    write_blank = staticmethod(codec._write_blank)
    batch_size = staticmethod(codec._batch_size)
    write_batch = staticmethod(codec._write_batch)
    scan_record = staticmethod(codec._scan_record)


IMPLS = [pytest.param(_Twin, id="twin")]
if C is not None:
    IMPLS.append(pytest.param(C, id="compiled"))


def _golden_props() -> dict[str, str]:
    props = {"KEYS": "k1", "UNIQ_KEY": "0A0000013039123456780000EA600000", "WAIT": "true", "TAGS": "A"}
    props["CLUSTER"] = "DefaultCluster"
    del props["WAIT"]
    return props


def test_java_hashmap_order_of_client_properties():
    props = {"KEYS": "k1", "UNIQ_KEY": "0A0000013039123456780000EA600000", "WAIT": "true", "TAGS": "A"}
    assert codec.message_properties_to_string(props) == (
        "KEYS\x01k1\x02UNIQ_KEY\x010A0000013039123456780000EA600000\x02WAIT\x01true\x02TAGS\x01A"
    )


def test_stored_properties_string_is_79_bytes_in_hashmap_order():
    s = codec.message_properties_to_string(_golden_props())
    assert s == "KEYS\x01k1\x02UNIQ_KEY\x010A0000013039123456780000EA600000\x02CLUSTER\x01DefaultCluster\x02TAGS\x01A"
    assert len(s.encode()) == 79


@pytest.mark.parametrize("impl", IMPLS)
def test_golden_record_bytes(impl):
    props = codec.message_properties_to_string(_golden_props()).encode()
    buf = bytearray(200)
    size = impl.write_record(
        buf, 0, 0, 0, 0, 0, 0, 1700000000000, socket_address_bytes(("10.0.0.1", 50000)),
        1700000000123, socket_address_bytes(("10.0.0.2", 10911)), 0, 0, b"hi", b"T", props,
    )
    assert size == 173 == impl.record_size(0, 2, 1, 79)
    assert bytes(buf[:173]) == GOLDEN


def test_encode_message_matches_golden():
    m = MessageExt(topic="T", body=b"hi", properties=_golden_props(), born_timestamp=1700000000000,
                   born_host=("10.0.0.1", 50000), store_timestamp=1700000000123, store_host=("10.0.0.2", 10911))
    assert codec.encode_message(m) == GOLDEN


def test_decode_golden():
    m = codec.decode_message(GOLDEN, check_crc=True)
    assert m.topic == "T" and m.body == b"hi" and m.body_crc == 1486039724
    assert m.born_host == ("10.0.0.1", 50000) and m.store_host == ("10.0.0.2", 10911)
    assert m.store_timestamp == 1700000000123 and m.store_size == 173
    assert m.msg_id == "0A00000200002A9F0000000000000000"
    assert m.properties["TAGS"] == "A" and m.properties["CLUSTER"] == "DefaultCluster"


@pytest.mark.parametrize("impl", IMPLS)
def test_scan_golden(impl):
    r = impl.scan_record(GOLDEN, 0, len(GOLDEN), True)
    assert r[0] == codec.SCAN_MESSAGE and r[1] == 173 and r[2] == "T"
    assert r[7] == 1700000000123 and r[8] == 65
    assert r[9] == "k1" and r[10] == "0A0000013039123456780000EA600000" and r[11] is None
    assert (r[12], r[13]) == (94, 79)


@pytest.mark.parametrize("impl", IMPLS)
def test_blank_record(impl):
    buf = bytearray(100)
    impl.write_blank(buf, 0, 100)
    assert bytes(buf[:8]).hex().upper() == "00000064CBD43194"
    assert impl.scan_record(buf, 0, 100, True)[:2] == (codec.SCAN_BLANK, 100)


@pytest.mark.parametrize("impl", IMPLS)
def test_scan_detects_crc_size_and_garbage(impl):
    bad = bytearray(GOLDEN)
    bad[88] ^= 1  # body byte
    assert impl.scan_record(bad, 0, len(bad), True)[0] == codec.SCAN_CRC_ERROR
    assert impl.scan_record(bad, 0, len(bad), False)[0] == codec.SCAN_MESSAGE
    bad = bytearray(GOLDEN)
    bad[92:94] = b"\x00\x4e"  # properties length one short
    assert impl.scan_record(bad, 0, len(bad), True)[0] == codec.SCAN_SIZE_MISMATCH
    assert impl.scan_record(bytes(200), 0, 200, True)[0] == codec.SCAN_END
    assert impl.scan_record(GOLDEN, 0, 100, True)[0] == codec.SCAN_END  # truncated
    assert impl.scan_record(GOLDEN, 170, len(GOLDEN), True)[0] == codec.SCAN_END


def test_tags_code_examples():
    from rmq.common.message import tags_string_to_code

    assert tags_string_to_code("TagA") == 2598919
    assert tags_string_to_code("hello world tag") == -687264706


def test_message_ids():
    assert create_message_id(("10.0.0.2", 10911), 0) == "0A00000200002A9F0000000000000000"
    assert decode_message_id("0A00000200002A9F00000000000000AD") == (("10.0.0.2", 10911), 173)
    v6 = create_message_id(("::1", 10911), 5)
    assert len(v6) == 56 and decode_message_id(v6) == (("::1", 10911), 5)
    with pytest.raises(ValueError):
        decode_message_id("ABC")


def test_uniq_key_layout():
    from rmq.common.message_id import MessageClientIDSetter

    gen = MessageClientIDSetter(ip=bytes([10, 0, 0, 1]), pid=0x13039)
    a = gen.create_uniq_id(gen.month_start_ms() + 60000)
    assert len(a) == 32 and a.startswith("0A0000013039") and a[20:28] == "0000EA60"
    b = gen.create_uniq_id(gen.month_start_ms() + 60000)
    assert int(b[28:], 16) == (int(a[28:], 16) + 1) & 0xFFFF


def _wire_batch(items: list[tuple[int, bytes, bytes]]) -> bytes:
    out = bytearray()
    for flag, body, props in items:
        size = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props)
        out += size.to_bytes(4, "big") + bytes(8) + flag.to_bytes(4, "big", signed=True)
        out += len(body).to_bytes(4, "big") + body + len(props).to_bytes(2, "big") + props
    return bytes(out)


props_st = st.dictionaries(
    st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=8),
    st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=20),
    max_size=6,
)
hosts = st.sampled_from([("10.1.2.3", 1), ("127.0.0.1", 65535), ("fe80::1", 10911), ("2001:db8::7", 9)])


@settings(max_examples=150, deadline=None)
@given(
    body=st.binary(max_size=300), topic=st.text(st.sampled_from("abcXYZ%|-_09"), min_size=1, max_size=127),
    props=props_st, qid=st.integers(0, 2**31 - 1), flag=st.integers(-(2**31), 2**31 - 1),
    qoff=st.integers(0, 2**62), born=hosts, store=hosts, rt=st.integers(0, 100),
)
def test_round_trip_both_implementations(body, topic, props, qid, flag, qoff, born, store, rt):
    m = MessageExt(topic=topic, flag=flag, properties=props, body=body, queue_id=qid, queue_offset=qoff,
                   commit_log_offset=qoff // 3, born_timestamp=1700000000000, born_host=born,
                   store_timestamp=1700000000999, store_host=store, reconsume_times=rt)
    raw = codec.encode_message(m)
    back = codec.decode_message(raw, check_crc=True)
    assert (back.topic, back.body, back.properties, back.queue_id, back.flag) == (topic, body, props, qid, flag)
    assert (back.born_host, back.store_host, back.queue_offset, back.reconsume_times) == (born, store, qoff, rt)
    assert back.body_crc == zlib.crc32(body) & 0x7FFFFFFF
    if C is not None:
        sys_flag = back.sys_flag
        pb = codec.message_properties_to_string(props).encode()
        buf_c = bytearray(len(raw) + 10)
        n = C.write_record(buf_c, 5, qid, flag, qoff, qoff // 3, sys_flag, 1700000000000,
                           socket_address_bytes(born), 1700000000999, socket_address_bytes(store), rt, 0,
                           body, topic.encode(), pb)
        assert n == len(raw) and bytes(buf_c[5 : 5 + n]) == raw
        assert C.scan_record(raw, 0, len(raw), True) == codec._scan_record(raw, 0, len(raw), True)


@settings(max_examples=80, deadline=None)
@given(
    items=st.lists(st.tuples(st.integers(-5, 5), st.binary(max_size=64), props_st), min_size=1, max_size=8),
    batch_props=props_st,
)
def test_batch_encoding_both_implementations(items, batch_props):
    wire = _wire_batch([(f, b, codec.message_properties_to_string(p).encode()) for f, b, p in items])
    bp = codec.message_properties_to_string(batch_props).encode()
    host = socket_address_bytes(("10.0.0.1", 5))
    total, count = codec._batch_size(wire, 0, 3, len(bp))
    assert count == len(items)
    outs = []
    for impl in [i.values[0] for i in IMPLS]:
        assert impl.batch_size(wire, 0, 3, len(bp)) == (total, count)
        buf = bytearray(total)
        sizes = codec.new_sizes_array(count)
        n = impl.write_batch(buf, 0, wire, 2, 0, 1700000000000, host, 1700000000001, host, 0, b"Top", bp,
                             10, 1000, sizes)
        assert n == total and sum(sizes) == total
        outs.append(bytes(buf))
    assert all(o == outs[0] for o in outs)
    msgs = codec.decode_messages(outs[0])
    assert [m.queue_offset for m in msgs] == list(range(10, 10 + count))
    assert msgs[0].commit_log_offset == 1000
    for m, (flag, body, p) in zip(msgs, items, strict=True):
        expect = dict(p)
        expect.update(batch_props)
        assert m.flag == flag and m.body == body and m.properties == expect and m.topic == "Top"


@pytest.mark.parametrize("impl", IMPLS)
def test_malformed_batch_rejected(impl):
    good = _wire_batch([(0, b"abc", b"")])
    for bad in (good[:-1], good[:10], b"\xff" * 30, good + b"\x00"):
        with pytest.raises(ValueError):
            impl.batch_size(bad, 0, 3, 0)


@pytest.mark.parametrize("impl", IMPLS)
def test_write_out_of_bounds_is_an_error(impl):
    host = socket_address_bytes(("10.0.0.1", 5))
    with pytest.raises(ValueError):
        impl.write_record(bytearray(100), 0, 0, 0, 0, 0, 0, 0, host, 0, host, 0, 0, b"x" * 20, b"T", b"")
    with pytest.raises(ValueError):
        impl.write_blank(bytearray(4), 0, 4)


def test_decode_rejects_garbage():
    for bad in (b"", GOLDEN[:50], bytes(200)):
        with pytest.raises(ValueError):
            codec.decode_message(bad)


def test_property_parsing_rules():
    assert codec.string_to_message_properties("a\x01b\x02\x01x\x02c\x01\x02d\x01e\x01f\x02a\x01z") == {
        "a": "z", "d": "e\x01f"}


_PROP_TEXT = st.lists(st.sampled_from(["a", "b", "\x01", "\x02", "é", "KEYS", "x" * 40, "\x00"]),
                      max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(_PROP_TEXT, st.sampled_from(["str", "bytes", "memoryview", "bytearray"]))
def test_property_parsing_twin_equals_compiled(text, kind):
    arg = text if kind == "str" else {"bytes": bytes, "bytearray": bytearray,
                                      "memoryview": lambda b: memoryview(b)}[kind](text.encode())
    want = codec._string_to_message_properties(arg)
    assert want == codec._string_to_message_properties(text)
    if C is not None:
        got = C.string_to_message_properties(arg)
        assert got == want and list(got) == list(want)  # same pairs, same insertion order
    assert codec.string_to_message_properties(None) == {} == codec.string_to_message_properties(b"")
