"""HA stream codec and GroupTransferService logic."""

from __future__ import annotations

import asyncio
import struct

import pytest

from rmq.store.ha.codec import (
    HEADER_SIZE,
    FrameReader,
    HAProtocolError,
    OffsetReportReader,
    encode_header,
    encode_report,
)
from rmq.store.ha.group_transfer import GroupTransferService
from rmq.store.ha.ha_client import parse_address
from rmq.store.ha.ha_connection import start_offset_for


def test_wire_layouts_are_big_endian():
    assert encode_report(0x0102030405060708) == bytes.fromhex("0102030405060708")
    assert encode_header(1 << 32, 7) == bytes.fromhex("0000000100000000" "00000007")
    assert HEADER_SIZE == 12


def test_report_reader_keeps_the_newest_complete_value():
    r = OffsetReportReader()
    assert r.feed(encode_report(5)[:3]) is None
    data = encode_report(5)[3:] + encode_report(9) + encode_report(12)[:5]
    assert r.feed(data) == 9
    assert r.feed(encode_report(12)[5:]) == 12
    assert r.feed(b"") is None


def test_frame_reader_splits_arbitrary_chunks():
    stream = (encode_header(100, 3) + b"abc" + encode_header(103, 0)
              + encode_header(103, 5) + b"hello")
    for step in (1, 2, 5, 7, 13, len(stream)):
        fr = FrameReader(1024)
        got = []
        for i in range(0, len(stream), step):
            got += [(o, bytes(b)) for o, b in fr.feed(stream[i:i + step])]
        assert got == [(100, b"abc"), (103, b""), (103, b"hello")]
        assert fr.buffered() == 0


def test_frame_reader_keeps_a_partial_frame():
    fr = FrameReader(1024)
    assert fr.feed(encode_header(0, 4) + b"ab") == []
    assert fr.buffered() == HEADER_SIZE + 2
    assert fr.feed(b"cd") == [(0, bytearray(b"abcd"))]


@pytest.mark.parametrize("header", [struct.pack(">qi", 0, -1), struct.pack(">qi", 0, 2048),
                                    struct.pack(">qi", -5, 1)])
def test_frame_reader_refuses_impossible_headers(header):
    with pytest.raises(HAProtocolError):
        FrameReader(1024).feed(header)


def test_fresh_slave_starts_at_the_masters_last_file():
    size = 1 << 30
    assert start_offset_for(0, 0, size) == 0
    assert start_offset_for(0, 3 * size + 77, size) == 3 * size
    assert start_offset_for(0, 2 * size, size) == 2 * size
    assert start_offset_for(1234, 3 * size + 77, size) == 1234


def test_parse_address():
    assert parse_address("10.0.0.2:10912") == ("10.0.0.2", 10912)
    assert parse_address("[::1]:10912") == ("::1", 10912)
    for bad in ("10.0.0.2", "host:", ":10912", "host:port"):
        with pytest.raises(ValueError):
            parse_address(bad)


async def test_group_transfer_resolves_every_waiter_an_ack_covers():
    gt = GroupTransferService(asyncio.get_running_loop())
    waiters = {off: gt.wait(off, 5000) for off in (300, 100, 200, 400)}
    assert len(gt) == 4
    gt.notify_transfer_some(250)
    await asyncio.sleep(0)
    assert {o for o, f in waiters.items() if f.done()} == {100, 200}
    assert all(waiters[o].result() for o in (100, 200))
    gt.notify_transfer_some(240)  # an older ack changes nothing
    assert gt.acked == 250
    gt.notify_transfer_some(400)
    assert all(f.result() for f in waiters.values())
    assert len(gt) == 0
    assert gt.wait(399, 10).result() is True  # already acknowledged: done at once


async def test_group_transfer_times_out_late_waiters_only():
    loop = asyncio.get_running_loop()
    gt = GroupTransferService(loop)
    slow = gt.wait(1000, 50)
    long = gt.wait(900, 5000)
    began = loop.time()
    assert await slow is False
    assert loop.time() - began >= 0.04
    assert not long.done()
    gt.notify_transfer_some(900)
    assert await long is True
    gt.shutdown()


async def test_group_transfer_shutdown_fails_waiters():
    gt = GroupTransferService(asyncio.get_running_loop())
    fut = gt.wait(10, 60_000)
    gt.shutdown()
    assert fut.result() is False
