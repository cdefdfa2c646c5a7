"""The one name server + broker launcher of the tests and benchmarks: real
``rmq-namesrv`` and ``rmq-broker`` processes on free loopback ports, their
configuration files written under a temporary directory, the broker
restartable, raw remoting calls to either."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rmq.client import ClientConfig
from rmq.common.codes import RequestCode
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.testing.procs import RmqProcess, free_port

R = RequestCode


def start_namesrv(tmp_path: Path, port: int, extra: str = "", env: dict | None = None,
                  cpus: set[int] | None = None, timeout: float = 30.0) -> RmqProcess:
    """An rmq-namesrv on ``port`` (``extra`` lines go into its config), listening on return."""
    conf = tmp_path / f"namesrv-{port}.conf"
    conf.write_text(f"listenPort={port}\nkvConfigPath={tmp_path}/kv-{port}.json\n{extra}")
    return RmqProcess("rmq.namesrv.startup", ["-c", str(conf)], tmp_path / f"ns-{port}.out",
                      env={"ROCKETMQ_HOME": str(tmp_path), **(env or {})},
                      cpus=cpus).start(wait_for_port=port, timeout=timeout)


# the file sizes of a test broker: a few MiB of disk instead of the 1 GiB
# commit-log files and 45 MB index files of the defaults
SMALL_FILES = ("mappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\n"
               "maxHashSlotNum=1000\nmaxIndexNum=4000\n")


def broker_conf(tmp_path: Path, port: int, extra: str = "", name: str = "broker-a",
                store: str = "store", small_files: bool = True) -> str:
    """A broker.conf with loopback addresses, small files (``small_files``;
    else the defaults a benchmark measures) and ``extra`` lines last (they
    override); its path."""
    conf = tmp_path / f"{name}-{port}.conf"
    conf.write_text(
        f"brokerName={name}\nlistenPort={port}\nbrokerIP1=127.0.0.1\nbrokerIP2=127.0.0.1\n"
        f"storePathRootDir={tmp_path / store}\n{SMALL_FILES if small_files else ''}{extra}")
    return str(conf)


def lane_broker(tmp_path: Path, port: int, mode: str, extra: str) -> RmqProcess:
    """A started broker for a lane comparison (``mode``: "lane" compiled,
    "twin" with ``RMQ_NO_EXTENSIONS=1``, "general" with ``extra`` turning the
    lane off), its own store and ROCKETMQ_HOME under ``tmp_path``."""
    conf = broker_conf(tmp_path, port, extra, store=mode)
    env = {"ROCKETMQ_HOME": str(tmp_path / f"home-{mode}")}
    if mode == "twin":
        env["RMQ_NO_EXTENSIONS"] = "1"
    proc = RmqProcess("rmq.broker.startup", ["-c", conf], tmp_path / f"broker-{mode}.out",
                      env=env)
    proc.start(wait_for_port=port)
    return proc


class Cluster:
    """rmq-namesrv + rmq-broker (``extra`` lines go into broker.conf).

    ``share_namesrv`` makes this a second broker (``broker_name``, its own store)
    registering with another cluster's name server, which that cluster owns.
    The broker is started by ``start_broker`` (again after a stop or a kill).
    ``cpus`` pins both processes; ``small_files=False`` keeps the default file
    sizes (benchmarks); ``store`` names the store directory under ``tmp_path``."""

    def __init__(self, tmp_path: Path, extra: str = "", env: dict | None = None,
                 broker_name: str = "broker-a",
                 share_namesrv: Cluster | None = None, *, cluster_name: str = "DefaultCluster",
                 store: str | None = None, small_files: bool = True,
                 cpus: set[int] | None = None, namesrv_extra: str = "",
                 timeout: float = 30.0) -> None:
        self.tmp = tmp_path
        self.broker_name = broker_name
        self.cpus = cpus
        home = tmp_path if share_namesrv is None else tmp_path / broker_name  # own logs
        home.mkdir(parents=True, exist_ok=True)
        self.env = {"ROCKETMQ_HOME": str(home), **(env or {})}
        if share_namesrv is None:
            self.ns_port = free_port()
            self.namesrv: RmqProcess | None = start_namesrv(
                tmp_path, self.ns_port, namesrv_extra, self.env, cpus, timeout)
        else:
            self.ns_port = share_namesrv.ns_port
            self.namesrv = None
        self.port = free_port(span=4) + 2  # fast port = listenPort - 2, HA = + 1
        self.store_dir = tmp_path / (store or f"store-{broker_name}")
        self.conf = broker_conf(tmp_path, self.port, f"brokerClusterName={cluster_name}\n" + extra,
                                name=broker_name, store=self.store_dir.name,
                                small_files=small_files)
        self.broker: RmqProcess | None = None
        self.grpc_port: int | None = None  # set by whoever puts grpcServerPort in extra
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

    @property
    def broker_addr(self) -> str:
        return self.addr

    def start_broker(self, timeout: float = 30.0) -> RmqProcess:
        """Start the broker; returns once its main and fast ports accept."""
        self._runs += 1
        self.broker = RmqProcess(
            "rmq.broker.startup", ["-c", self.conf, "-n", self.namesrv_addr],
            self.tmp / f"{self.broker_name}-{self._runs}.out", env=self.env, cpus=self.cpus)
        self.broker.start(wait_for_port=(self.port, self.port - 2), timeout=timeout)
        return self.broker

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the broker, then the name server: SIGTERM, SIGKILL after ``timeout``."""
        for proc in (self.broker, self.namesrv):
            if proc is not None:
                proc.stop(timeout=timeout)

    async def route(self, topic: str) -> RemotingCommand:
        """GET_ROUTEINFO_BY_TOPIC at the name server."""
        return await self.client.invoke(
            self.namesrv_addr,
            RemotingCommand.create_request(R.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 3000)

    async def wait_routable(self, topic: str = "TBW102", timeout: float = 15.0) -> None:
        """Until the name server routes ``topic`` to this broker."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            resp = await self.route(topic)
            if resp.code == 0 and str(self.port) in bytes(resp.body or b"").decode():
                return
            assert loop.time() < deadline, f"{topic} never routed: {resp.remark}"
            await asyncio.sleep(0.05)

    async def wait_registered(self, timeout: float = 40.0) -> None:
        """Until the broker's first registration is done (its port opens a
        moment before): the name server routes the broker's own topic.  The
        timeout covers one re-registration period (30 s): a first registration
        lost on a loaded machine is made again by the next one."""
        await self.wait_routable(self.broker_name, timeout)

    async def create_topic(self, topic: str, queues: int = 4, perm: int = 6) -> None:
        """UPDATE_AND_CREATE_TOPIC on this broker, then wait for the route."""
        r = await self.call(R.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
            "writeQueueNums": str(queues), "perm": str(perm), "topicFilterType": "SINGLE_TAG"})
        assert r.code == 0, r.remark
        await self.wait_routable(topic)

    async def call(self, code: int, header=None, body=None, timeout_ms: int = 5000,
                   version: int | None = None, addr: str | None = None) -> RemotingCommand:
        """One request to the broker (or to ``addr``)."""
        request = RemotingCommand.create_request(code, header, body)
        if version is not None:
            request.version = version
        return await self.client.invoke(addr or self.addr, request, timeout_ms)

    async def close(self) -> None:
        await self.client.close()
        if self.broker is not None:
            self.broker.kill()
        if self.namesrv is not None:
            self.namesrv.kill()
