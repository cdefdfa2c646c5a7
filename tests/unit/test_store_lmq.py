"""Multi-dispatch and LMQ in the store: one commit-log record, an entry in
each %LMQ% queue named by INNER_MULTI_DISPATCH (queue 0) at the offset the
record's INNER_MULTI_QUEUE_OFFSET holds; offsets carry on after a normal and
after an abnormal restart; the maxLmqConsumeQueueNum limit."""

from __future__ import annotations

import os

import pytest

from rmq.common import message as mc
from rmq.store import DefaultMessageStore, GetMessageStatus, PutMessageStatus
from rmq.store.message_codec import decode_message
from tests.unit.test_store_basic import HOST, make_msg, small_config

pytestmark = pytest.mark.timeout(60)
LMQ = {"enableMultiDispatch": True, "enableLmq": True}


def _open(root, **kw) -> DefaultMessageStore:
    s = DefaultMessageStore(small_config(root, **{**LMQ, **kw}), HOST)
    assert s.load()
    s.start()
    return s


def _multi(i: int, queues: str, qid: int = 2):
    return make_msg(i, topic="Parent", qid=qid, extra={mc.PROPERTY_INNER_MULTI_DISPATCH: queues,
                                                       mc.PROPERTY_WAIT_STORE_MSG_OK: "true"})


def _read(store, topic: str, qid: int, offset: int = 0, n: int = 64):
    r = store.get_message("g", topic, qid, offset, n)
    return r, [decode_message(b) for b in r.message_buffers] if r.status is GetMessageStatus.FOUND else []


def test_one_record_many_queues(tmp_path):
    s = _open(tmp_path)
    try:
        for i in range(5):
            assert s.put_message(_multi(i, "%LMQ%a,%LMQ%b")).status is PutMessageStatus.PUT_OK
        assert s.put_message(_multi(5, "%LMQ%b")).status is PutMessageStatus.PUT_OK
        _, parent = _read(s, "Parent", 2)
        _, a = _read(s, "%LMQ%a", 0)
        _, b = _read(s, "%LMQ%b", 0)
        assert len(parent) == 6 and len(a) == 5 and len(b) == 6
        assert [m.commit_log_offset for m in a] == [m.commit_log_offset for m in parent[:5]]
        # the offsets of each extra queue, in the order the property names them, are stored
        assert [m.properties[mc.PROPERTY_INNER_MULTI_QUEUE_OFFSET] for m in parent] == \
            ["0,0", "1,1", "2,2", "3,3", "4,4", "5"]
        assert all(mc.PROPERTY_WAIT_STORE_MSG_OK not in m.properties for m in parent)
        assert s.get_max_offset_in_queue("%LMQ%b", 0) == 6 and s.lmq_consume_queue_num == 2
        assert not os.path.exists(tmp_path / "consumequeue" / "%LMQ%a" / "2")
    finally:
        s.shutdown()


@pytest.mark.parametrize("abnormal", [False, True])
def test_offsets_carry_on_after_a_restart(tmp_path, abnormal):
    s = _open(tmp_path)
    for i in range(4):
        s.put_message(_multi(i, "%LMQ%x"))
    s.shutdown()
    if abnormal:  # as after kill -9: the abort file stays and the consume queues are rebuilt
        (tmp_path / "abort").write_bytes(b"")
        for root, _, files in os.walk(tmp_path / "consumequeue"):
            for f in files:
                os.remove(os.path.join(root, f))
    s = _open(tmp_path)
    try:
        assert s.get_max_offset_in_queue("%LMQ%x", 0) == 4
        s.put_message(_multi(9, "%LMQ%x"))
        _, x = _read(s, "%LMQ%x", 0)
        assert [m.properties[mc.PROPERTY_INNER_MULTI_QUEUE_OFFSET] for m in x] == ["0", "1", "2", "3", "4"]
        assert s.lmq_consume_queue_num == 1
    finally:
        s.shutdown()


def test_plain_names_keep_the_queue_id_and_the_switch_is_needed(tmp_path):
    s = _open(tmp_path, enableLmq=False)
    try:
        s.put_message(_multi(0, "%LMQ%y,Other", qid=3))
        assert _read(s, "%LMQ%y", 3)[1] and _read(s, "Other", 3)[1]  # without enableLmq: the message's queue
    finally:
        s.shutdown()
    off = tmp_path / "off"
    s = _open(off, enableMultiDispatch=False)
    try:
        s.put_message(_multi(0, "%LMQ%z"))
        assert _read(s, "%LMQ%z", 0)[0].status is not GetMessageStatus.FOUND
        assert mc.PROPERTY_INNER_MULTI_QUEUE_OFFSET not in _read(s, "Parent", 2)[1][0].properties
    finally:
        s.shutdown()


def test_the_lmq_limit(tmp_path):
    s = _open(tmp_path, maxLmqConsumeQueueNum=2)
    try:
        for name in ("%LMQ%1", "%LMQ%2", "%LMQ%3"):
            assert s.put_message(_multi(0, name)).status is PutMessageStatus.PUT_OK
        # three LMQs > 2: multi-dispatched puts and LMQ reads are refused, others go on
        assert s.put_message(_multi(1, "%LMQ%1")).status is PutMessageStatus.LMQ_CONSUME_QUEUE_NUM_EXCEEDED
        assert s.get_message("g", "%LMQ%1", 0, 0, 8) is None
        assert s.put_message(make_msg(2, topic="Parent")).status is PutMessageStatus.PUT_OK
        s.clean_unused_lmq_topic("%LMQ%3")
        assert s.lmq_consume_queue_num == 2
        assert s.put_message(_multi(3, "%LMQ%1")).status is PutMessageStatus.PUT_OK
    finally:
        s.shutdown()
