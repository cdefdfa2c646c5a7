"""SlaveSynchronize with a real master + slave pair (same brokerName, brokerId 0 and 1):
the slave copies topics (from the master's fast port), consumer offsets, delay
offsets and subscription groups, first 3 s after its start, then every 10 s."""

from __future__ import annotations

import time

import pytest

from rmq.client.headers import send_header_v2
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.testing.cluster import broker_conf, start_namesrv
from rmq.testing.procs import RmqProcess, free_port
from rmq.testing.wait import wait_until

R = RequestCode


class Pair:
    def __init__(self, tmp_path) -> None:
        self.tmp = tmp_path
        self.ns_port = free_port()
        self.namesrv = start_namesrv(tmp_path, self.ns_port)
        self.master_port = free_port(span=4) + 2
        self.slave_port = free_port(span=4) + 2
        self.client = RemotingClient()
        self.procs: list[RmqProcess] = []

    def start(self, port: int, extra: str, store: str) -> None:
        conf = broker_conf(self.tmp, port, extra, store=store)
        proc = RmqProcess("rmq.broker.startup", ["-c", conf, "-n", f"127.0.0.1:{self.ns_port}"],
                          self.tmp / f"{store}.out", env={"ROCKETMQ_HOME": str(self.tmp / store)})
        (self.tmp / store).mkdir(exist_ok=True)
        self.procs.append(proc.start(wait_for_port=port))

    async def call(self, port: int, code: int, header=None, body=None) -> RemotingCommand:
        return await self.client.invoke(f"127.0.0.1:{port}",
                                        RemotingCommand.create_request(code, header, body), 5000)

    async def json(self, port: int, code: int):
        r = await self.call(port, code)
        assert r.code == ResponseCode.SUCCESS, r.remark
        return fastjson.loads(bytes(r.body))

    async def close(self) -> None:
        await self.client.close()
        for p in self.procs:
            p.kill()
        self.namesrv.kill()




@pytest.mark.timeout(120)
async def test_slave_copies_master_metadata(tmp_path):
    pair = Pair(tmp_path)
    m, s = pair.master_port, pair.slave_port
    try:
        pair.start(m, "brokerRole=ASYNC_MASTER\nflushDelayOffsetInterval=500\n"
                      "messageDelayLevel=1s 2s\n", "store-m")
        create = {"topic": "TopicS", "defaultTopic": "TBW102", "readQueueNums": "2",
                  "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG"}
        assert (await pair.call(m, R.UPDATE_AND_CREATE_TOPIC, create)).code == 0
        group = fastjson.dumps({"groupName": "cgS", "retryMaxTimes": 5})
        assert (await pair.call(m, R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group)).code == 0
        offset = {"consumerGroup": "cgS", "topic": "TopicS", "queueId": "1", "commitOffset": "7"}
        assert (await pair.call(m, R.UPDATE_CONSUMER_OFFSET, offset)).code == 0
        ext = send_header_v2("pg", "TopicS", "TBW102", 2, 0, 0, int(time.time() * 1000), 0,
                             "DELAY\x012\x02", False, "broker-a")
        assert (await pair.call(m, R.SEND_MESSAGE_V2, ext, b"later")).code == 0

        async def master_has_delay_offsets() -> bool:
            return (await pair.call(m, R.GET_ALL_DELAY_OFFSET)).code == 0
        # the first delayOffset.json is written 10 s after the schedule service starts (as 4.9.8),
        # which is after the port opens: leave room for a slow start
        await wait_until(master_has_delay_offsets, 25, 0.2)

        pair.start(s, "brokerRole=SLAVE\nbrokerId=1\n", "store-s")

        async def in_sync() -> bool:
            master_topics = await pair.json(m, R.GET_ALL_TOPIC_CONFIG)
            slave_topics = await pair.json(s, R.GET_ALL_TOPIC_CONFIG)
            assert slave_topics == master_topics
            assert "TopicS" in slave_topics["topicConfigTable"]
            groups = await pair.json(s, R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            assert groups == await pair.json(m, R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            assert groups["subscriptionGroupTable"]["cgS"]["retryMaxTimes"] == 5
            offsets = await pair.json(s, R.GET_ALL_CONSUMER_OFFSET)
            assert offsets["offsetTable"]["TopicS@cgS"] == {"1": 7}
            delay = (tmp_path / "store-s" / "config" / "delayOffset.json").read_text()
            return "offsetTable" in delay
        await wait_until(in_sync, 15, 0.2)

        # later changes on the master reach the slave at the next round (10 s)
        assert (await pair.call(m, R.UPDATE_CONSUMER_OFFSET, dict(offset, commitOffset="9"))
                ).code == 0
        assert (await pair.call(m, R.UPDATE_AND_CREATE_TOPIC, dict(create, topic="TopicS2"))
                ).code == 0

        async def next_round() -> bool:
            offsets = await pair.json(s, R.GET_ALL_CONSUMER_OFFSET)
            assert offsets["offsetTable"]["TopicS@cgS"] == {"1": 9}
            topics = await pair.json(s, R.GET_ALL_TOPIC_CONFIG)
            return "TopicS2" in topics["topicConfigTable"]
        await wait_until(next_round, 20, 0.2)
        # the slave itself still refuses metadata writes
        refused = await pair.call(s, R.UPDATE_AND_CREATE_TOPIC, dict(create, topic="TopicS3"))
        assert refused.code == 1 and "slave" in refused.remark
    finally:
        await pair.close()
