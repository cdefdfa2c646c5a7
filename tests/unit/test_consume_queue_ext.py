"""ConsumeQueueExt: unit layout, addresses, file ends, recovery and truncation."""

from __future__ import annotations

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
