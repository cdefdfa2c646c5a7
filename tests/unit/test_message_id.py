"""UNIQ_KEY generation: the 4.9.8 layout (MessageClientIDSetter), the per-ms
cache of the id's head, batch ranges and uniqueness across threads."""

from __future__ import annotations

import threading

from rmq.common.message_id import MessageClientIDSetter, _month_start_ms, create_uniq_ids


def _gen() -> MessageClientIDSetter:
    return MessageClientIDSetter(ip=bytes([10, 0, 0, 1]), pid=0x13039)


def test_single_ids_share_the_head_within_a_millisecond_and_count_up():
    gen = _gen()
    at = gen.month_start_ms() + 61_234
    a, b = gen.create_uniq_id(at), gen.create_uniq_id(at)
    assert a[:28] == b[:28] == gen.prefix + f"{61_234:08X}"
    assert int(b[28:], 16) == (int(a[28:], 16) + 1) & 0xFFFF
    c = gen.create_uniq_id(at + 1)  # the next millisecond: a new time part
    assert c[20:28] == f"{61_235:08X}" and int(c[28:], 16) == (int(b[28:], 16) + 1) & 0xFFFF


def test_batch_ids_are_one_time_part_and_a_counter_range():
    gen = _gen()
    at = gen.month_start_ms() + 5
    first = gen.create_uniq_id(at)
    ids = gen.create_uniq_ids(40, at)
    assert len(ids) == 40 and all(i[:28] == first[:28] and len(i) == 32 for i in ids)
    start = int(first[28:], 16)
    assert [int(i[28:], 16) for i in ids] == [(start + k) & 0xFFFF for k in range(1, 41)]
    assert ids == [i.upper() for i in ids]


def test_counter_wraps_at_16_bits():
    gen = _gen()
    at = gen.month_start_ms()
    ids = gen.create_uniq_ids(70_000, at)
    counters = [int(i[28:], 16) for i in ids]
    assert max(counters) == 0xFFFF and min(counters) == 0
    assert all((b - a) & 0xFFFF == 1 for a, b in zip(counters, counters[1:], strict=False))


def test_month_change_restarts_the_time_part():
    gen = _gen()
    start, nxt = _month_start_ms(gen.month_start_ms())
    late = gen.create_uniq_id(nxt - 1)
    assert late[20:28] == f"{(nxt - 1 - start) & 0xFFFFFFFF:08X}"
    early = gen.create_uniq_id(nxt + 7)  # first ms of the next month
    assert early[20:28] == f"{7:08X}" and gen.month_start_ms() == nxt
    assert gen.create_uniq_ids(2, nxt + 7)[0][20:28] == f"{7:08X}"


def test_ids_unique_across_threads():
    out: list[list[str]] = []

    def work() -> None:
        ids = []
        for _ in range(500):
            ids.extend(create_uniq_ids(3))
        out.append(ids)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for ids in out for i in ids]
    assert len(every) == 6000 and len(set(every)) == 6000
