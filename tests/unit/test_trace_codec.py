"""The trace text of 4.9.8's TraceDataEncoder, byte for byte: each record type
as 4.9.8 writes it (its ``null`` for a missing tag or key included), and the
older and newer line lengths its decoder accepts."""

from __future__ import annotations

from rmq.client.message import MessageExt
from rmq.client.trace import (
    ConsumeReturnType,
    MessageType,
    TraceBean,
    TraceContext,
    TraceType,
    decode,
    encode,
    trace_views,
)

A, B = "\x01", "\x02"


def _pub(**kw) -> TraceContext:
    bean = TraceBean(topic="T", msg_id="MID", offset_msg_id="OFF", tags=None, keys="k1 k2",
                     store_host="127.0.0.1:10911", body_length=5, msg_type=MessageType.Normal_Msg)
    return TraceContext(TraceType.Pub, 1700000000123, "DefaultRegion", "pg", 3, True, beans=[bean], **kw)


def test_pub_line_is_4_9_8s():
    data, keys = encode(_pub())
    assert data == A.join(["Pub", "1700000000123", "DefaultRegion", "pg", "T", "MID", "null", "k1 k2",
                           "127.0.0.1:10911", "5", "3", "0", "OFF", "true"]) + B
    assert keys == ["MID", "k1", "k2"]
    (back,) = decode(data)
    assert back.trace_type is TraceType.Pub and back.timestamp == 1700000000123 and back.cost_time == 3
    assert back.beans[0].offset_msg_id == "OFF" and back.beans[0].tags == "null" and back.success


def test_sub_lines_one_per_message_and_their_old_forms():
    beans = [TraceBean(msg_id="M1", keys=None, retry_times=0), TraceBean(msg_id="M2", keys="kk", retry_times=2)]
    before = TraceContext(TraceType.SubBefore, 1700000000200, None, "cg", request_id="RID", beans=beans)
    data, keys = encode(before)
    assert data == (A.join(["SubBefore", "1700000000200", "null", "cg", "RID", "M1", "0", "null"]) + B
                    + A.join(["SubBefore", "1700000000200", "null", "cg", "RID", "M2", "2", "kk"]) + B)
    assert keys == ["M1", "M2", "kk"]
    after = TraceContext(TraceType.SubAfter, 1700000000300, None, "cg", 7, False, "RID",
                         int(ConsumeReturnType.FAILED), beans=beans[:1])
    line = A.join(["SubAfter", "RID", "M1", "7", "false", "null", "4", "1700000000300", "cg"]) + B
    assert encode(after)[0] == line
    (back,) = decode(line)
    assert (back.group, back.timestamp, back.context_code, back.success) == ("cg", 1700000000300, 4, False)
    # the cloud channel's form ends after the context code, and the oldest has no code
    after.cloud = True
    assert encode(after)[0] == A.join(["SubAfter", "RID", "M1", "7", "false", "null", "4"]) + A
    (old,) = decode(A.join(["SubAfter", "RID", "M1", "7", "true", "kk"]))
    assert old.context_code == 0 and old.group == "" and old.success


def test_end_transaction_line():
    bean = TraceBean(topic="T", msg_id="MID", tags="tg", keys=None, store_host="h:1",
                     msg_type=MessageType.Trans_msg_Commit, transaction_id="MID",
                     transaction_state="ROLLBACK_MESSAGE", from_transaction_check=True)
    ctx = TraceContext(TraceType.EndTransaction, 1700000000400, "DefaultRegion", "pg", beans=[bean])
    data, _ = encode(ctx)
    assert data == A.join(["EndTransaction", "1700000000400", "DefaultRegion", "pg", "T", "MID", "tg", "null",
                           "h:1", "2", "MID", "ROLLBACK_MESSAGE", "true"]) + B
    (back,) = decode(data)
    assert back.beans[0].transaction_state == "ROLLBACK_MESSAGE" and back.beans[0].from_transaction_check


def test_older_and_newer_pub_lines_decode():
    base = ["Pub", "1", "r", "g", "T", "MID", "t", "k", "h:1", "9", "2", "3"]
    (old,) = decode(A.join([*base, "false"]))  # 13 fields: no offset id
    assert not old.success and old.beans[0].msg_type is MessageType.Delay_Msg
    (new,) = decode(A.join([*base, "OFF", "true", "10.0.0.9"]))  # 15 fields: the client host
    assert new.beans[0].client_host == "10.0.0.9" and new.beans[0].offset_msg_id == "OFF"


def test_views_keep_the_records_of_one_message():
    other = _pub()
    other.beans[0].msg_id = "OTHER"
    msg = MessageExt()
    msg.body = (encode(_pub())[0] + encode(other)[0] + "Unknown" + A + "x" + B).encode()
    msg.born_host = "10.1.1.1:5555"
    (view,) = trace_views("MID", msg)
    assert view == {"msgId": "MID", "tags": "null", "keys": "k1 k2", "storeHost": "127.0.0.1:10911",
                    "clientHost": "10.1.1.1:5555", "costTime": 3, "msgType": "Pub", "offSetMsgId": "OFF",
                    "timeStamp": 1700000000123, "topic": "T", "groupName": "pg", "status": "success"}
