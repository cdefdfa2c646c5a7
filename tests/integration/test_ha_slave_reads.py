"""What a slave answers, as 4.9.8's PullMessageProcessor does, for every store
status, with the settings that change it: one master and two slaves of
broker-a on loopback, slave 1 with the defaults, slave 2 with
slaveReadEnable, offsetCheckInSlave and accessMessageInMemoryMaxRatio=0 (so
every read counts as "consuming slowly").  The slaves start before their
master and synchronize its metadata as soon as a registration names it."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from pathlib import Path

import pytest

from rmq.client.codec import decode_messages
from rmq.client.headers import PULL_FLAG_SUBSCRIPTION, pull_header, send_header_v2
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.testing.cluster import broker_conf, start_namesrv
from rmq.testing.procs import RmqProcess, free_port
from rmq.testing.wait import wait_until
from tests.integration.test_ha import TOPIC, send_many

R = RequestCode
RC = ResponseCode
FLAG_COMMIT_OFFSET = 0x1
SLOW = ("slaveReadEnable=true\noffsetCheckInSlave=true\naccessMessageInMemoryMaxRatio=0\n"
        "registerNameServerPeriod=10000\n")


class Trio:
    """A name server, a master and two slaves; ``send`` as test_ha's Pair."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ns_port = free_port()
        self.namesrv = start_namesrv(tmp, self.ns_port)
        self.ports = [free_port(span=4) + 2 for _ in range(3)]
        self.mport = self.ports[0]
        self.procs = [
            self._proc(0, "brokerId=0\nbrokerRole=ASYNC_MASTER\n"),
            self._proc(1, "brokerId=1\nbrokerRole=SLAVE\nregisterNameServerPeriod=10000\n"),
            self._proc(2, "brokerId=2\nbrokerRole=SLAVE\n" + SLOW),
        ]
        self.client = RemotingClient()

    def _proc(self, i: int, extra: str) -> RmqProcess:
        home = self.tmp / f"node{i}"
        home.mkdir()
        conf = broker_conf(home, self.ports[i], extra)
        return RmqProcess("rmq.broker.startup", ["-c", conf, "-n", f"127.0.0.1:{self.ns_port}"],
                          home / "broker.out", env={"ROCKETMQ_HOME": str(home)})

    def start(self, i: int) -> None:
        self.procs[i].start(wait_for_port=self.ports[i])

    async def call(self, port: int, code: int, header=None, body=None) -> RemotingCommand:
        return await self.client.invoke(f"127.0.0.1:{port}",
                                        RemotingCommand.create_request(code, header, body), 5000)

    async def send(self, body: bytes, queue_id: int, timeout_ms: int = 5000) -> RemotingCommand:
        props = f"KEYS\x01k-{body.decode()}\x02TAGS\x01A\x02WAIT\x01true"
        header = send_header_v2("pg", TOPIC, "TBW102", 4, queue_id, 0, int(time.time() * 1000),
                                0, props, False, "broker-a")
        return await self.call(self.mport, R.SEND_MESSAGE_V2, header, body)

    async def pull(self, port: int, queue_id: int, offset: int, flag: int = 0,
                   commit: int = 0) -> RemotingCommand:
        return await self.call(port, R.PULL_MESSAGE, pull_header(
            "cg", TOPIC, queue_id, offset, 32, PULL_FLAG_SUBSCRIPTION | flag, commit, 0, "*", 0,
            "TAG", "broker-a"))

    def log(self, i: int) -> str:
        return (self.tmp / f"node{i}" / "logs" / "rocketmqlogs" / "broker.log").read_text()

    async def close(self) -> None:
        await self.client.close()
        for p in self.procs + [self.namesrv]:
            p.kill()


def log_time(line: str) -> float:
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def first_line(text: str, needle: str) -> str:
    return next(line for line in text.splitlines() if needle in line)


@pytest.mark.timeout(120)
async def test_slave_answers_every_status_as_4_9_8(tmp_path):
    t = Trio(tmp_path)
    try:
        t.start(1)
        t.start(2)
        t.start(0)
        header = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "4",
                  "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG"}
        r = await t.call(t.mport, R.UPDATE_AND_CREATE_TOPIC, header)
        assert r.code == RC.SUCCESS, r.remark
        await send_many(t, 0, 10)  # queues 0 and 1 hold 5 each; 2 and 3 stay empty
        for port in t.ports[1:]:  # replicated, and the topic synchronized
            deadline = time.monotonic() + 30
            while (r := await t.pull(port, 0, 0)).code != RC.SUCCESS or \
                    len(decode_messages(r.body)) < 5:
                assert time.monotonic() < deadline, (port, r.code, r.remark)
                await asyncio.sleep(0.3)

        # a registration that names a new master makes the slave sync at once
        # (well inside the 10 s period of the scheduled sync, with room for a loaded machine)
        for i in (1, 2):
            def synced_log(i: int = i) -> str | None:
                text = t.log(i)
                return text if "Update slave consumer offset from master" in text else None

            text = await wait_until(synced_log, 10, 0.2, f"slave {i} synced its consumer offsets")
            learned = first_line(text, f"the master of broker-a is now 127.0.0.1:{t.mport}")
            synced = first_line(text, "Update slave consumer offset from master")
            assert 0 <= log_time(synced) - log_time(learned) < 5.0, (learned, synced)

        def answer(r: RemotingCommand) -> tuple:
            return (r.code, r.remark, r.ext_fields["suggestWhichBrokerId"],
                    int(r.ext_fields["nextBeginOffset"]))

        plain, slow = t.ports[1], t.ports[2]
        # FOUND: served by both; slaveReadEnable + "slow" suggests whichBrokerWhenConsumeSlowly
        assert answer(await t.pull(plain, 0, 0))[:3] == (RC.SUCCESS, "FOUND", "0")
        assert answer(await t.pull(slow, 0, 0))[:3] == (RC.SUCCESS, "FOUND", "1")
        # OFFSET_OVERFLOW_ONE: nothing new yet
        for port in (plain, slow):
            assert answer(await t.pull(port, 0, 5)) == \
                (RC.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE", "0", 5)
        # OFFSET_OVERFLOW_BADLY: the slave corrects the offset only with offsetCheckInSlave
        assert answer(await t.pull(plain, 0, 50)) == \
            (RC.PULL_RETRY_IMMEDIATELY, "OFFSET_OVERFLOW_BADLY", "0", 50)
        assert answer(await t.pull(slow, 0, 50)) == \
            (RC.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY", "0", 0)
        # an empty queue: offset 0 is "not found", any other offset "moved" (or retried)
        for port in (plain, slow):
            code, remark, _, nxt = answer(await t.pull(port, 2, 0))
            assert (code, nxt) == (RC.PULL_NOT_FOUND, 0) and remark in (
                "NO_MATCHED_LOGIC_QUEUE", "NO_MESSAGE_IN_QUEUE")
        code, remark, suggest, nxt = answer(await t.pull(plain, 3, 7))
        assert (code, suggest, nxt) == (RC.PULL_RETRY_IMMEDIATELY, "0", 7)
        code, remark, suggest, nxt = answer(await t.pull(slow, 3, 7))
        assert (code, nxt) == (RC.PULL_OFFSET_MOVED, 0)

        # queries: by key (the slave's own index of what it replicated) and by offset
        key = "k-" + "m00003" * 40  # send_many's key: k- and the body
        for port in (plain, slow):
            r = await t.call(port, R.QUERY_MESSAGE, {
                "topic": TOPIC, "key": key, "maxNum": "32", "beginTimestamp": "0",
                "endTimestamp": str(int(time.time() * 1000) + 60_000)})
            assert r.code == RC.SUCCESS, (port, r.code, r.remark)
            found = decode_messages(r.body)
            assert [m.body[:6] for m in found] == [b"m00003"]
            r = await t.call(port, R.VIEW_MESSAGE_BY_ID, {"offset": str(found[0].commit_log_offset)})
            assert r.code == RC.SUCCESS and decode_messages(r.body)[0].keys == key

        # a slave never takes the commit offset a pull carries
        await t.pull(plain, 1, 0, FLAG_COMMIT_OFFSET, commit=4)
        r = await t.call(plain, R.QUERY_CONSUMER_OFFSET,
                         {"consumerGroup": "cg", "topic": TOPIC, "queueId": "1"})
        assert r.code != RC.SUCCESS or r.ext_fields["offset"] != "4"
    finally:
        await t.close()
