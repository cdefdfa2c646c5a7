"""A full disk with a real broker: the store on a small tmpfs the test mounts
(root only; CI runs as root).  Puts are refused with 4.9.8's answers, reads go
on, the process lives, writes resume once there is room, and every SEND_OK
message survives kill -9."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest

from rmq.client.codec import decode_messages
from rmq.client.headers import PULL_FLAG_SUBSCRIPTION, pull_header, send_header_v2
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.remoting.exceptions import RemotingError
from rmq.testing.cluster import broker_conf
from rmq.testing.procs import RmqProcess, free_port

R = RequestCode
RC = ResponseCode
TOPIC = "TopicFull"
BODY = 64 * 1024
REFUSALS = {RC.SERVICE_NOT_AVAILABLE, RC.SYSTEM_ERROR}

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


def mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)


def used_ratio(path: Path) -> float:
    st = os.statvfs(path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    return used / (used + st.f_bavail * st.f_frsize)


class Broker:
    def __init__(self, tmp: Path, store: Path) -> None:
        self.tmp = tmp
        self.port = free_port(span=4) + 2
        # small index files so the index fits beside two commit-log files
        self.conf = broker_conf(tmp, self.port, "maxHashSlotNum=100\nmaxIndexNum=400\n")
        text = Path(self.conf).read_text().replace(f"storePathRootDir={tmp / 'store'}",
                                                   f"storePathRootDir={store}")
        Path(self.conf).write_text(text)
        self.client = RemotingClient()
        self.proc: RmqProcess | None = None

    def start(self) -> None:
        self.proc = RmqProcess("rmq.broker.startup", ["-c", self.conf], self.tmp / "broker.out",
                               env={"ROCKETMQ_HOME": str(self.tmp)})
        self.proc.start(wait_for_port=(self.port, self.port - 2))

    async def call(self, code: int, header=None, body=None) -> RemotingCommand:
        return await self.client.invoke(f"127.0.0.1:{self.port}",
                                        RemotingCommand.create_request(code, header, body), 5000)

    async def ready(self) -> None:
        deadline = time.monotonic() + 20
        while True:
            try:
                await self.call(R.GET_BROKER_RUNTIME_INFO)
                return
            except RemotingError:
                assert time.monotonic() < deadline, "the broker never answered"
                await asyncio.sleep(0.1)

    async def send(self, i: int) -> RemotingCommand:
        props = f"KEYS\x01k{i}\x02WAIT\x01true"
        header = send_header_v2("pg", TOPIC, "TBW102", 1, 0, 0, int(time.time() * 1000), 0,
                                props, False, "broker-a")
        return await self.call(R.SEND_MESSAGE_V2, header, body_of(i))

    async def pull_all(self) -> list[bytes]:
        got, offset = [], 0
        while True:
            r = await self.call(R.PULL_MESSAGE, pull_header(
                "cg", TOPIC, 0, offset, 32, PULL_FLAG_SUBSCRIPTION, 0, 0, "*", 0, "TAG",
                "broker-a"))
            if r.code != RC.SUCCESS:
                assert r.code in (RC.PULL_NOT_FOUND, RC.PULL_OFFSET_MOVED), (r.code, r.remark)
                return got
            got.extend(m.body for m in decode_messages(r.body))
            offset = int(r.ext_fields["nextBeginOffset"])

    async def send_until_ok(self, i: int, timeout: float = 30.0) -> None:
        """Writes resume: the clean service sees room within its 10 s round."""
        deadline = time.monotonic() + timeout
        while (r := await self.send(i)).code != RC.SUCCESS:
            assert r.code in REFUSALS, (r.code, r.remark)
            assert time.monotonic() < deadline, ("writes never resumed", r.code, r.remark)
            await asyncio.sleep(0.5)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.proc.poll() is None


def store_log_text(tmp: Path) -> str:
    return (tmp / "logs" / "rocketmqlogs" / "store.log").read_text()


def body_of(i: int) -> bytes:
    return (f"{i:08d}".encode() * (BODY // 8))[:BODY]


@pytest.mark.timeout(180)
async def test_full_disk_refuses_puts_keeps_reads_and_loses_nothing(tmp_path):
    mnt = tmp_path / "mnt"
    mount_tmpfs(mnt, "3m")
    broker = Broker(tmp_path, mnt / "store")
    try:
        broker.start()
        r = await broker.call(R.UPDATE_AND_CREATE_TOPIC, {
            "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "1",
            "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"})
        assert r.code == RC.SUCCESS, r.remark

        # 1. the disk runs out: the commit log cannot make its third 1 MiB file
        acked: list[int] = []
        refused = None
        for i in range(60):
            r = await broker.send(i)
            if r.code != RC.SUCCESS:
                refused = r
                break
            acked.append(i)
        assert refused is not None and refused.code in REFUSALS, "the disk never filled"
        assert len(acked) >= 15
        r = await broker.send(1000)
        assert r.code == RC.SERVICE_NOT_AVAILABLE, (r.code, r.remark)
        assert "the broker's disk is full [CL:" in r.remark
        assert broker.alive()
        assert await broker.pull_all() == [body_of(i) for i in acked]
        assert "so mark disk full" in store_log_text(tmp_path)

        # 2. room again: writes resume without a restart
        subprocess.run(["mount", "-o", "remount,size=8m", str(mnt)], check=True)
        await broker.send_until_ok(100)
        acked.append(100)
        for i in range(101, 106):
            assert (await broker.send(i)).code == RC.SUCCESS
            acked.append(i)

        # 3. kill -9 and restart: every acknowledged message is there
        broker.proc.kill()
        broker.start()
        await broker.ready()
        assert await broker.pull_all() == [body_of(i) for i in acked]

        # 4. the used ratio passes diskSpaceWarningLevelRatio (0.90): puts are
        # refused before the disk is exhausted, pulls still served
        filler = mnt / "filler"
        st = os.statvfs(mnt)
        total = st.f_blocks * st.f_frsize
        free = st.f_bavail * st.f_frsize
        with open(filler, "wb") as f:
            os.posix_fallocate(f.fileno(), 0, free - int(total * 0.05))
        assert used_ratio(mnt) > 0.9
        deadline = time.monotonic() + 30
        while "physic disk maybe full soon" not in store_log_text(tmp_path):
            assert time.monotonic() < deadline, "the disk was never marked full"
            await asyncio.sleep(0.3)
        r = await broker.send(200)
        assert r.code == RC.SERVICE_NOT_AVAILABLE, (r.code, r.remark)
        assert await broker.pull_all() == [body_of(i) for i in acked]
        filler.unlink()
        await broker.send_until_ok(201)
        acked.append(201)
        assert await broker.pull_all() == [body_of(i) for i in acked]
        assert broker.alive()
    finally:
        await broker.client.close()
        if broker.proc is not None:
            broker.proc.kill()
        subprocess.run(["umount", "-l", str(mnt)], check=False)
