"""HAService and HAClient between two real stores in one process (loopback)."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from rmq.store import BrokerRole, DefaultMessageStore, MessageStoreConfig, PutMessageStatus
from rmq.store.config import FlushDiskType
from rmq.store.ha import HAService
from rmq.store.ha.codec import FrameReader, encode_report
from rmq.store.message import MessageExtBrokerInner
from rmq.store.message_codec import message_properties_to_string
from rmq.testing.procs import free_port

FILE = 32 * 1024


def config(root, role: BrokerRole, **kw) -> MessageStoreConfig:
    base = dict(storePathRootDir=str(root), mappedFileSizeCommitLog=FILE,
                mappedFileSizeConsumeQueue=20 * 64, maxHashSlotNum=64, maxIndexNum=256,
                brokerRole=role, haListenPort=free_port())
    base.update(kw)
    return MessageStoreConfig(**base)


def message(i: int, qid: int = 0) -> MessageExtBrokerInner:
    props = {"UNIQ_KEY": f"{i:032X}", "TAGS": "A", "KEYS": f"k{i}"}
    return MessageExtBrokerInner(topic="T", queue_id=qid, body=f"body-{i}".encode() * 30,
                                 properties=props,
                                 properties_string=message_properties_to_string(props),
                                 born_timestamp=int(time.time() * 1000),
                                 born_host=("10.0.0.1", 5000))


class Node:
    """A started store with its HA service."""

    def __init__(self, cfg: MessageStoreConfig) -> None:
        self.store = DefaultMessageStore(cfg, ("127.0.0.1", cfg.haListenPort - 1))
        assert self.store.load()
        self.store.start()
        self.ha = HAService(self.store, "127.0.0.1")
        self.store.ha_service = self.ha

    async def start(self) -> Node:
        await self.ha.start()
        return self

    async def stop(self) -> None:
        await self.ha.shutdown()
        self.store.shutdown()


def commit_log(store: DefaultMessageStore, start: int, end: int) -> bytes:
    out = b""
    while start < end:
        view = store.get_commit_log_data(start)
        assert view is not None
        part = bytes(view[: end - start])
        view.release()
        out += part
        start += len(part)
    return out


async def caught_up(master: Node, slave: Node, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    target = master.store.get_max_phy_offset()
    while slave.store.get_max_phy_offset() != target:
        assert time.monotonic() < deadline, (slave.store.get_max_phy_offset(), target)
        await asyncio.sleep(0.02)
    return target


@pytest.mark.timeout(30)
async def test_slave_copies_the_commit_log_and_dispatches(tmp_path):
    master = await Node(config(tmp_path / "m", BrokerRole.ASYNC_MASTER)).start()
    slave = await Node(config(tmp_path / "s", BrokerRole.SLAVE)).start()
    try:
        slave.ha.update_master_address(f"127.0.0.1:{master.store.config.haListenPort}")
        await streaming(master)  # from offset 0: the slave asked before the master had data
        for i in range(200):  # about 2.5 files
            assert master.store.put_message(message(i, i % 2)).is_ok()
        master.ha.wakeup()
        end = await caught_up(master, slave)
        assert end > 2 * FILE
        assert commit_log(slave.store, 0, end) == commit_log(master.store, 0, end)
        for qid in (0, 1):
            assert slave.store.get_max_offset_in_queue("T", qid) == 100
            got = slave.store.get_message("g", "T", qid, 0, 32)
            assert got.status.name == "FOUND" and len(got.message_buffers) == 32
            got.release()
        # acknowledgements reach the master
        deadline = time.monotonic() + 5
        while master.ha.push2slave_max_offset != end:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        assert master.ha.is_slave_ok(end) and master.ha.slave_fall_behind_much() == 0
    finally:
        await slave.stop()
        await master.stop()


@pytest.mark.timeout(30)
async def test_new_slave_starts_at_the_masters_last_file(tmp_path):
    master = await Node(config(tmp_path / "m", BrokerRole.ASYNC_MASTER)).start()
    slave = await Node(config(tmp_path / "s", BrokerRole.SLAVE)).start()
    try:
        for i in range(200):
            assert master.store.put_message(message(i)).is_ok()
        end = master.store.get_max_phy_offset()
        last_file = end - end % FILE
        assert last_file >= 2 * FILE
        slave.ha.update_master_address(f"127.0.0.1:{master.store.config.haListenPort}")
        await caught_up(master, slave)
        assert slave.store.get_min_phy_offset() == last_file
        assert commit_log(slave.store, last_file, end) == commit_log(master.store, last_file, end)
        # the consume queue starts at the first message of that file
        first = slave.store.get_min_offset_in_queue("T", 0)
        assert first > 0 and slave.store.get_max_offset_in_queue("T", 0) == 200
        got = slave.store.get_message("g", "T", 0, first, 1)
        assert got.status.name == "FOUND"
        got.release()
    finally:
        await slave.stop()
        await master.stop()


async def streaming(master: Node, timeout: float = 5.0) -> None:
    """Until the master has read a slave's first report and chosen where to
    stream from.  Accepting the connection comes earlier: a put made between
    the two would make the slave a new slave of a master with data, streamed
    from the start of the master's last file."""
    deadline = time.monotonic() + timeout
    while not any(c.next_transfer_from_where >= 0 for c in master.ha.connections):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)


async def raw_slave(master: Node, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A bare HA connection that reports the master's max offset and is
    registered by the master; the test decides when it acknowledges."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode_report(master.store.get_max_phy_offset()))
    await writer.drain()
    await streaming(master)
    return reader, writer


async def acknowledged_put(master: Node, writer: asyncio.StreamWriter, msg):
    """A put that still waits until the raw slave acknowledges the master's end."""
    put = asyncio.ensure_future(master.store.async_put_message(msg))
    await asyncio.sleep(0.05)
    assert not put.done()
    writer.write(encode_report(master.store.get_max_phy_offset()))
    return await put


def assert_flushed(master: Node, r) -> None:
    ar = r.append_result
    assert master.store.commit_log.mfq.flushed_where >= ar.wrote_offset + ar.wrote_bytes


@pytest.mark.timeout(30)
async def test_sync_master_put_waits_for_the_slave(tmp_path):
    cfg = config(tmp_path / "m", BrokerRole.SYNC_MASTER, slaveTimeout=300)
    master = await Node(cfg).start()
    try:
        r = await master.store.async_put_message(message(0))
        assert r.status is PutMessageStatus.SLAVE_NOT_AVAILABLE
        # a raw slave that reads but never acknowledges: FLUSH_SLAVE_TIMEOUT
        reader, writer = await raw_slave(master, cfg.haListenPort)
        r = await master.store.async_put_message(message(1))
        assert r.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        # the frames it got start where it asked and line up
        frames = FrameReader(1 << 20)
        got = []
        while sum(len(b) for _, b in got) < r.append_result.wrote_bytes:
            got += frames.feed(await asyncio.wait_for(reader.read(65536), 5))
        assert got[0][0] == r.append_result.wrote_offset
        # acknowledging makes the next put succeed
        r = await acknowledged_put(master, writer, message(2))
        assert r.status is PutMessageStatus.PUT_OK
        # a report beyond the master's max offset ends the connection
        writer.write(encode_report(master.store.get_max_phy_offset() + 100))
        while await asyncio.wait_for(reader.read(65536), 5):
            pass
        writer.close()
    finally:
        await master.stop()


@pytest.mark.timeout(30)
async def test_sync_flush_sync_master_put_waits_for_disk_and_slave_together(tmp_path):
    """SYNC_FLUSH + SYNC_MASTER: the group commit and the slave wait run side
    by side; the put is answered when both are done, and a failed slave wait's
    status is the answer while the message is still flushed."""
    cfg = config(tmp_path / "m", BrokerRole.SYNC_MASTER, flushDiskType=FlushDiskType.SYNC_FLUSH,
                 slaveTimeout=400)
    master = await Node(cfg).start()
    try:
        r = await master.store.async_put_message(message(0))
        assert r.status is PutMessageStatus.SLAVE_NOT_AVAILABLE
        assert_flushed(master, r)
        reader, writer = await raw_slave(master, cfg.haListenPort)
        # a slave that does not acknowledge: FLUSH_SLAVE_TIMEOUT after about
        # slaveTimeout, flushed meanwhile
        begin = time.monotonic()
        r = await master.store.async_put_message(message(1))
        assert r.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        assert 0.3 < time.monotonic() - begin < 5
        assert_flushed(master, r)
        # acknowledged: PUT_OK, once both are done
        r = await acknowledged_put(master, writer, message(2))
        assert r.status is PutMessageStatus.PUT_OK
        assert_flushed(master, r)
        writer.close()
    finally:
        await master.stop()


@pytest.mark.timeout(30)
async def test_master_heartbeats_and_drops_a_silent_slave(tmp_path):
    cfg = config(tmp_path / "m", BrokerRole.ASYNC_MASTER, haSendHeartbeatInterval=200,
                 haHousekeepingInterval=800)
    master = await Node(cfg).start()
    try:
        assert master.store.put_message(message(0)).is_ok()
        end = master.store.get_max_phy_offset()
        reader, writer = await asyncio.open_connection("127.0.0.1", cfg.haListenPort)
        writer.write(encode_report(end))  # already has everything
        frames = FrameReader(1 << 20)
        got = []
        while not got:
            got = frames.feed(await asyncio.wait_for(reader.read(65536), 5))
        assert got[0] == (end, bytearray())  # heartbeat: header only, next offset
        # then silence from the slave: closed after haHousekeepingInterval
        began = time.monotonic()
        while await asyncio.wait_for(reader.read(65536), 5):
            pass
        assert 0.5 <= time.monotonic() - began < 4
        writer.close()
        deadline = time.monotonic() + 2
        while master.ha.connections:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        assert not master.ha.is_slave_ok(end)
    finally:
        await master.stop()


@pytest.mark.timeout(30)
async def test_master_ha_port_in_use_names_the_address(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        node = Node(config(tmp_path, BrokerRole.ASYNC_MASTER, haListenPort=port))
        try:
            with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}: "):
                await node.start()
        finally:
            node.store.shutdown()
