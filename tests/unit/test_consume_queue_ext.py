"""ConsumeQueueExt: unit layout, addresses, file ends, recovery and truncation."""

from __future__ import annotations

import errno
import os
import struct

import pytest

from rmq.store.consume_queue_ext import (
    FAILED,
    LONG_MIN,
    MAX_ADDR,
    ConsumeQueueExt,
    CqExtUnit,
    decorate,
    is_ext_addr,
    undecorate,
)

pytestmark = pytest.mark.timeout(30)


def test_unit_layout_is_4_9_8s():
    unit = CqExtUnit(tags_code=-7, store_timestamp=1700000000123, bitmap=b"\x01\x80")
    data = unit.encode()
    assert data == struct.pack(">hqqh", 22, -7, 1700000000123, 2) + b"\x01\x80"
    assert CqExtUnit.decode(data, 0) == unit
    assert CqExtUnit.decode(b"\xff\xff" + bytes(30), 0) is None  # the end marker
    assert CqExtUnit.decode(bytes(40), 0) is None  # a zero tail


def test_addresses():
    assert MAX_ADDR == -2147483649
    assert not is_ext_addr(-(1 << 31)) and is_ext_addr(MAX_ADDR)  # any int tags code is not one
    assert decorate(0) == LONG_MIN and undecorate(decorate(12345)) == 12345
    assert decorate(LONG_MIN + 5) == LONG_MIN + 5


def test_put_get_across_files_and_recover(tmp_path):
    ext = ConsumeQueueExt("T", 0, str(tmp_path), 100)
    addrs = [ext.put(CqExtUnit(i, 1000 + i, bytes([i]) * 8)) for i in range(10)]  # 28 bytes each
    assert all(is_ext_addr(a) for a in addrs)
    assert [undecorate(a) for a in addrs[:4]] == [0, 28, 56, 100]  # 3 fit before the 4-byte end
    assert [ext.get(a).tags_code for a in addrs] == list(range(10))
    assert struct.unpack_from(">h", ext.mfq.mapped_files[0].view, 84)[0] == -1
    assert ext.get(12345) is None and ext.get(decorate(5000)) is None
    ext.shutdown()

    again = ConsumeQueueExt("T", 0, str(tmp_path), 100)
    assert again.load()
    again.recover()
    assert [again.get(a).store_timestamp for a in addrs] == [1000 + i for i in range(10)]
    assert undecorate(again.max_address()) == undecorate(addrs[-1]) + 28
    again.truncate_by_max_address(addrs[4])  # keep units 0..4
    assert again.get(addrs[5]) is None and again.get(addrs[4]).tags_code == 4
    assert again.put(CqExtUnit(99, 1, b"")) == decorate(undecorate(addrs[4]) + 28)
    assert again.truncate_by_min_address(addrs[4]) == 1  # the first file ends before it
    assert again.get(addrs[0]) is None and again.get(addrs[4]).tags_code == 4
    again.shutdown()


def test_unit_too_big_is_not_stored(tmp_path):
    ext = ConsumeQueueExt("T", 1, str(tmp_path), 64)
    assert ext.put(CqExtUnit(1, 1, bytes(60))) == FAILED
    assert ext.put(CqExtUnit(1, 1, bytes(8))) == decorate(0)
    ext.shutdown()


def test_consume_queue_keeps_ext_addresses(tmp_path):
    """Entries hold unit addresses; recovery and truncation keep ext and queue in step."""
    from rmq.store.consume_queue import ConsumeQueue

    def make():
        ext = ConsumeQueueExt("T", 0, str(tmp_path / "ext"), 120)
        return ConsumeQueue("T", 0, str(tmp_path / "cq"), 200, ext=ext)

    cq = make()
    for i in range(12):
        assert cq.put_message_position_info(100 * i, 100, 7000 + i, i, store_ts=5000 + i,
                                            bitmap=bytes([i]))
    entries = [cq.read_entry(i) for i in range(12)]
    assert all(is_ext_addr(tags) for _off, _size, tags in entries)
    units = [cq.ext.get(tags) for _o, _s, tags in entries]
    assert [(u.tags_code, u.store_timestamp, u.bitmap) for u in units] == \
        [(7000 + i, 5000 + i, bytes([i])) for i in range(12)]
    cq.shutdown()

    cq = make()
    assert cq.load()
    cq.recover()
    assert cq.ext.get(cq.read_entry(11)[2]).tags_code == 7011
    cq.truncate_dirty_logic_files(800)  # drops entries 8..11 and their units
    assert cq.get_max_offset_in_queue() == 8
    last = cq.read_entry(7)[2]
    assert cq.ext.max_address() == decorate(undecorate(last) + 21)
    assert cq.put_message_position_info(800, 100, 9999, 8, store_ts=1)
    assert cq.ext.get(cq.read_entry(8)[2]).tags_code == 9999
    cq.shutdown()


def test_files_are_sparse_with_blocks_reserved_ahead_of_the_units(tmp_path, monkeypatch):
    """A queue's ext file of 4.9.8's 48 MiB holds on disk about what was
    written to it (its blocks reserved a chunk at a time, each range before
    the units go there), not its whole size."""
    from rmq.store import consume_queue_ext

    size = 48 * 1024 * 1024
    reserved: list[tuple[int, int]] = []
    real = os.posix_fallocate

    def fallocate(fd: int, offset: int, length: int) -> None:
        reserved.append((offset, offset + length))
        real(fd, offset, length)

    monkeypatch.setattr(os, "posix_fallocate", fallocate)
    ext = ConsumeQueueExt("T", 0, str(tmp_path), size)
    addresses = [ext.put(CqExtUnit(i, 1700000000000 + i, b"\x01" * 8)) for i in range(60_000)]
    assert all(is_ext_addr(a) for a in addresses)
    end = undecorate(addresses[-1]) + 28
    # every unit lies in a range reserved before it was written, a chunk at a time
    assert reserved[0][0] == 0 and len(reserved) == -(-end // consume_queue_ext.RESERVE_AHEAD)
    assert all(a[1] == b[0] for a, b in zip(reserved, reserved[1:], strict=False))
    path = tmp_path / "T" / "0" / f"{0:020d}"
    assert path.stat().st_size == size
    assert path.stat().st_blocks * 512 <= reserved[-1][1] + 4096 < size // 8
    assert ext.get(addresses[12345]) == CqExtUnit(12345, 1700000000000 + 12345, b"\x01" * 8)
    ext.shutdown()


def test_a_full_disk_refuses_the_unit_and_writes_nothing(tmp_path, monkeypatch):
    """No room for a unit's blocks: FAILED (the consume queue then keeps the
    plain tags code, as 4.9.8 does), nothing written; once there is room,
    units are stored again where the refused one would have gone."""
    from rmq.store import consume_queue_ext

    full = False
    real = os.posix_fallocate

    def fallocate(fd: int, offset: int, length: int) -> None:
        if full:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, offset, length)

    monkeypatch.setattr(os, "posix_fallocate", fallocate)
    monkeypatch.setattr(consume_queue_ext, "RESERVE_AHEAD", 64)
    ext = ConsumeQueueExt("T", 0, str(tmp_path), 4096)
    first = [ext.put(CqExtUnit(i, 1, b"")) for i in range(3)]  # 60 bytes: one reservation
    full = True
    assert ext.put(CqExtUnit(3, 1, b"")) == FAILED  # 60..80 was not reserved
    mf = ext.mfq.get_last_mapped_file()
    assert mf.wrote_position == 60 and bytes(mf.view[60:80]) == bytes(20)
    full = False
    again = ext.put(CqExtUnit(4, 1, b""))
    assert undecorate(again) == 60 and ext.get(again) == CqExtUnit(4, 1, b"")
    assert [ext.get(a).tags_code for a in first] == [0, 1, 2]
    ext.shutdown()
