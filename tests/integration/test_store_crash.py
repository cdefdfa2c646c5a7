"""Crash safety with real processes: a child writes into the store and
records every acknowledged message; it is killed with SIGKILL at a random
moment; after recovery every acknowledged message must be present, CRC-valid
and indexed, queue offsets contiguous, nothing half-written visible, and
``python -m rmq.store.inspect`` must find the store valid.

Run as ``python -m tests.integration.test_store_crash --child DIR ACKS FLUSH``
it is the writer.
"""

from __future__ import annotations

import os
import random
import sys
import time

import pytest

from rmq.store import DefaultMessageStore, FlushDiskType, MessageExtBrokerInner, MessageStoreConfig
from rmq.store import message_codec as codec
from rmq.testing.procs import RmqProcess, run_cli

HOST = ("127.0.0.1", 10911)
QUEUES = 4


def crash_config(root: str, flush: str) -> MessageStoreConfig:
    return MessageStoreConfig(
        storePathRootDir=root, mappedFileSizeCommitLog=256 * 1024, mappedFileSizeConsumeQueue=20 * 500,
        maxHashSlotNum=512, maxIndexNum=3000, flushDiskType=flush, flushIntervalCommitLog=50,
        flushIntervalConsumeQueue=100,
    )


def child(root: str, acks_path: str, flush: str) -> None:
    """Write until killed; one line per acknowledged message, written with a
    plain os.write so an acknowledgement is never reported before the put."""
    store = DefaultMessageStore(crash_config(root, flush), HOST)
    if not store.load():
        sys.exit(3)
    store.start()
    fd = os.open(acks_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    n = int(time.time() * 1000) % 10_000_000 * 1000
    rnd = random.Random(n)
    while True:
        n += 1
        props = {"KEYS": f"k{n}", "UNIQ_KEY": f"{n:032X}", "TAGS": "T"}
        msg = MessageExtBrokerInner(
            topic="Crash", queue_id=n % QUEUES, body=(f"{n}:" .encode() + b"x" * rnd.randrange(0, 3000)),
            properties=props, properties_string=codec.message_properties_to_string(props),
            born_timestamp=int(time.time() * 1000),
        )
        r = store.put_message(msg)
        if r.is_ok() and r.status.name == "PUT_OK":
            a = r.append_result
            os.write(fd, f"{n} {a.wrote_offset} {a.wrote_bytes} {msg.queue_id} {a.logics_offset}\n".encode())


def _read_acks(path) -> list[tuple[int, ...]]:
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 5:  # a line cut by the kill is not an acknowledgement
                out.append(tuple(int(p) for p in parts))
    return out


def _verify(root: str, flush: str, acks: list[tuple[int, ...]]) -> None:
    store = DefaultMessageStore(crash_config(root, flush), HOST)
    assert store.load()
    store.start()
    try:
        end = store.get_max_phy_offset()
        for n, phy, size, qid, qoff in acks:
            view = store.select_one_message_by_offset(phy)
            assert view is not None, f"acknowledged message {n} at {phy} lost"
            r = codec.scan_record(view, 0, len(view), True)
            assert r[0] == codec.SCAN_MESSAGE, f"message {n} at {phy} not CRC-valid"
            assert (r[1], r[3], r[4]) == (size, qid, qoff)
            m = codec.decode_message(view)
            view.release()
            assert m.body.startswith(f"{n}:".encode())
            assert phy + size <= end
        for n, phy, *_ in acks[-50:] + acks[:: max(1, len(acks) // 100)]:
            q = store.query_message("Crash", f"k{n}", 4, 0, 2**62)
            assert any(codec.decode_message(b).commit_log_offset == phy for b in q.message_buffers), \
                f"message {n} not indexed"
            q.release()
        for qid in range(QUEUES):
            offset = store.get_min_offset_in_queue("Crash", qid)
            top = store.get_max_offset_in_queue("Crash", qid)
            while offset < top:
                g = store.get_message("verify", "Crash", qid, offset, 32)
                assert g.message_queue_offsets == list(range(offset, offset + len(g.message_buffers)))
                for buf, expected in zip(g.message_buffers, g.message_queue_offsets, strict=True):
                    assert codec.decode_message(buf).queue_offset == expected
                offset = g.next_begin_offset
                g.release()
    finally:
        store.shutdown()
    res = run_cli("rmq.store.inspect", [root])
    assert res.returncode == 0, res.stdout + res.stderr


def _crash_rounds(tmp_path, flush: str, rounds: int) -> None:
    root = str(tmp_path / "store")
    acks_path = str(tmp_path / "acks.txt")
    rnd = random.Random(rounds)
    for i in range(rounds):
        proc = RmqProcess("tests.integration.test_store_crash", ["--child", root, acks_path, flush],
                          tmp_path / f"child-{i}.log", cwd=os.getcwd())
        proc.start()
        deadline = time.monotonic() + 30
        before = len(_read_acks(acks_path))
        while len(_read_acks(acks_path)) <= before:
            assert proc.proc.poll() is None, proc.output()
            assert time.monotonic() < deadline, "writer never acknowledged"
            time.sleep(0.05)
        time.sleep(rnd.uniform(0.2, 1.2))
        proc.kill()
        acks = _read_acks(acks_path)
        assert len(acks) > before
        _verify(root, flush, acks)


@pytest.mark.timeout(120)
def test_sigkill_under_sync_flush(tmp_path):
    _crash_rounds(tmp_path, "SYNC_FLUSH", 3)


@pytest.mark.timeout(120)
def test_sigkill_under_async_flush(tmp_path):
    _crash_rounds(tmp_path, "ASYNC_FLUSH", 2)


@pytest.mark.soak
@pytest.mark.timeout(1800)
def test_sigkill_many_rounds_soak(tmp_path):
    _crash_rounds(tmp_path, "SYNC_FLUSH", 25)


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "--child":
    child(sys.argv[2], sys.argv[3], FlushDiskType[sys.argv[4]].value)
