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


class MessagingCluster:
    """rmq-namesrv + rmq-broker (``extra`` lines go into broker.conf)."""

    def __init__(self, tmp_path: Path, extra: str = "", env: dict | None = None) -> None:
        self.tmp = tmp_path
        self.ns_port = free_port()
        self.namesrv = start_namesrv(tmp_path, self.ns_port)
        self.port = free_port(span=4) + 2
        self.conf = broker_conf(tmp_path, self.port, "brokerClusterName=DefaultCluster\n" + extra)
        self.env = {"ROCKETMQ_HOME": str(tmp_path), **(env or {})}
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
            self.tmp / f"broker-{self._runs}.out", env=self.env)
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
        self.namesrv.kill()
