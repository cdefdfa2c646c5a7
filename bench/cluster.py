"""A throw-away name server + broker for a benchmark: ``rmq.testing``'s launcher
with the default file sizes, a fresh store under bench/out that is removed when
it stops, optionally pinned to the broker's core."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.cpu import BROKER_CPUS, can_pin
from bench.modes import OUT_DIR, mode_env
from rmq.testing.cluster import Cluster as Launcher
from rmq.testing.procs import RmqProcess


@dataclass
class Cluster:
    """One ``rmq-namesrv`` and one ``rmq-broker`` on free loopback ports with a
    fresh store; ``broker_conf`` adds/overrides broker properties
    (e.g. ``{"flushDiskType": "SYNC_FLUSH"}``); ``pin`` restricts both
    processes (every thread they start) to ``BROKER_CPUS`` when ``can_pin()``."""

    env: dict[str, str] = field(default_factory=lambda: mode_env("compiled"))
    broker_conf: dict[str, str] = field(default_factory=dict)
    workdir: Path | None = None
    keep: bool = False
    namesrv: RmqProcess | None = None
    broker: RmqProcess | None = None
    ns_port: int = 0
    port: int = 0
    broker_start_s: float = 0.0  # process start until its port answers (store load + recovery)
    pin: bool = False
    pinned: bool = False  # pin was asked for and the machine allowed it
    _launcher: Launcher | None = field(default=None, repr=False)

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def broker_pid(self) -> int:
        assert self.broker is not None
        return self.broker.pid

    @property
    def store_dir(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "store"

    def start(self, timeout: float = 60.0) -> Cluster:
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="cluster-", dir=OUT_DIR))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.pinned = self.pin and can_pin()
        props = {"storePathCommitLog": str(self.store_dir / "commitlog"), **self.broker_conf}
        self._launcher = Launcher(
            self.workdir, "".join(f"{k}={v}\n" for k, v in props.items()), env=self.env,
            broker_name="broker-bench", cluster_name="BenchCluster", store="store",
            small_files=False, cpus=set(BROKER_CPUS) if self.pinned else None,
            namesrv_extra="bindAddress=127.0.0.1\n", timeout=timeout)
        self.namesrv, self.ns_port, self.port = (self._launcher.namesrv, self._launcher.ns_port,
                                                 self._launcher.port)
        t0 = time.monotonic()
        try:
            self.broker = self._launcher.start_broker(timeout)
            self.broker_start_s = time.monotonic() - t0
        except Exception:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop both processes (SIGTERM, SIGKILL after a grace) and drop the store."""
        if self._launcher is not None:
            self._launcher.stop(timeout=30)
        if self.workdir is not None and not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


async def create_topic(broker_addr: str, namesrv_addr: str, topic: str, queues: int = 8,
                       timeout: float = 60.0) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker, then wait until the name server
    routes it (consumers find their queues through the route)."""
    from rmq.common.codes import RequestCode
    from rmq.remoting import RemotingClient, RemotingCommand

    client = RemotingClient()
    try:
        header = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
                  "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
                  "topicSysFlag": "0", "order": "false"}
        resp = await client.invoke(broker_addr, RemotingCommand.create_request(
            RequestCode.UPDATE_AND_CREATE_TOPIC, header), 10_000)
        if resp.code != 0:
            raise RuntimeError(f"creating topic {topic} failed: {resp.code} {resp.remark}")
        deadline = time.monotonic() + timeout
        while True:
            route = await client.invoke(namesrv_addr, RemotingCommand.create_request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 10_000)
            if route.code == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the name server does not route {topic} after {timeout:g} s")
            await asyncio.sleep(0.2)
    finally:
        await client.close()
