"""Transactional messages end to end with ``rmq.client.TransactionProducer``
against real rmq-namesrv and rmq-broker processes: commit and rollback at
send time, the broker's back-check (CHECK_TRANSACTION_STATE) answered with
commit or rollback, a producer that never decides (its message ends in
TRANS_CHECK_MAX_TIME_TOPIC after transactionCheckMax checks), and undecided
half messages surviving a broker restart."""

from __future__ import annotations

import asyncio
import collections

import pytest
import pytest_asyncio

from rmq.client import LocalTransactionState, Message, TransactionProducer
from rmq.client.codec import decode_messages
from rmq.common import message as mc
from rmq.common.codes import ResponseCode
from rmq.common.topics import TRANS_CHECK_MAX_TIME_TOPIC
from rmq.remoting.exceptions import RemotingError
from rmq.testing.cluster import Cluster
from rmq.testing.messaging import running_cluster
from rmq.testing.wait import wait_until
from tests.integration.test_messaging_raw import pull

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(60)]
COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
CHECK_MAX = 3
TX_CONF = (f"transactionCheckInterval=400\ntransactionTimeOut=800\n"
           f"transactionCheckMax={CHECK_MAX}\n")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("tx"), TX_CONF) as c:
        yield c


class Script:
    """A transaction listener driven by the message body: ``plan[body]`` is
    the local outcome at send time followed by the answers to the checks
    (the last one repeats); every call is counted."""

    def __init__(self, plan: dict[bytes, list[LocalTransactionState]]) -> None:
        self.plan = plan
        self.executed: collections.Counter[bytes] = collections.Counter()
        self.checked: collections.Counter[bytes] = collections.Counter()
        self.checked_msgs: list = []

    def execute_local_transaction(self, msg, arg):
        self.executed[msg.body] += 1
        assert arg == "arg"
        return self.plan[msg.body][0]

    async def check_local_transaction(self, msg):  # async on purpose: both kinds work
        self.checked[msg.body] += 1
        self.checked_msgs.append(msg)
        answers = self.plan[msg.body][1:]
        return answers[min(self.checked[msg.body], len(answers)) - 1]


async def visible(c: Cluster, topic: str, queue_id: int = 0) -> list:
    """Every message a consumer can pull from ``topic``/``queue_id`` now."""
    try:
        r = await pull(c, topic, queue_id, 0)
    except RemotingError:  # the connection of a previous broker run
        return []
    return decode_messages(r.body) if r.code == ResponseCode.SUCCESS else []


async def bodies(c: Cluster, topic: str) -> list[bytes]:
    return [m.body for m in await visible(c, topic)]


async def wait_bodies(c: Cluster, topic: str, want: list[bytes],
                      timeout: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (got := await bodies(c, topic)) != want:
        assert loop.time() < deadline, f"{topic}: {got} != {want}"
        await asyncio.sleep(0.1)


def producer(c: Cluster, group: str, script: Script) -> TransactionProducer:
    cc = c.client_config(group)
    cc.heartbeat_broker_interval = 500  # the broker learns the connection fast after a restart
    return TransactionProducer(group, listener=script, client_config=cc)


async def test_commit_and_rollback_at_send_time(cluster):
    c, topic = cluster, "TxEndNow"
    await c.create_topic(topic, 1)
    script = Script({b"commit": [COMMIT], b"rollback": [ROLLBACK]})
    async with producer(c, "pg_end_now", script) as p:
        r1 = await p.send_message_in_transaction(Message(topic, b"commit", tags="T"), "arg")
        r2 = await p.send_message_in_transaction(Message(topic, b"rollback"), "arg")
        assert r1.local_transaction_state is COMMIT and r2.local_transaction_state is ROLLBACK
        assert r1.message_queue.topic == topic and r1.offset_msg_id != r2.offset_msg_id
        await wait_bodies(c, topic, [b"commit"])
        await asyncio.sleep(2.5)  # several check rounds: nothing is asked, nothing appears
        assert await bodies(c, topic) == [b"commit"]
    assert script.executed == {b"commit": 1, b"rollback": 1}
    assert not script.checked
    (m,) = await visible(c, topic)
    assert m.tags == "T" and m.msg_id == r1.msg_id
    assert mc.transaction_type(m.sys_flag) == mc.TRANSACTION_COMMIT_TYPE
    assert m.prepared_transaction_offset == int(r1.offset_msg_id[-16:], 16)
    assert m.properties[mc.PROPERTY_PRODUCER_GROUP] == "pg_end_now"


async def test_unknown_then_check_commits_once(cluster):
    c, topic = cluster, "TxCheckCommit"
    await c.create_topic(topic, 1)
    script = Script({b"later": [UNKNOW, COMMIT]})
    async with producer(c, "pg_check_commit", script) as p:
        r = await p.send_message_in_transaction(Message(topic, b"later"), "arg")
        assert r.local_transaction_state is UNKNOW
        assert await bodies(c, topic) == []
        await wait_bodies(c, topic, [b"later"])
        await asyncio.sleep(2.0)  # later rounds find the op record: no second copy
        assert await bodies(c, topic) == [b"later"]
    assert script.checked == {b"later": 1}
    (checked,) = script.checked_msgs
    assert checked.topic == topic and checked.queue_id == 0
    assert checked.properties[mc.PROPERTY_TRANSACTION_CHECK_TIMES] == "1"
    assert checked.msg_id == r.msg_id  # the UNIQ_KEY of the send


async def test_unknown_then_check_rolls_back(cluster):
    c, topic = cluster, "TxCheckRollback"
    await c.create_topic(topic, 1)
    script = Script({b"never": [UNKNOW, ROLLBACK]})
    async with producer(c, "pg_check_rollback", script) as p:
        await p.send_message_in_transaction(Message(topic, b"never"), "arg")
        await wait_until(lambda: script.checked[b"never"] >= 1, 15.0, what="no check")
        await asyncio.sleep(2.0)
        assert await bodies(c, topic) == []
    assert script.checked == {b"never": 1}


async def test_undecided_goes_to_check_max_topic(cluster):
    c, topic = cluster, "TxUndecided"
    await c.create_topic(topic, 1)
    script = Script({b"undecided": [UNKNOW, UNKNOW]})
    async with producer(c, "pg_undecided", script) as p:
        r = await p.send_message_in_transaction(Message(topic, b"undecided", keys="K1"), "arg")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while not [m for m in await visible(c, TRANS_CHECK_MAX_TIME_TOPIC)
                   if m.body == b"undecided"]:
            assert loop.time() < deadline, "never discarded"
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.5)  # discarded means: no more checks
    assert script.checked == {b"undecided": CHECK_MAX}
    assert [m.properties[mc.PROPERTY_TRANSACTION_CHECK_TIMES] for m in script.checked_msgs] \
        == [str(n) for n in range(1, CHECK_MAX + 1)]
    (gone,) = [m for m in await visible(c, TRANS_CHECK_MAX_TIME_TOPIC) if m.body == b"undecided"]
    assert gone.properties[mc.PROPERTY_REAL_TOPIC] == topic
    assert gone.properties[mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == r.msg_id
    assert gone.properties[mc.PROPERTY_TRANSACTION_CHECK_TIMES] == str(CHECK_MAX)
    assert gone.keys == "K1"
    assert await bodies(c, topic) == []


@pytest.mark.timeout(90)
async def test_undecided_half_messages_survive_a_broker_restart(tmp_path):
    topic = "TxRestart"
    script = Script({b"a": [UNKNOW, UNKNOW, COMMIT], b"b": [UNKNOW, ROLLBACK]})
    c = Cluster(tmp_path, TX_CONF.replace("CheckMax=3", "CheckMax=10"))
    try:
        c.start_broker()
        await c.wait_routable()
        await c.create_topic(topic, 1)
        p = producer(c, "pg_restart", script)
        async with p:
            await p.send_message_in_transaction(Message(topic, b"a"), "arg")
            await p.send_message_in_transaction(Message(topic, b"b"), "arg")
            await wait_until(lambda: script.checked[b"a"] >= 1, 15.0, what="no first check")
            c.broker.stop()
            checks_before = script.checked[b"a"]
            c.start_broker()
            await wait_bodies(c, topic, [b"a"], timeout=30.0)
            await asyncio.sleep(2.0)
            assert await bodies(c, topic) == [b"a"]
        assert script.checked[b"a"] > checks_before
        assert script.checked[b"b"] >= 1  # a rollback sent while stopping is asked again
    finally:
        await c.close()
