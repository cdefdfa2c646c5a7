"""The DLedger leader's send lane stores and answers exactly what the general
path does.

The request stream of ``test_send_lane`` (plain sends in both header
spellings and several JSON shapes, batches, oneway sends, sends the lane
leaves to the general path, other requests between them) is written to a
broker leading a one-node DLedger group three times: with the lane
(compiled helpers), with the twins (``RMQ_NO_EXTENSIONS=1``) and with the
lane off (``rmqSendLaneEnable=false``).  The answers, the entries and the
records in them (store timestamps and born hosts aside), the consume queues,
the index and the put statistics must be the same each time; small files
make the entries cross data-file ends."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest

from rmq.client.headers import send_header_v2
from rmq.common.codes import RequestCode
from rmq.remoting.command import RemotingCommand
from rmq.testing.procs import free_port
from rmq.testing.store import BORNHOST_V6_FLAG
from rmq.testing.wait import wait_until
from tests.integration.test_send_lane import (
    TOPIC,
    _answer,
    _frame,
    _index,
    _queues,
    _run,
    _stream,
)

R = RequestCode
PROBE = 10**8  # opaques of the sends that wait for the leadership


async def _leading(transport, reader) -> None:
    """Until the node leads its group: sends until one is stored (the same
    first message in every mode; the refused ones store nothing)."""
    probe = send_header_v2("pg", TOPIC, "TBW102", 4, 0, 0, 1_600_000_000_000, 0, "", False,
                           "broker-a")
    for i in range(200):
        transport.write(_frame(R.SEND_MESSAGE_V2, probe, b"probe", PROBE + i))
        await wait_until(lambda i=i: PROBE + i in reader.frames, 10, 0.01, "an answer")
        if RemotingCommand.decode(reader.frames.pop(PROBE + i)[4:]).code == 0:
            return
        await asyncio.sleep(0.1)


def _entries(store: Path) -> list[bytes]:
    """Every entry of the data files (48-byte header and record), the
    record's born host (the client's port) and store time zeroed."""
    out = []
    for path in sorted((store / "dledger-n0" / "data").iterdir()):
        data = path.read_bytes()
        pos = 0
        while pos + 8 <= len(data):
            magic, size = struct.unpack_from(">ii", data, pos)
            if magic != 1 or size <= 48:
                break
            entry = bytearray(data[pos:pos + size])
            sys_flag = struct.unpack_from(">i", entry, 48 + 36)[0]
            ts_at = 48 + 48 + (20 if sys_flag & BORNHOST_V6_FLAG else 8)
            entry[96:ts_at + 8] = bytes(ts_at + 8 - 96)
            out.append(bytes(entry))
            pos += size
    return out


@pytest.mark.timeout(300)
async def test_dledger_lane_twin_and_general_path_store_and_answer_the_same(tmp_path):
    frames, oneway = _stream(29)
    want = len(frames) - len(oneway)
    port = free_port(span=4) + 2
    raft = free_port()
    results = {}
    group = ("enableDLegerCommitLog=true\ndLegerGroup=g\ndLegerSelfId=n0\n"
             f"dLegerPeers=n0-127.0.0.1:{raft}\n")
    for mode in ("lane", "twin", "general"):
        results[mode] = await _run(tmp_path, port, mode, frames, want, group, _leading)
    base_frames, base_store, served = results["general"]
    assert served == 0
    base_stats = base_frames.pop("stats")
    base = (_entries(base_store), _queues(base_store), _index(base_store, 1000, 4000))
    assert len(base[0]) > 1300 and len(base[1]) > 8 and len(base[2]) > 1
    assert len(list((base_store / "dledger-n0" / "data").iterdir())) >= 2
    codes = {RemotingCommand.decode(f[4:]).code for f in base_frames.values()}
    assert codes >= {0, 1}  # stored, and the general path's refusals among them
    for mode in ("lane", "twin"):
        got_frames, store, served = results[mode]
        assert got_frames.pop("stats") == base_stats, mode
        assert served > 0.5 * len(base[0]), (mode, served)  # batches go the general way
        assert got_frames.keys() == base_frames.keys()
        diff = [op for op in base_frames
                if _answer(got_frames[op]) != _answer(base_frames[op])]
        assert not diff, (mode, diff[:3], got_frames[diff[0]], base_frames[diff[0]])
        assert _entries(store) == base[0], mode
        assert _queues(store) == base[1], mode
        assert _index(store, 1000, 4000) == base[2], mode
