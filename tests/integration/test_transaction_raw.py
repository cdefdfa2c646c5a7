"""The transaction back-check on the wire: a raw remoting client acting as a
producer sends a half message, receives CHECK_TRANSACTION_STATE and checks
its header fields and stored-message body against PROTOCOL.md 3.2.6, then
ends the transaction as a checked producer would (PROTOCOL.md 3.2.5)."""

from __future__ import annotations

import asyncio
import time
import zlib

import orjson
import pytest

from rmq.client.codec import decode_messages
from rmq.client.headers import send_header_v2
from rmq.common import message as mc
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.message_id import decode_message_id
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.remoting.command import RPC_ONEWAY
from rmq.store.message_codec import decode_message
from rmq.testing.cluster import Cluster
from tests.integration.test_messaging_raw import props, pull

R = RequestCode
RC = ResponseCode
TX_CONF = "transactionCheckInterval=400\ntransactionTimeOut=800\ntransactionCheckMax=5\n"
UNIQ = "7F0000010D2A18B4AAC2527E5A2D0000"


class CheckRecorder:
    """The raw producer's processor for CHECK_TRANSACTION_STATE: keeps every
    request, answers nothing (the request is oneway)."""

    def __init__(self) -> None:
        self.requests: asyncio.Queue[RemotingCommand] = asyncio.Queue()

    def process_request(self, channel, request: RemotingCommand) -> None:
        self.requests.put_nowait(request)
        return None


async def end(client: RemotingClient, addr: str, **fields) -> RemotingCommand:
    header = {"producerGroup": "raw_pg", "commitOrRollback": "8", "msgId": UNIQ, **fields}
    return await client.invoke(addr, RemotingCommand.create_request(R.END_TRANSACTION, header),
                               5000)


@pytest.mark.timeout(60)
async def test_check_request_fields_and_body_then_commit(tmp_path):
    c = Cluster(tmp_path, TX_CONF)
    client = RemotingClient()
    recorder = CheckRecorder()
    client.register_processor(R.CHECK_TRANSACTION_STATE, recorder)
    try:
        c.start_broker()
        await c.create_topic("TxRaw", 2)
        hb = {"clientID": "127.0.0.1@raw", "producerDataSet": [{"groupName": "raw_pg"}],
              "consumerDataSet": []}
        r = await client.invoke(c.addr, RemotingCommand.create_request(
            R.HEART_BEAT, None, orjson.dumps(hb)), 5000)
        assert r.code == RC.SUCCESS
        born = int(time.time() * 1000)
        ext = send_header_v2("raw_pg", "TxRaw", "TBW102", 4, 1, mc.TRANSACTION_PREPARED_TYPE,
                             born, 7, props(TAGS="TagT", KEYS="k1", UNIQ_KEY=UNIQ, WAIT="true",
                                            TRAN_MSG="true", PGROUP="raw_pg"), False, "broker-a")
        sent = await client.invoke(c.addr, RemotingCommand.create_request(
            R.SEND_MESSAGE_V2, ext, b"raw body"), 5000)
        assert sent.code == RC.SUCCESS, sent.remark
        half_offset = int(sent.ext_fields["queueOffset"])
        _, half_commit = decode_message_id(sent.ext_fields["msgId"])
        p = await pull(c, "TxRaw", 1, 0)
        assert p.code == RC.PULL_NOT_FOUND  # invisible until committed

        check = await asyncio.wait_for(recorder.requests.get(), 15.0)
        assert check.code == R.CHECK_TRANSACTION_STATE and check.flag & RPC_ONEWAY
        f = check.ext_fields
        assert set(f) == {"tranStateTableOffset", "commitLogOffset", "msgId", "transactionId",
                          "offsetMsgId"}
        assert f["msgId"] == f["transactionId"] == UNIQ
        copy_offset, copy_commit = int(f["tranStateTableOffset"]), int(f["commitLogOffset"])
        assert copy_offset > half_offset and copy_commit > half_commit  # the put-back copy
        host, off = decode_message_id(f["offsetMsgId"])
        assert off == copy_commit and host == ("127.0.0.1", c.port)

        body = bytes(check.body)
        m = decode_message(body)
        assert m.store_size == len(body)
        assert (m.topic, m.queue_id, m.body, m.flag) == ("TxRaw", 1, b"raw body", 7)
        assert (m.queue_offset, m.commit_log_offset) == (copy_offset, copy_commit)
        assert mc.transaction_type(m.sys_flag) == mc.TRANSACTION_NOT_TYPE
        assert m.body_crc == zlib.crc32(b"raw body") & 0x7FFFFFFF
        assert m.born_timestamp == born and m.prepared_transaction_offset == 0
        assert m.properties == {
            "TAGS": "TagT", "KEYS": "k1", "UNIQ_KEY": UNIQ, "TRAN_MSG": "true",
            "PGROUP": "raw_pg", "CLUSTER": "DefaultCluster", "REAL_TOPIC": "TxRaw",
            "REAL_QID": "1", "TRANSACTION_CHECK_TIMES": "1", "WAIT": "false"}

        # what the broker checks of an END_TRANSACTION (answered because not oneway)
        r = await end(client, c.addr, producerGroup="other", tranStateTableOffset=copy_offset,
                      commitLogOffset=copy_commit)
        assert (r.code, r.remark) == (RC.SYSTEM_ERROR, "The producer group wrong")
        r = await end(client, c.addr, tranStateTableOffset=copy_offset + 1,
                      commitLogOffset=copy_commit)
        assert (r.code, r.remark) == (RC.SYSTEM_ERROR, "The transaction state table offset wrong")
        r = await end(client, c.addr, tranStateTableOffset=copy_offset,
                      commitLogOffset=copy_commit + 10 ** 9)
        assert (r.code, r.remark) == (RC.SYSTEM_ERROR, "Find prepared transaction message failed")
        r = await end(client, c.addr, tranStateTableOffset=copy_offset,
                      commitLogOffset=copy_commit, fromTransactionCheck="true",
                      transactionId=UNIQ)
        assert r.code == RC.SUCCESS, r.remark

        p = await pull(c, "TxRaw", 1, 0)
        assert p.code == RC.SUCCESS
        (done,) = decode_messages(p.body)
        assert done.body == b"raw body" and done.msg_id == UNIQ and done.tags == "TagT"
        assert mc.transaction_type(done.sys_flag) == mc.TRANSACTION_COMMIT_TYPE
        assert done.prepared_transaction_offset == copy_commit
        assert done.flag == 0  # 4.9.8's put-back copy does not keep the flag
        assert done.properties["TRANSACTION_CHECK_TIMES"] == "1"
        assert done.properties["WAIT"] == "true"  # the half message's stored string has it
        assert done.properties["REAL_TOPIC"] == "TxRaw"  # the 4.9.8 string quirk

        await asyncio.sleep(2.0)  # rounds after the op record: no check, no second copy
        assert recorder.requests.empty()
        assert len(decode_messages((await pull(c, "TxRaw", 1, 0)).body)) == 1
    finally:
        await client.close()
        await c.close()


@pytest.mark.timeout(60)
async def test_no_check_without_a_producer_connection_until_one_heartbeats(tmp_path):
    """Checks go only to live connections of the PGROUP: with none the check
    is counted but not sent; the next round reaches a producer that appeared."""
    c = Cluster(tmp_path, TX_CONF.replace("CheckMax=5", "CheckMax=10"))
    client = RemotingClient()
    recorder = CheckRecorder()
    client.register_processor(R.CHECK_TRANSACTION_STATE, recorder)
    try:
        c.start_broker()
        await c.create_topic("TxLate", 1)
        ext = send_header_v2("late_pg", "TxLate", "TBW102", 4, 0, mc.TRANSACTION_PREPARED_TYPE,
                             int(time.time() * 1000), 0,
                             props(UNIQ_KEY=UNIQ, TRAN_MSG="true", PGROUP="late_pg"), False,
                             "broker-a")
        sent = await client.invoke(c.addr, RemotingCommand.create_request(
            R.SEND_MESSAGE_V2, ext, b"x"), 5000)
        assert sent.code == RC.SUCCESS
        await asyncio.sleep(2.0)  # a few rounds with nobody of late_pg connected
        assert recorder.requests.empty()
        hb = {"clientID": "127.0.0.1@late", "producerDataSet": [{"groupName": "late_pg"}],
              "consumerDataSet": []}
        r = await client.invoke(c.addr, RemotingCommand.create_request(
            R.HEART_BEAT, None, orjson.dumps(hb)), 5000)
        assert r.code == RC.SUCCESS
        check = await asyncio.wait_for(recorder.requests.get(), 10.0)
        times = int(decode_message(bytes(check.body)).properties["TRANSACTION_CHECK_TIMES"])
        assert 2 <= times <= 10  # the unanswered rounds were counted
    finally:
        await client.close()
        await c.close()
