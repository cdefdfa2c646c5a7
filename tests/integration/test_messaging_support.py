"""Helpers for the messaging integration tests: a name server and a broker as
real processes on free loopback ports, restartable, with raw remoting calls."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rmq.client import ClientConfig
from rmq.common.codes import RequestCode
from rmq.remoting import RemotingClient, RemotingCommand
from tests.integration.test_broker_support import broker_conf, start_namesrv
from tests.support.procs import RmqProcess, free_port

R = RequestCode


async def wait_until(predicate, timeout: float, step: float = 0.05, what: str = "") -> None:
    """Poll ``predicate`` until true; fails the test after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, f"condition not reached in {timeout} s {what}"
        await asyncio.sleep(step)


class MessagingCluster:
    """rmq-namesrv + rmq-broker (``extra`` lines go into broker.conf).

    ``share_namesrv`` makes this a second broker (``broker_name``, its own store)
    registering with another cluster's name server, which that cluster owns."""

    def __init__(self, tmp_path: Path, extra: str = "", env: dict | None = None,
                 broker_name: str = "broker-a",
                 share_namesrv: MessagingCluster | None = None) -> None:
        self.tmp = tmp_path
        self.broker_name = broker_name
        if share_namesrv is None:
            self.ns_port = free_port()
            self.namesrv: RmqProcess | None = start_namesrv(tmp_path, self.ns_port)
        else:
            self.ns_port = share_namesrv.ns_port
            self.namesrv = None
        self.port = free_port(span=4) + 2
        self.conf = broker_conf(tmp_path, self.port, "brokerClusterName=DefaultCluster\n" + extra,
                                name=broker_name, store=f"store-{broker_name}")
        home = tmp_path if share_namesrv is None else tmp_path / broker_name  # own logs
        home.mkdir(exist_ok=True)
        self.env = {"ROCKETMQ_HOME": str(home), **(env or {})}
        self.broker: RmqProcess | None = None
        self.client = RemotingClient()
        self._runs = 0

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    def client_config(self, instance: str = "DEFAULT") -> ClientConfig:
        return ClientConfig(namesrv_addr=self.namesrv_addr, client_ip="127.0.0.1",
                            instance_name=instance)

    def start_broker(self) -> RmqProcess:
        self._runs += 1
        self.broker = RmqProcess(
            "rmq.broker.startup", ["-c", self.conf, "-n", self.namesrv_addr],
            self.tmp / f"{self.broker_name}-{self._runs}.out", env=self.env)
        self.broker.start(wait_for_port=self.port)
        return self.broker

    async def wait_routable(self, topic: str = "TBW102", timeout: float = 15.0) -> None:
        """Until the name server routes ``topic`` to this broker."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            resp = await self.client.invoke(
                self.namesrv_addr,
                RemotingCommand.create_request(R.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 3000)
            if resp.code == 0 and str(self.port) in bytes(resp.body or b"").decode():
                return
            assert loop.time() < deadline, f"{topic} never routed: {resp.remark}"
            await asyncio.sleep(0.1)

    async def create_topic(self, topic: str, queues: int = 4, perm: int = 6) -> None:
        """UPDATE_AND_CREATE_TOPIC on this broker, then wait for the route."""
        r = await self.call(R.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
            "writeQueueNums": str(queues), "perm": str(perm), "topicFilterType": "SINGLE_TAG"})
        assert r.code == 0, r.remark
        await self.wait_routable(topic)

    async def call(self, code: int, header=None, body=None, timeout_ms: int = 5000,
                   version: int | None = None) -> RemotingCommand:
        request = RemotingCommand.create_request(code, header, body)
        if version is not None:
            request.version = version
        return await self.client.invoke(self.addr, request, timeout_ms)

    async def close(self) -> None:
        await self.client.close()
        if self.broker is not None:
            self.broker.kill()
        if self.namesrv is not None:
            self.namesrv.kill()
