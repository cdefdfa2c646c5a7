"""The broker's transaction service: the message builders (4.9.8 stored
bytes and quirks), the END_TRANSACTION helpers, and check rounds walked over
a real message store with the broker's real managers (only the network send
of CHECK_TRANSACTION_STATE is recorded instead of written to a channel; the
integration tests cover it)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from rmq.broker.config import BrokerConfig
from rmq.broker.consumer_offset_manager import ConsumerOffsetManager
from rmq.broker.processor.end_transaction import (
    check_prepare_message,
    end_message_transaction,
    send_final_response,
)
from rmq.broker.topic_config_manager import TopicConfigManager
from rmq.broker.transaction import bridge as B
from rmq.broker.transaction import service as S
from rmq.broker.transaction.check_listener import TransactionalMessageCheckListener, check_request
from rmq.common import message as mc
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.protocol.headers_broker import EndTransactionRequestHeader
from rmq.common.topics import TRANS_CHECK_MAX_TIME_TOPIC
from rmq.remoting.config import NettyServerConfig
from rmq.store import (
    DefaultMessageStore,
    MessageExt,
    MessageExtBrokerInner,
    MessageStoreConfig,
    PutMessageResult,
    PutMessageStatus,
)
from rmq.store.message_codec import decode_message, message_properties_to_string

HOST = ("127.0.0.1", 10911)
HALF = B.HALF_TOPIC
OP = B.OP_TOPIC
GROUP = B.CONSUMER_GROUP


def half_ext(**props: str) -> MessageExt:
    base = {"TAGS": "TagA", "UNIQ_KEY": "AB" * 16, "PGROUP": "pg", "TRAN_MSG": "true",
            "REAL_TOPIC": "Real", "REAL_QID": "3", **props}
    return MessageExt(topic=HALF, flag=5, properties=base, body=b"payload", queue_id=0,
                      queue_offset=12, sys_flag=0, born_timestamp=1000, born_host=("10.0.0.1", 9),
                      store_timestamp=2000, store_host=HOST, msg_id="ID", commit_log_offset=4096,
                      reconsume_times=2)


# ---- pure helpers ------------------------------------------------------------------------
def test_calculate_op_offset_takes_the_contiguous_run():
    assert S._calculate_op_offset([], 5) == 5
    assert S._calculate_op_offset([7, 5, 6, 9], 5) == 8
    assert S._calculate_op_offset([6, 7], 5) == 5


def test_immunity_time_and_java_long():
    assert S._immunity_ms("5", 6000) == 5000
    assert S._immunity_ms("-1", 6000) == 6000
    assert S._immunity_ms("soon", 6000) == 6000  # getLong gives -1
    assert S._java_long(None) == -1


def test_need_discard_counts_checks_in_the_properties():
    m = half_ext()
    assert not S.TransactionalMessageService._need_discard(m, 3)
    assert m.properties[mc.PROPERTY_TRANSACTION_CHECK_TIMES] == "1"
    m.properties[mc.PROPERTY_TRANSACTION_CHECK_TIMES] = "2"
    assert not S.TransactionalMessageService._need_discard(m, 3)
    assert m.properties[mc.PROPERTY_TRANSACTION_CHECK_TIMES] == "3"
    assert S.TransactionalMessageService._need_discard(m, 3)
    m.properties[mc.PROPERTY_TRANSACTION_CHECK_TIMES] = "x"  # getInt -1, then + 1
    assert not S.TransactionalMessageService._need_discard(m, 3)
    assert m.properties[mc.PROPERTY_TRANSACTION_CHECK_TIMES] == "0"


def test_parse_half_message_inner():
    props = {"TAGS": "T", "PGROUP": "pg", "TRAN_MSG": "true", "WAIT": "true"}
    a = B.parse_half_message_inner(MessageExtBrokerInner(
        "Real", 2, 0, b"b", props, "x", 0, mc.TRANSACTION_PREPARED_TYPE | mc.COMPRESSED_FLAG))
    assert (a.topic, a.queue_id, a.sys_flag) == (HALF, 0, mc.COMPRESSED_FLAG)
    assert a.properties["REAL_TOPIC"] == "Real" and a.properties["REAL_QID"] == "2"
    assert a.properties_string == message_properties_to_string(a.properties)


def test_op_message_stored_string_is_tags_and_wait_true():
    op = B.op_message_inner(half_ext(), HOST)
    assert (op.topic, op.queue_id, op.body, op.sys_flag, op.flag) == (OP, 0, b"12", 0, 0)
    assert sorted(op.properties_string.split("\x02")) == ["TAGS\x01d", "WAIT\x01true"]
    assert op.properties["WAIT"] == "false" and len(op.properties["UNIQ_KEY"]) == 32
    assert op.tags_code == mc.tags_string_to_code("d")
    assert op.born_host == op.store_host == HOST


def test_renewed_half_copy_drops_flag_and_shares_the_map():
    m = half_ext()
    copy = B.renew_half_message_inner(m)
    assert (copy.topic, copy.queue_id, copy.flag, copy.reconsume_times) == (HALF, 0, 0, 0)
    assert "WAIT" not in copy.properties_string
    assert m.properties["WAIT"] == "false"  # the map is shared: the check body shows it
    assert copy.tags_code == mc.tags_string_to_code("TagA")
    immune = B.renew_immunity_half_message_inner(half_ext())
    assert immune.properties[mc.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] == "12"
    assert "TRAN_PREPARED_QUEUE_OFFSET\x0112" in immune.properties_string
    again = B.renew_immunity_half_message_inner(half_ext(TRAN_PREPARED_QUEUE_OFFSET="4"))
    assert again.properties[mc.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] == "4"


def test_discard_copy_keeps_flag_and_reconsume_times():
    d = B.discard_message_inner(half_ext(), 0)
    assert (d.topic, d.queue_id, d.flag, d.reconsume_times) == (TRANS_CHECK_MAX_TIME_TOPIC, 0, 5, 2)
    assert "WAIT" not in d.properties_string and d.properties["WAIT"] == "false"


def test_check_request_header_and_body():
    m = half_ext(TRANSACTION_CHECK_TIMES="1")
    req = check_request(m)
    assert req.code == RequestCode.CHECK_TRANSACTION_STATE
    assert req.ext_fields == {"tranStateTableOffset": "12", "commitLogOffset": "4096",
                              "msgId": "AB" * 16, "transactionId": "AB" * 16,
                              "offsetMsgId": "ID"}
    body = decode_message(req.body)
    assert (body.topic, body.queue_id, body.store_size) == ("Real", 3, len(req.body))
    assert (body.queue_offset, body.commit_log_offset, body.flag) == (12, 4096, 5)
    assert body.properties == m.properties
    with pytest.raises(ValueError):
        check_request(half_ext(REAL_QID="x"))


def test_end_message_transaction_and_checks():
    h = EndTransactionRequestHeader(producerGroup="pg", tranStateTableOffset=12,
                                    commitLogOffset=4096, commitOrRollback=8, msgId="m")
    assert check_prepare_message(half_ext(), h).code == ResponseCode.SUCCESS
    assert check_prepare_message(None, h).remark == "Find prepared transaction message failed"
    h.producerGroup = "other"
    assert check_prepare_message(half_ext(), h).remark == "The producer group wrong"
    h.producerGroup, h.tranStateTableOffset = "pg", 13
    assert check_prepare_message(half_ext(), h).remark == \
        "The transaction state table offset wrong"
    h.tranStateTableOffset, h.commitLogOffset = 12, 1
    assert check_prepare_message(half_ext(), h).remark == "The commit log offset wrong"
    h.commitLogOffset = 4096
    half = half_ext()
    text = message_properties_to_string(half.properties)
    final = end_message_transaction(half, h)
    assert (final.topic, final.queue_id, final.flag, final.body) == ("Real", 3, 5, b"payload")
    assert final.properties_string == text  # generated before the three keys left
    assert not {"REAL_TOPIC", "REAL_QID", "TRAN_MSG"} & set(final.properties)
    assert mc.transaction_type(final.sys_flag) == mc.TRANSACTION_COMMIT_TYPE
    assert final.prepared_transaction_offset == 4096 and final.reconsume_times == 2


def test_send_final_response_codes():
    def code(status):
        return send_final_response(PutMessageResult(status), 4096)
    for ok in ("PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"):
        assert code(PutMessageStatus[ok]).code == ResponseCode.SUCCESS
    r = code(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "limit 4096B" in r.remark
    assert code(PutMessageStatus.SERVICE_NOT_AVAILABLE).code == ResponseCode.SERVICE_NOT_AVAILABLE
    assert code(PutMessageStatus.UNKNOWN_ERROR).remark == "UNKNOWN_ERROR"
    assert send_final_response(None, 1).remark == "store putMessage return null"


# ---- check rounds over a real store --------------------------------------------------------
class Recording(TransactionalMessageCheckListener):
    """The real listener, with the CHECK_TRANSACTION_STATE write recorded."""

    def __init__(self, broker) -> None:
        super().__init__(broker)
        self.asked: list[MessageExt] = []

    def resolve_half_msg(self, msg: MessageExt) -> None:
        self.asked.append(msg)


@pytest.fixture
async def broker(tmp_path):
    store = DefaultMessageStore(MessageStoreConfig(
        storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=256 * 1024,
        mappedFileSizeConsumeQueue=20 * 1024, maxHashSlotNum=64, maxIndexNum=256), HOST)
    assert store.load()
    store.start()
    bc = BrokerConfig(brokerIP1=HOST[0])
    b = SimpleNamespace(message_store=store, broker_config=bc,
                        server_config=NettyServerConfig(listenPort=HOST[1]),
                        topic_config_manager=TopicConfigManager(bc, str(tmp_path)),
                        consumer_offset_manager=ConsumerOffsetManager(str(tmp_path)))
    b.service = S.TransactionalMessageService(B.TransactionalMessageBridge(b), lambda: 72)
    b.listener = Recording(b)
    yield b
    store.shutdown()


async def prepare(b, body: bytes, age_ms: int, **props: str) -> PutMessageResult:
    p = {"UNIQ_KEY": body.hex().upper().ljust(32, "0"), "PGROUP": "pg", "TRAN_MSG": "true",
         **props}
    msg = MessageExtBrokerInner("Real", 1, 0, body, p, "", 0, 0,
                                time.time_ns() // 1_000_000 - age_ms, ("10.0.0.1", 9), HOST)
    result = await b.service.prepare_message(msg)
    assert result.status is PutMessageStatus.PUT_OK
    return result


def offsets(b) -> tuple[int, int]:
    com = b.consumer_offset_manager
    return com.query_offset(GROUP, HALF, 0), com.query_offset(GROUP, OP, 0)


async def check(b, timeout_ms: int = 1000, check_max: int = 3) -> None:
    time.sleep(0.002)  # everything stored so far is older than the round
    await b.service.check(timeout_ms, check_max, b.listener)


async def test_old_half_message_is_put_back_and_asked_for(broker):
    b = broker
    await prepare(b, b"old", 5000)
    await prepare(b, b"young", 0)
    await check(b)
    (asked,) = b.listener.asked
    assert asked.body == b"old" and asked.queue_offset == 2  # the copy after "young"
    assert asked.properties[mc.PROPERTY_TRANSACTION_CHECK_TIMES] == "1"
    assert offsets(b) == (1, 0)  # stopped at the young one; op queue untouched
    assert b.message_store.get_max_offset_in_queue(HALF, 0) == 3
    copy = b.message_store.look_message_by_offset(asked.commit_log_offset)
    assert copy.properties[mc.PROPERTY_TRANSACTION_CHECK_TIMES] == "1" and copy.flag == 0


async def test_op_records_finish_half_messages_and_move_the_op_offset(broker):
    b = broker
    first = await prepare(b, b"a", 5000)
    await prepare(b, b"b", 5000)
    half = b.message_store.look_message_by_offset(first.append_result.wrote_offset)
    assert await b.service.delete_prepare_message(half)
    await check(b)
    assert [m.body for m in b.listener.asked] == [b"b"]
    assert offsets(b) == (2, 1)  # both originals passed, the fresh copy waits; op 0 consumed
    await check(b)  # the copy of "b" is checked again (count 2)
    assert [m.properties[mc.PROPERTY_TRANSACTION_CHECK_TIMES] for m in b.listener.asked] == \
        ["1", "2"]


async def test_immunity_time_puts_back_without_asking(broker):
    b = broker
    await prepare(b, b"immune", 5000, CHECK_IMMUNITY_TIME_IN_SECONDS="3600")
    await check(b)
    assert b.listener.asked == []
    assert offsets(b) == (1, 0)
    copy = b.message_store.get_message(GROUP, HALF, 0, 1, 1)
    m = decode_message(copy.message_buffers[0])
    copy.release()
    assert m.properties[mc.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] == "0"
    # an op record naming the first copy finishes the immune copy too
    first = b.message_store.get_message(GROUP, HALF, 0, 0, 1)
    original = decode_message(first.message_buffers[0])
    first.release()
    assert await b.service.delete_prepare_message(original)
    await check(b)
    assert b.listener.asked == [] and offsets(b) == (2, 1)


async def test_checked_too_often_goes_to_the_check_max_topic(broker):
    b = broker
    await prepare(b, b"stuck", 5000, TRANSACTION_CHECK_TIMES="3")
    await check(b, check_max=3)
    assert b.listener.asked == [] and offsets(b) == (1, 0)
    got = b.message_store.get_message(GROUP, TRANS_CHECK_MAX_TIME_TOPIC, 0, 0, 1)
    gone = decode_message(got.message_buffers[0])
    got.release()
    assert gone.body == b"stuck" and gone.properties["REAL_TOPIC"] == "Real"
    assert b.topic_config_manager.select_topic_config(TRANS_CHECK_MAX_TIME_TOPIC).perm == 6


async def test_nothing_to_check(broker):
    await check(broker)
    assert broker.listener.asked == [] and offsets(broker) == (-1, 0)  # op offset reset
    assert broker.topic_config_manager.select_topic_config(HALF).readQueueNums == 1
