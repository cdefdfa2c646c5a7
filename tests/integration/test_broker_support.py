"""Helpers for broker integration tests: config files and real name servers."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rmq.common.codes import RequestCode
from rmq.remoting import RemotingClient, RemotingCommand
from tests.support.procs import RmqProcess, free_port

R = RequestCode


def start_namesrv(tmp_path: Path, port: int, extra: str = "") -> RmqProcess:
    conf = tmp_path / f"namesrv-{port}.conf"
    conf.write_text(f"listenPort={port}\nkvConfigPath={tmp_path}/kv-{port}.json\n{extra}")
    return RmqProcess("rmq.namesrv.startup", ["-c", str(conf)], tmp_path / f"ns-{port}.out",
                      env={"ROCKETMQ_HOME": str(tmp_path)}).start(wait_for_port=port)


def broker_conf(tmp_path: Path, port: int, extra: str = "", name: str = "broker-a",
                store: str = "store") -> str:
    conf = tmp_path / f"{name}-{port}.conf"
    conf.write_text(
        f"brokerName={name}\nlistenPort={port}\nbrokerIP1=127.0.0.1\nbrokerIP2=127.0.0.1\n"
        f"storePathRootDir={tmp_path / store}\nmappedFileSizeCommitLog=1048576\n"
        f"mappedFileSizeConsumeQueue=6000\nmaxHashSlotNum=1000\nmaxIndexNum=4000\n{extra}")
    return str(conf)


class Cluster:
    def __init__(self, tmp_path, extra: str = "") -> None:
        self.tmp = tmp_path
        self.ns_port = free_port()
        self.namesrv = start_namesrv(tmp_path, self.ns_port)
        self.port = free_port(span=4) + 2
        self.conf = broker_conf(tmp_path, self.port, extra)
        self.broker: RmqProcess | None = None
        self.client = RemotingClient()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start_broker(self) -> RmqProcess:
        self.broker = RmqProcess(
            "rmq.broker.startup", ["-c", self.conf, "-n", f"127.0.0.1:{self.ns_port}"],
            self.tmp / "broker.out", env={"ROCKETMQ_HOME": str(self.tmp)})
        self.broker.start(wait_for_port=(self.port, self.port - 2))  # main and fast port
        return self.broker

    async def call(self, code: int, header=None, body=None, addr=None) -> RemotingCommand:
        return await self.client.invoke(addr or self.addr,
                                        RemotingCommand.create_request(code, header, body), 5000)

    async def route(self, topic: str) -> RemotingCommand:
        return await self.call(R.GET_ROUTEINFO_BY_TOPIC, {"topic": topic},
                               addr=f"127.0.0.1:{self.ns_port}")

    async def wait_registered(self, timeout: float = 15.0) -> None:
        """Until the name server routes the broker's own topic (the port opens
        before the first registration is done)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (await self.route("broker-a")).code != 0:
            assert loop.time() < deadline, "the broker never registered"
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        await self.client.close()
        if self.broker is not None:
            self.broker.kill()
        self.namesrv.kill()


async def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.1)
