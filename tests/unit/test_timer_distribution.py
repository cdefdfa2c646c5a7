"""The wheel's slot counts summed into 5.3.3's ``timer_bound_s`` buckets
(``rocketmq_timer_message_snapshot``), stale slots and the ring's wrap included."""

from __future__ import annotations

from rmq.store.timer import layout as L
from rmq.store.timer.metrics import TIMER_DIST_S, timer_distribution
from rmq.store.timer.wheel import TimerWheel


def _wheel(tmp_path, precision: int) -> TimerWheel:
    return TimerWheel(str(tmp_path / "timerwheel"), precision)


def test_buckets_sum_slots_between_bounds(tmp_path):
    w = _wheel(tmp_path, 1000)
    now = 1_700_000_000_500
    base = now // 1000 * 1000
    for offset_s, num in ((0, 1), (4, 2), (5, 3), (59, 4), (3599, 5), (86399, 6), (86400, 7)):
        w.put_slot(base + offset_s * 1000, 0, 0, num)
    w.put_slot(base - 1000, 0, 0, 50)  # past: in no bucket
    dist = dict(timer_distribution(w, 1000, now))
    assert list(dist) == list(TIMER_DIST_S)
    assert dist == {5: 3, 60: 7, 300: 0, 900: 0, 3600: 5, 14400: 0, 28800: 0, 86400: 6}
    w.close()


def test_stale_slot_of_another_round_is_not_counted(tmp_path):
    w = _wheel(tmp_path, 1000)
    now = 1_700_000_000_000
    # the same ring position 14 days earlier: another time, as get_slot sees it
    w.put_slot(now + 10_000 - L.SLOTS_TOTAL * 2 * 1000, 0, 0, 9)
    assert w.get_slot(now + 10_000).num == 0
    assert dict(timer_distribution(w, 1000, now))[60] == 0
    w.close()


def test_count_ahead_wraps_around_the_ring(tmp_path):
    w = _wheel(tmp_path, 100)
    ring = L.SLOTS_TOTAL * 2
    start = (ring - 3) * 100 + ring * 100 * 7_000  # three slots before the end of the ring
    for k in range(6):
        w.put_slot(start + k * 100, 0, 0, k + 1)
    assert w.count_ahead(start, 6) == sum(range(1, 7))
    assert w.count_ahead(start + 300, 3) == 4 + 5 + 6
    assert sum(n for _b, n in timer_distribution(w, 100, start)) == 21
    w.close()
