"""HA replication with real processes: a name server, a master and a slave of
broker-a on loopback.  The slave learns the master's HA address (listenPort + 1)
from its registration, or is given it with haMasterAddress."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from rmq.client.codec import decode_messages
from rmq.client.headers import PULL_FLAG_SUBSCRIPTION, pull_header, send_header_v2
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.remoting.exceptions import RemotingError
from rmq.testing.cluster import broker_conf, start_namesrv
from rmq.testing.procs import RmqProcess, free_port

R = RequestCode
RC = ResponseCode
TOPIC = "TopicHA"
QUEUES = 2
# small files so the pair rolls commit-log and consume-queue files; the stores
# are compared from file 0, so a disk above diskSpaceCleanForciblyRatio (a busy
# machine's /tmp) must not have the cleaner delete the oldest file first
FILES = ("mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=2000\n"
         "cleanFileForciblyEnable=false\n")


class Pair:
    """Master and slave processes of one broker name, their stores and a client."""

    def __init__(self, tmp: Path, master_extra: str, slave_extra: str, namesrv: bool = True) -> None:
        self.tmp = tmp
        self.ns_port = free_port() if namesrv else None
        self.namesrv = start_namesrv(tmp, self.ns_port) if namesrv else None
        self.mport = free_port(span=4) + 2
        self.sport = free_port(span=4) + 2
        self.master = self._proc(self.mport, "brokerId=0\n" + master_extra, "store-m")
        self.slave = self._proc(self.sport, "brokerId=1\nbrokerRole=SLAVE\n" + slave_extra
                                .replace("MASTER_HA", f"127.0.0.1:{self.mport + 1}"), "store-s")
        self.client = RemotingClient()

    def _proc(self, port: int, extra: str, store: str) -> RmqProcess:
        (self.tmp / store).mkdir(exist_ok=True)
        conf = broker_conf(self.tmp, port, FILES + extra, store=store)
        text = Path(conf).read_text().replace("mappedFileSizeCommitLog=1048576\n", "")
        text = text.replace("mappedFileSizeConsumeQueue=6000\n", "")
        Path(conf).write_text(text)
        args = ["-c", conf] + (["-n", f"127.0.0.1:{self.ns_port}"] if self.ns_port else [])
        return RmqProcess("rmq.broker.startup", args, self.tmp / f"{store}.out",
                          env={"ROCKETMQ_HOME": str(self.tmp / store)})

    def start(self, proc: RmqProcess) -> None:
        proc.start(wait_for_port=self.mport if proc is self.master else self.sport)

    async def call(self, port: int, code: int, header=None, body=None,
                   timeout_ms: int = 5000) -> RemotingCommand:
        return await self.client.invoke(f"127.0.0.1:{port}",
                                        RemotingCommand.create_request(code, header, body),
                                        timeout_ms)

    async def send(self, body: bytes, queue_id: int, timeout_ms: int = 5000) -> RemotingCommand:
        props = f"KEYS\x01k-{body.decode()}\x02TAGS\x01A\x02WAIT\x01true"
        header = send_header_v2("pg", TOPIC, "TBW102", QUEUES, queue_id, 0,
                                int(time.time() * 1000), 0, props, False, "broker-a")
        return await self.call(self.mport, R.SEND_MESSAGE_V2, header, body, timeout_ms)

    async def wait_ready(self, port: int, timeout: float = 10.0) -> None:
        """Until a request to a (re)started broker gets through (a connection to
        the previous process is dropped on its first use)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                await self.max_offset(port)
                return
            except RemotingError:
                assert time.monotonic() < deadline, "the broker never answered"
                await asyncio.sleep(0.1)

    async def create_topic(self) -> None:
        header = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES),
                  "writeQueueNums": str(QUEUES), "perm": "6", "topicFilterType": "SINGLE_TAG"}
        r = await self.call(self.mport, R.UPDATE_AND_CREATE_TOPIC, header)
        assert r.code == RC.SUCCESS, r.remark

    async def max_offset(self, port: int) -> int:
        r = await self.call(port, R.GET_BROKER_RUNTIME_INFO)
        assert r.code == RC.SUCCESS, r.remark
        return int(fastjson.loads(bytes(r.body))["table"]["commitLogMaxOffset"])

    async def wait_caught_up(self, timeout: float = 20.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            m = await self.max_offset(self.mport)
            if m > 0 and await self.max_offset(self.sport) == m:
                return m
            assert time.monotonic() < deadline, "the slave never caught up"
            await asyncio.sleep(0.1)

    async def close(self) -> None:
        await self.client.close()
        for p in (self.slave, self.master, self.namesrv):
            if p is not None:
                p.kill()


def read_tree(root: Path, sub: str, length: dict[str, int] | None = None) -> dict[str, bytes]:
    """Every file under root/sub, by relative path, cut to ``length[path]`` when given."""
    out = {}
    for path in sorted((root / sub).rglob("*")):
        if path.is_file():
            rel = str(path.relative_to(root))
            data = path.read_bytes()
            out[rel] = data[: length[rel]] if length and rel in length else data
    return out


def commit_log_bytes(store: Path, upto: int) -> bytes:
    """The commit log as one byte string up to ``upto`` (files are contiguous)."""
    files = sorted((store / "commitlog").iterdir())
    data = b"".join(f.read_bytes() for f in files)
    first = int(files[0].name)
    assert first == 0, f"{store.name}: the commit log starts at {first}"
    return data[:upto]


def consume_queues(store: Path) -> dict[str, bytes]:
    """Consume-queue files with the unwritten (zero) tail dropped."""
    out = {}
    for rel, data in read_tree(store, "consumequeue").items():
        out[rel] = data.rstrip(b"\0")
    return out


def assert_same_store(tmp: Path, upto: int) -> None:
    m, s = tmp / "store-m", tmp / "store-s"
    assert commit_log_bytes(s, upto) == commit_log_bytes(m, upto)
    assert consume_queues(s) == consume_queues(m)


async def send_many(pair: Pair, start: int, count: int) -> None:
    for i in range(start, start + count):
        r = await pair.send(f"m{i:05d}".encode() * 40, i % QUEUES)
        assert r.code == RC.SUCCESS, (r.code, r.remark)


@pytest.mark.timeout(90)
async def test_async_master_slave_replicates_and_resumes(tmp_path):
    pair = Pair(tmp_path, "brokerRole=ASYNC_MASTER\n", "slaveReadEnable=true\n")
    try:
        pair.start(pair.master)
        pair.start(pair.slave)
        await pair.create_topic()
        # a slave's first connection is served from the start of the master's
        # last commit-log file (4.9.8's HAConnection): caught up on the first
        # message, it holds the whole log
        await send_many(pair, 0, 1)
        await pair.wait_caught_up()
        await send_many(pair, 1, 299)  # ~ 160 KiB: three commit-log files
        upto = await pair.wait_caught_up()
        assert upto > 2 * 65536
        assert_same_store(tmp_path, upto)

        # with slaveReadEnable the slave serves pulls of what it replicated
        # (the topic reaches it through SlaveSynchronize)
        deadline = time.monotonic() + 20
        while True:
            r = await pair.call(pair.sport, R.PULL_MESSAGE, pull_header(
                "cg", TOPIC, 1, 0, 32, PULL_FLAG_SUBSCRIPTION, 0, 0, "*", 0, "TAG", "broker-a"))
            if r.code == RC.SUCCESS:
                break
            assert time.monotonic() < deadline, (r.code, r.remark)
            await asyncio.sleep(0.3)
        got = decode_messages(r.body)
        assert [m.body for m in got][:3] == [f"m{i:05d}".encode() * 40 for i in (1, 3, 5)]

        # slave restart: resumes from its own max offset
        held = await pair.max_offset(pair.sport)
        pair.slave.stop()
        await send_many(pair, 300, 50)
        pair.start(pair.slave)
        await pair.wait_ready(pair.sport)
        upto = await pair.wait_caught_up()
        assert_same_store(tmp_path, upto)
        store_log = tmp_path / "store-m" / "logs" / "rocketmqlogs" / "store.log"
        assert f"request offset {held}\n" in store_log.read_text()

        # master restart: the slave reconnects and carries on
        pair.master.stop()
        pair.start(pair.master)
        await pair.wait_ready(pair.mport)
        await send_many(pair, 350, 50)
        upto = await pair.wait_caught_up()
        assert_same_store(tmp_path, upto)
    finally:
        await pair.close()


@pytest.mark.timeout(60)
async def test_sync_master_waits_for_the_slave(tmp_path):
    pair = Pair(tmp_path, "brokerRole=SYNC_MASTER\nslaveTimeout=1500\n",
                "haMasterAddress=MASTER_HA\n", namesrv=False)
    try:
        pair.start(pair.master)
        await pair.create_topic()
        # no slave connected yet: stored, but answered SLAVE_NOT_AVAILABLE
        r = await pair.send(b"alone", 0)
        assert r.code == RC.SLAVE_NOT_AVAILABLE
        pair.start(pair.slave)
        deadline = time.monotonic() + 20
        while (r := await pair.send(b"first", 0)).code != RC.SUCCESS:
            assert r.code == RC.SLAVE_NOT_AVAILABLE, (r.code, r.remark)
            assert time.monotonic() < deadline, "the slave never connected"
            await asyncio.sleep(0.2)
        for i in range(20):
            r = await pair.send(f"sync{i}".encode(), i % QUEUES)
            assert r.code == RC.SUCCESS, (r.code, r.remark)
            # answered only once the slave holds the message
            assert await pair.max_offset(pair.sport) >= await pair.max_offset(pair.mport)

        # connected but not acknowledging: FLUSH_SLAVE_TIMEOUT after slaveTimeout
        os.kill(pair.slave.pid, signal.SIGSTOP)
        try:
            began = time.monotonic()
            r = await pair.send(b"late", 0)
            assert r.code == RC.FLUSH_SLAVE_TIMEOUT, (r.code, r.remark)
            assert time.monotonic() - began >= 1.4
        finally:
            os.kill(pair.slave.pid, signal.SIGCONT)
        upto = await pair.wait_caught_up()
        assert_same_store(tmp_path, upto)

        # slave gone: SLAVE_NOT_AVAILABLE at once
        pair.slave.stop()
        deadline = time.monotonic() + 10
        while (r := await pair.send(b"gone", 1)).code == RC.SUCCESS:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
        assert r.code == RC.SLAVE_NOT_AVAILABLE, (r.code, r.remark)
    finally:
        await pair.close()


async def pull_all(pair: Pair, port: int, queue_id: int, group: str = "cg") -> tuple[list, RemotingCommand]:
    """Every message of one queue pulled from ``port``, and the last response's header."""
    got, offset = [], 0
    while True:
        r = await pair.call(port, R.PULL_MESSAGE, pull_header(
            group, TOPIC, queue_id, offset, 32, PULL_FLAG_SUBSCRIPTION, 0, 0, "*", 0, "TAG",
            "broker-a"))
        if r.code != RC.SUCCESS:
            return got, r
        got.extend(decode_messages(r.body))
        offset = int(r.ext_fields["nextBeginOffset"])


@pytest.mark.timeout(90)
@pytest.mark.parametrize("slave_read", [False, True])
async def test_slave_serves_pulls_after_the_master_dies(tmp_path, slave_read):
    """2m-2s-sync defaults: the master is SIGKILLed and the slave still answers
    every pull with the messages it holds (4.9.8: the status switch overrides the
    slave's PULL_RETRY_IMMEDIATELY); slaveReadEnable only changes the suggested
    broker id."""
    extra = "slaveReadEnable=true\n" if slave_read else ""
    pair = Pair(tmp_path, "brokerRole=SYNC_MASTER\n" + extra, extra)
    try:
        pair.start(pair.master)
        pair.start(pair.slave)
        await pair.create_topic()
        deadline = time.monotonic() + 20
        sent = [b"first"]
        while (r := await pair.send(b"first", 0)).code != RC.SUCCESS:
            # as in 4.9.8, SLAVE_NOT_AVAILABLE comes after the master stored the
            # message: each refused try is in the log the slave copies
            assert r.code == RC.SLAVE_NOT_AVAILABLE, (r.code, r.remark)
            assert time.monotonic() < deadline, "the slave never connected"
            sent.append(b"first")
            await asyncio.sleep(0.2)
        for i in range(40):
            body = f"sync{i}".encode()
            r = await pair.send(body, 0)
            assert r.code == RC.SUCCESS, (r.code, r.remark)
            sent.append(body)
        # the topic reaches the slave through SlaveSynchronize
        deadline = time.monotonic() + 30
        while (r := await pair.call(pair.sport, R.PULL_MESSAGE, pull_header(
                "cg", TOPIC, 0, 0, 1, PULL_FLAG_SUBSCRIPTION, 0, 0, "*", 0, "TAG",
                "broker-a"))).code == RC.TOPIC_NOT_EXIST:
            assert time.monotonic() < deadline, "the topic never reached the slave"
            await asyncio.sleep(0.3)
        pair.master.kill()

        got, last = await pull_all(pair, pair.sport, 0)
        assert [m.body for m in got] == sent
        assert last.code == RC.PULL_NOT_FOUND, (last.code, last.remark)
        # without slaveReadEnable the client is sent back to the master (id 0);
        # with it, to the group's brokerId (0 by default)
        assert last.ext_fields["suggestWhichBrokerId"] == "0"
        empty, r = await pull_all(pair, pair.sport, 1)
        assert empty == [] and r.code == RC.PULL_NOT_FOUND
    finally:
        await pair.close()
