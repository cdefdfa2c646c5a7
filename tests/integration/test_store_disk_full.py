"""A full disk with a real broker: the store on a small tmpfs the test mounts
(root only; CI runs as root).  Puts are refused with 4.9.8's answers, reads go
on, the process lives, writes resume once there is room, and every SEND_OK
message survives kill -9."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from rmq.client.codec import decode_messages, encode_batch
from rmq.client.headers import PULL_FLAG_SUBSCRIPTION, pull_header, send_header_v2
from rmq.client.message import Message
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.remoting.exceptions import RemotingError
from rmq.testing.cluster import broker_conf
from rmq.testing.procs import RmqProcess, free_port
from rmq.testing.wait import wait_until

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
    def __init__(self, tmp: Path, store: Path,
                 extra: str = "maxHashSlotNum=100\nmaxIndexNum=400\n") -> None:
        self.tmp = tmp
        self.port = free_port(span=4) + 2
        # (by default) small index files so the index fits beside two commit-log files
        self.conf = broker_conf(tmp, self.port, extra)
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
        await wait_until(lambda: "physic disk maybe full soon" in store_log_text(tmp_path), 30,
                         0.3, "the disk marked full")
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


# ---- acknowledged means consumable: the files dispatch needs come first ----------------
DF_TOPIC = "DiskFullTopic"
CQ_REFUSAL = re.compile(r"no space for the next entries of the consume queue file of "
                        r"DiskFullTopic-(\d) \((\d+\.\d) (KiB|MiB) needed, (\d+\.\d) (KiB|MiB) free\)")
CQ_PAGE = 4096  # a consume queue's first reserved blocks (ConsumeQueue.make_room)
PAGE_ENTRIES = CQ_PAGE // 20
MIB = 1024 * 1024


async def create_topic(broker: Broker, topic: str, queues: int) -> None:
    r = await broker.call(R.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
        "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG"})
    assert r.code == RC.SUCCESS, r.remark


async def send_to(broker: Broker, qid: int, body: bytes, delay: int = 0) -> RemotingCommand:
    props = f"KEYS\x01{body[:8].decode()}\x02UNIQ_KEY\x01{os.urandom(16).hex().upper()}\x02WAIT\x01true"
    if delay:
        props += f"\x02DELAY\x01{delay}"
    header = send_header_v2("pg", DF_TOPIC, "TBW102", 4, qid, 0, int(time.time() * 1000), 0,
                            props, False, "broker-a")
    return await broker.call(R.SEND_MESSAGE_V2, header, body)


async def send_batch_to(broker: Broker, qid: int, bodies: list[bytes]) -> RemotingCommand:
    msgs = [Message(DF_TOPIC, b, properties={"UNIQ_KEY": os.urandom(16).hex().upper(),
                                             "KEYS": b[:8].decode()}) for b in bodies]
    header = send_header_v2("pg", DF_TOPIC, "TBW102", 4, qid, 0, int(time.time() * 1000), 0,
                            "WAIT\x01true", True, "broker-a")
    return await broker.call(R.SEND_BATCH_MESSAGE, header, encode_batch(msgs))


async def pull_queue(broker: Broker, qid: int) -> list[bytes]:
    got, offset = [], 0
    for _ in range(1000):  # bounded
        r = await broker.call(R.PULL_MESSAGE, pull_header(
            "cg", DF_TOPIC, qid, offset, 32, PULL_FLAG_SUBSCRIPTION, 0, 0, "*", 0, "TAG",
            "broker-a"))
        if r.code != RC.SUCCESS:
            assert r.code in (RC.PULL_NOT_FOUND, RC.PULL_OFFSET_MOVED), (r.code, r.remark)
            return got
        got.extend(m.body for m in decode_messages(r.body))
        offset = int(r.ext_fields["nextBeginOffset"])
    raise AssertionError("the queue never ended")


async def pulled(broker: Broker, queues: int = 4) -> dict[int, list[bytes]]:
    return {q: await pull_queue(broker, q) for q in range(queues)}


def payload(tag: str, i: int, size: int = BODY) -> bytes:
    head = f"{tag}{i:06d}".encode()[:8].ljust(8, b"_")
    return (head * (size // 8))[:size]


def refusal_lines(tmp: Path, queue: int) -> int:
    """store.log lines about the queue's missing file (the refusal, with the
    failed creation's error in it)."""
    text = store_log_text(tmp)
    lines = [ln for ln in text.splitlines() if f"consume queue file of {DF_TOPIC}-{queue} (" in ln
             or f"consumequeue/{DF_TOPIC}/{queue}/" in ln]
    return len(lines)


def fill_disk(mnt: Path) -> Path:
    """A file taking every free block of the tmpfs."""
    filler = mnt / "filler"
    st = os.statvfs(mnt)
    with open(filler, "wb") as f:
        os.posix_fallocate(f.fileno(), 0, st.f_bavail * st.f_frsize)
    return filler


def cq_file(mnt: Path, queue: int) -> Path:
    (f,) = (mnt / "store" / "consumequeue" / DF_TOPIC / str(queue)).iterdir()
    return f


async def wait_next_commit_log_file(mnt: Path) -> None:
    """The commit log's next file is made ahead beside the first."""
    commitlog = mnt / "store" / "commitlog"
    deadline = time.monotonic() + 10
    while len([n for n in os.listdir(commitlog) if n.isdigit()]) < 2:
        assert time.monotonic() < deadline, "the commit log's next file was never made"
        await asyncio.sleep(0.05)


@pytest.mark.timeout(120)
async def test_a_full_disk_refuses_what_it_could_not_dispatch(tmp_path):
    """The case as reported: an 8 MiB store, 4 MiB commit-log files, the
    default 5.7 MiB consume-queue files.  Reserved whole, no queue's file fit
    beside the commit log and every send was refused; sparse, as 4.9.8's,
    each queue's file holds a page and the sends are taken.  Once the disk is
    full, a queue whose reserved page is full is refused, naming its file,
    while a queue with room in its page goes on, and nothing is stored that
    no consumer could read."""
    mnt = tmp_path / "mnt"
    mount_tmpfs(mnt, "9m")
    broker = Broker(tmp_path, mnt / "store", "mappedFileSizeCommitLog=4194304\n"
                    "mappedFileSizeConsumeQueue=6000000\nmaxHashSlotNum=5000\n"
                    "maxIndexNum=20000\n")
    try:
        broker.start()
        await create_topic(broker, DF_TOPIC, 4)
        sent: dict[int, list[bytes]] = {0: [], 1: [], 2: [], 3: []}
        for i in range(40):
            body = payload("s", i, 1024)
            r = await send_to(broker, i % 4, body)
            assert r.code == RC.SUCCESS, (r.code, r.remark)
            sent[i % 4].append(body)
        for q in range(4):
            f = cq_file(mnt, q)
            assert f.stat().st_size == 6_000_000 and f.stat().st_blocks * 512 <= CQ_PAGE
        await wait_next_commit_log_file(mnt)
        filler = fill_disk(mnt)
        for i in range(PAGE_ENTRIES - 10):  # queue 0's page filled up: no new blocks needed
            body = payload("f", i, 1024)
            r = await send_to(broker, 0, body)
            assert r.code == RC.SUCCESS, (i, r.code, r.remark)
            sent[0].append(body)
        for i in range(5):
            r = await send_to(broker, 0, payload("r", i, 1024))
            assert r.code == RC.SERVICE_NOT_AVAILABLE, (r.code, r.remark)
            m = CQ_REFUSAL.search(r.remark)
            assert m is not None, r.remark
            assert int(m.group(1)) == 0 and (m.group(2), m.group(3)) == ("4.0", "KiB")
            body = payload("o", i, 1024)
            assert (await send_to(broker, 1, body)).code == RC.SUCCESS  # room in its page
            sent[1].append(body)
        assert broker.alive()
        assert await pulled(broker) == sent
        assert [refusal_lines(tmp_path, q) for q in range(4)] == [1, 0, 0, 0]  # once, not per send
        filler.unlink()
        body = payload("a", 0, 1024)
        assert (await send_to(broker, 0, body)).code == RC.SUCCESS
        sent[0].append(body)
        assert await pulled(broker) == sent
    finally:
        await broker.client.close()
        if broker.proc is not None:
            broker.proc.kill()
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.timeout(240)
async def test_every_acknowledged_message_is_readable_on_a_full_disk(tmp_path):
    """A disk filled once queue 0 and the schedule queue have their files:
    single, batch and delayed sends to queue 0 are acknowledged (its reserved
    page has room), every send needing blocks another queue's file does not
    have is refused; everything acknowledged is pulled back before any room
    is made, and again after kill -9 and a restart on the still-full disk;
    once there is room the refused queue takes sends at once."""
    mnt = tmp_path / "mnt"
    mount_tmpfs(mnt, f"{8 * 1024 + 1536}k")
    broker = Broker(tmp_path, mnt / "store", "mappedFileSizeCommitLog=4194304\n"
                    "mappedFileSizeConsumeQueue=600000\nmaxHashSlotNum=100\nmaxIndexNum=400\n")
    try:
        broker.start()
        await create_topic(broker, DF_TOPIC, 4)
        acked: dict[int, list[bytes]] = {0: [], 1: [], 2: [], 3: []}
        delayed: dict[int, list[bytes]] = {0: [], 1: [], 2: [], 3: []}
        refused: list[str] = []

        async def single(q: int, i: int, delay: int = 0) -> None:
            body = payload("d" if delay else "s", q * 1000 + i)
            r = await send_to(broker, q, body, delay)
            if r.code == RC.SUCCESS:
                (delayed if delay else acked)[q].append(body)
            else:
                assert r.code == RC.SERVICE_NOT_AVAILABLE, (r.code, r.remark)
                refused.append(r.remark)

        async def batch(q: int, i: int) -> None:
            bodies = [payload("b", q * 1000 + i * 10 + k, BODY // 4) for k in range(4)]
            r = await send_batch_to(broker, q, bodies)
            if r.code == RC.SUCCESS:
                acked[q].extend(bodies)
            else:
                assert r.code == RC.SERVICE_NOT_AVAILABLE, (r.code, r.remark)
                refused.append(r.remark)

        await single(0, 0)  # queue 0's file; the commit log's second file is made beside it
        await wait_next_commit_log_file(mnt)
        await single(0, 1, delay=1)  # the schedule queue's file
        filler = fill_disk(mnt)
        for i in range(2, 8):
            for q in range(4):
                await single(q, i)
                await batch(q, i)
                await single(q, 100 + i, delay=1)
        assert len(acked[0]) == 1 + 6 * 5 and len(delayed[0]) == 7
        assert acked[1] == acked[2] == acked[3] == [] and delayed[1] == []
        assert len(refused) == 3 * 6 * 3
        assert all(CQ_REFUSAL.search(text) for text in refused), refused[:3]
        assert [refusal_lines(tmp_path, q) for q in (1, 2, 3)] == [1, 1, 1]
        assert broker.alive()

        # before any room is made: everything acknowledged is there to pull
        await all_back(broker, acked, delayed)

        # kill -9 and a restart on the still-full disk: all of it still there
        broker.proc.kill()
        broker.start()
        await broker.ready()
        await all_back(broker, acked, delayed)

        # recovery dropped the commit log's unused next file: fill its room
        # again, and a send needing blocks is refused as before
        filler.unlink()
        filler = fill_disk(mnt)
        r = await send_to(broker, 1, payload("s", 9999))
        assert r.code == RC.SERVICE_NOT_AVAILABLE and CQ_REFUSAL.search(r.remark), (r.code, r.remark)
        await all_back(broker, acked, delayed)

        # room again: the refused queue takes sends at once (no disk-full mark to wait out)
        filler.unlink()
        body = payload("s", 10000)
        r = await send_to(broker, 1, body)
        assert r.code == RC.SUCCESS, (r.code, r.remark)
        assert await pull_queue(broker, 1) == [body]
        assert "puts taken again" in store_log_text(tmp_path)
    finally:
        await broker.client.close()
        if broker.proc is not None:
            broker.proc.kill()
        subprocess.run(["umount", "-l", str(mnt)], check=False)


async def all_back(broker: Broker, acked: dict[int, list[bytes]],
                   delayed: dict[int, list[bytes]]) -> None:
    """Every acknowledged message pulled back: the others in their order,
    the delayed ones (bodies starting with b"d") once their delay (level 1:
    1 s) has passed, wherever delivery put them among the others."""
    deadline = time.monotonic() + 30
    while True:
        got = await pulled(broker)
        plain = {q: [b for b in v if not b.startswith(b"d")] for q, v in got.items()}
        late = {q: sorted(b for b in v if b.startswith(b"d")) for q, v in got.items()}
        assert all(acked[q][:len(plain[q])] == plain[q] for q in acked), "a message out of order"
        if plain == acked and late == {q: sorted(v) for q, v in delayed.items()}:
            return
        assert time.monotonic() < deadline, ("not all acknowledged messages came back",
                                             {q: (len(plain[q]), len(late[q])) for q in got})
        await asyncio.sleep(0.3)
