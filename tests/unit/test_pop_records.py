"""The POP records as 5.3.3 writes them, and the order-info state."""

import pytest

from rmq.broker.pop_order import OrderInfoManager
from rmq.broker.pop_records import (
    AckMsg,
    ExtraInfo,
    PopCheckPoint,
    normal_topic,
    real_topic,
    retry_flag,
)
from rmq.broker.processor.ack import bitset_offsets
from rmq.client.pop import parse_pop_response
from rmq.common import fastjson
from rmq.remoting import RemotingCommand


def test_checkpoint_json_names_and_order():
    ck = PopCheckPoint("T", "g", 2, 10, 1000, 500, [0, 2], "broker-a")
    assert ck.encode() == (b'{"bm":0,"bn":"broker-a","c":"g","d":[0,2],"it":500,"n":2,"pt":1000,'
                           b'"q":2,"reviveTime":1500,"ro":0,"so":10,"t":"T"}')
    back = PopCheckPoint.decode(ck.encode())
    assert back.offsets() == [10, 12] and back.key() == ck.key()


def test_ack_json_single_and_batch_share_the_merge_key():
    one = AckMsg("T", "g", 2, 10, 1000, "broker-a", [12])
    body, tag = one.encode()
    assert tag == "ack" and body == (b'{"ao":12,"bn":"broker-a","c":"g","pt":1000,"q":2,'
                                     b'"so":10,"t":"T"}')
    many = AckMsg("T", "g", 2, 10, 1000, "broker-a", [10, 12])
    body, tag = many.encode()
    assert tag == "bAck" and fastjson.loads(body)["aol"] == [10, 12]
    ck = PopCheckPoint("T", "g", 2, 10, 1000, 500, [0, 2], "broker-a")
    assert AckMsg.decode(body).key() == ck.key() == one.key()


def test_extra_info_round_trip_and_errors():
    e = ExtraInfo.parse("10 1000 500 3 1 broker-a 2 12")
    assert e.text() == "10 1000 500 3 1 broker-a 2 12" and e.revive_qid == 3
    with pytest.raises(ValueError):
        ExtraInfo.parse("10 1000")
    with pytest.raises(ValueError):
        ExtraInfo.parse("a b c d e f g h")


def test_retry_topic_names():
    assert real_topic("T", "g", "1") == "%RETRY%g_T" and real_topic("T", "g", "2") == "%RETRY%g+T"
    assert retry_flag("%RETRY%g_T") == "1" and retry_flag("%RETRY%g+T") == "2"
    assert retry_flag("T") == "0"
    assert normal_topic("%RETRY%g_T_x", "g") == "T_x" and normal_topic("%RETRY%g+T", "g") == "T"


def test_bitset_offsets_is_java_bitset_order():
    import base64

    raw = base64.b64encode(bytes([0b101, 0b1])).decode()  # bits 0, 2, 8
    assert bitset_offsets(100, raw) == [100, 102, 108]


def test_order_info_blocks_until_acked_or_expired():
    m = OrderInfoManager()
    key = ("T", "g", 0)
    assert m.on_pop(key, [5, 6], 1000, 100) == {5: 0, 6: 0}
    assert m.blocked(key, 1050) and not m.blocked(key, 1100)
    assert m.on_pop(key, [5, 6], 1100, 100) == {5: 1, 6: 1}  # redelivered: counted
    assert m.ack(key, 5, 1000) is None  # an ack of the older pop does not count
    assert m.ack(key, 6, 1100) is None  # 5 still unacked: nothing to commit yet
    assert m.ack(key, 5, 1100) == 7  # the whole batch: past it
    assert not m.blocked(key, 1101)
    m.on_pop(key, [8, 9], 2000, 100)
    assert m.ack(key, 8, 2000) == 9  # an acked prefix is committed at once


def test_client_builds_handles_from_the_answer_headers():
    from rmq.store.message import MessageExt
    from rmq.store.message_codec import encode_message

    rec = encode_message(MessageExt(topic="T", body=b"x", queue_id=1, queue_offset=7,
                                    properties={"TAGS": "a"}, born_host=("127.0.0.1", 1),
                                    store_host=("127.0.0.1", 2)))
    r = RemotingCommand.create_response(0)
    r.ext_fields = {"popTime": "1000", "invisibleTime": "500", "reviveQid": "3", "restNum": "0",
                    "startOffsetInfo": "0 1 7", "msgOffsetInfo": "0 1 7"}
    r.body = rec
    res = parse_pop_response(r, "broker-a")
    assert res.messages[0].properties["POP_CK"] == "7 1000 500 3 0 broker-a 1 7"


# consumerOrderInfo.json as a 5.3.3 ConsumerOrderInfoManager writes this state
# (encode(true) after the same update / commitAndNext / updateNextVisibleTime
# calls; its "l" values set to 1)
ORDER_INFO_533 = (
    '{\n\t"table":{\n\t\t"%RETRY%g1_T1@g1":{1:{\n\t\t\t\t"cm":0,\n\t\t\t\t"i":30000,\n'
    '\t\t\t\t"l":1,\n\t\t\t\t"o":[\n\t\t\t\t\t0,\n\t\t\t\t\t1\n\t\t\t\t],\n'
    '\t\t\t\t"popTime":1700000003000\n\t\t\t}\n\t\t},\n\t\t"T1@g1":{0:{\n\t\t\t\t"cm":1,\n'
    '\t\t\t\t"i":60000,\n\t\t\t\t"l":1,\n\t\t\t\t"o":[\n\t\t\t\t\t5,\n\t\t\t\t\t1,\n'
    '\t\t\t\t\t3\n\t\t\t\t],\n\t\t\t\t"oc":{5:1,6:1,8:1\n\t\t\t\t},\n'
    '\t\t\t\t"ot":{6:1700000099000\n\t\t\t\t},\n\t\t\t\t"popTime":1700000001000\n'
    '\t\t\t},2:{\n\t\t\t\t"a":"att-1",\n\t\t\t\t"cm":0,\n\t\t\t\t"i":30000,\n\t\t\t\t"l":1,\n'
    '\t\t\t\t"o":[\n\t\t\t\t\t9\n\t\t\t\t],\n\t\t\t\t"popTime":1700000002000\n\t\t\t}\n'
    '\t\t}\n\t}\n}')


def test_order_info_file_is_the_one_533_writes(tmp_path):
    m = OrderInfoManager(str(tmp_path))
    k = ("T1", "g1", 0)
    m.on_pop(k, [5, 6, 8], 1700000000000, 60000)
    assert m.on_pop(k, [5, 6, 8], 1700000001000, 60000) == {5: 1, 6: 1, 8: 1}
    assert m.ack(k, 5, 1700000001000) == 6
    assert m.change_invisible(k, 6, 1700000001000, 1700000099000)
    m.on_pop(("T1", "g1", 2), [9], 1700000002000, 30000)
    m.table[("T1", "g1", 2)].attempt_id = "att-1"
    m.on_pop(("%RETRY%g1_T1", "g1", 1), [0, 1], 1700000003000, 30000)
    for info in m.table.values():
        info.last_consume = 1
    assert m.encode(pretty=True) == ORDER_INFO_533
    m.persist()
    back = OrderInfoManager(str(tmp_path))
    back.load()
    assert back.table == m.table
    assert back.consumed_offsets()[k] == 6
    # 6 unacked, visible again only at its changed time; 8 at popTime + i
    assert back.blocked(k, 1700000061001) and not back.blocked(k, 1700000099000)


def test_order_info_bad_file_is_refused(tmp_path):
    m = OrderInfoManager(str(tmp_path))
    with pytest.raises(ValueError):
        m.decode('{"table":{"T@g":{0:{"cm":0,"o":[]}}}}')
    with pytest.raises(ValueError):
        m.decode('{"table":{"nogroup":{}}}')


def test_bitset_offsets_matches_a_bit_by_bit_reading():
    import base64
    import random

    rnd = random.Random(37)
    for _ in range(300):
        raw = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 9)))
        start = rnd.randrange(0, 1 << 40)
        expected = [start + i * 8 + bit for i, byte in enumerate(raw) for bit in range(8)
                    if byte >> bit & 1]
        assert bitset_offsets(start, base64.b64encode(raw).decode()) == expected
    assert bitset_offsets(5, "") == []
    with pytest.raises(ValueError):
        bitset_offsets(0, "A")


def test_join_ints_is_the_comma_joined_decimal_texts():
    import random

    from rmq.broker.processor.pop import join_ints

    rnd = random.Random(7)
    for n in (0, 1, 2, 32):
        values = [rnd.randrange(-(1 << 62), 1 << 62) for _ in range(n)] + list(range(n))
        assert join_ints(values) == ",".join(map(str, values))


_TEXTS = ["T", "g", "", "é\"\\\n\x01", "%RETRY%g+T", "broker-a", "\u2028x"]
_INTS = [0, 1, -1, 7, 2**31, -(2**31), 2**62, 1_700_000_000_000]


def test_rendered_checkpoint_equals_its_json_map():
    """``PopCheckPoint.encode`` renders the record field by field: the bytes
    orjson gives for ``to_json_obj``, whatever the texts, numbers and optional
    fields."""
    import random

    import orjson

    rnd = random.Random(5)
    for _ in range(3000):
        diffs = [rnd.choice(_INTS) for _ in range(rnd.choice([0, 1, 2, 32]))]
        ck = PopCheckPoint(rnd.choice(_TEXTS), rnd.choice(_TEXTS), rnd.choice(_INTS),
                           rnd.choice(_INTS), rnd.choice(_INTS), rnd.choice(_INTS), diffs,
                           rnd.choice([None, *_TEXTS]), rnd.choice(_INTS), rnd.choice(_INTS),
                           rnd.choice([None, *_TEXTS]))
        assert ck.encode() == orjson.dumps(ck.to_json_obj())


def test_record_bodies_compiled_and_twin_equal_orjson():
    """``ck_body`` and ``ack_body``, the twins and the compiled ones (when
    built), are the bytes orjson gives for the records' maps."""
    import random

    import orjson

    from rmq._fast import compiled_or_none
    from rmq.broker import pop_records as prec

    impls = [(prec._ck_body, prec._ack_body)]
    c = compiled_or_none("pop_records")
    if c is not None:
        impls.append((c.ck_body, c.ack_body))
    rnd = random.Random(11)
    for _ in range(3000):
        diffs = [rnd.choice(_INTS) for _ in range(rnd.choice([0, 1, 2, 32]))]
        ck = PopCheckPoint(rnd.choice(_TEXTS), rnd.choice(_TEXTS), rnd.choice(_INTS),
                           rnd.choice(_INTS), rnd.choice(_INTS),
                           rnd.choice(_INTS + [2**63 - 1]), diffs,
                           rnd.choice([None, *_TEXTS]), rnd.choice(_INTS), rnd.choice(_INTS),
                           rnd.choice([None, *_TEXTS]))
        ack = AckMsg(ck.topic, ck.cid, ck.queue_id, ck.start_offset, ck.pop_time,
                     ck.broker_name, [ck.start_offset + d for d in diffs[:3]][:rnd.choice([1, 3])])
        want_ck = orjson.dumps(ck.to_json_obj())
        obj: dict = ({"ao": ack.offsets[0]} if len(ack.offsets) == 1 else
                     {"aol": ack.offsets})
        if ack.broker_name is not None:
            obj["bn"] = ack.broker_name
        obj.update({"c": ack.group, "pt": ack.pop_time, "q": ack.queue_id,
                    "so": ack.start_offset, "t": ack.topic})
        want_ack = orjson.dumps(obj)
        for ck_body, ack_body in impls:
            assert ck_body(ck.bit_map, ck.broker_name, ck.cid, ck.offset_diffs,
                           ck.invisible_time, ck.pop_time, ck.queue_id, ck.revive_offset,
                           ck.reput_times, ck.start_offset, ck.topic) == want_ck
            assert ack_body(ack.offsets, ack.broker_name, ack.group, ack.pop_time,
                            ack.queue_id, ack.start_offset, ack.topic) == want_ack
        assert ack.encode() == (want_ack, "ack" if len(ack.offsets) == 1 else "bAck")


def test_ack_body_numbers_at_every_digit_count():
    """``ack_body``'s numbers (the compiled one writes them two digits at a
    time, their count from the bit length): every power of ten, one either
    side of it and of each power of two, the ends of a long, as orjson writes
    them."""
    import orjson

    from rmq._fast import compiled_or_none
    from rmq.broker import pop_records as prec

    impls = [prec._ack_body]
    c = compiled_or_none("pop_records")
    if c is not None:
        impls.append(c.ack_body)
    edges = {0, 1, 2**63 - 1, -2**63}
    for k in range(19):
        edges.update({10**k - 1, 10**k, 10**k + 1, -(10**k), -(10**k) + 1})
    for k in range(63):
        edges.update({2**k - 1, 2**k, 2**k + 1, -(2**k)})
    values = sorted(v for v in edges if -2**63 <= v < 2**63)
    for i in range(0, len(values), 32):
        chunk = values[i:i + 32]
        want = orjson.dumps({"aol": chunk, "c": "g", "pt": chunk[0], "q": chunk[-1],
                             "so": chunk[len(chunk) // 2], "t": "t"})
        for ack_body in impls:
            assert ack_body(chunk, None, "g", chunk[0], chunk[-1], chunk[len(chunk) // 2],
                            "t") == want


def test_ack_body_runs_step_their_texts_right():
    """``ack_body`` of runs of offsets (the compiled one steps the last digit
    of the text before for a value one past it): runs across each power of
    ten, through negative numbers and zero, at the ends of a long, and with
    gaps, as orjson writes them."""
    import orjson

    from rmq._fast import compiled_or_none
    from rmq.broker import pop_records as prec

    impls = [prec._ack_body]
    c = compiled_or_none("pop_records")
    if c is not None:
        impls.append(c.ack_body)
    starts = [0, -25, -2**63, 2**63 - 40, 12_990]
    starts += [10**k - 17 for k in range(1, 19)] + [-(10**k) - 3 for k in range(1, 18)]
    for start in starts:
        for gap_every in (0, 7):  # a whole run; one with a gap after each seventh
            run = [o for o in (start + i + (i // gap_every if gap_every else 0)
                               for i in range(40)) if o < 2**63]
            want = orjson.dumps({"aol": run, "c": "g", "pt": 1, "q": 2, "so": 3, "t": "t"})
            for ack_body in impls:
                assert ack_body(run, None, "g", 1, 2, 3, "t") == want
