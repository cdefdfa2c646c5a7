"""The renewal schedule of rmq.proxy.renew: 5.3.3's RenewStrategyPolicy steps,
the group's retry delay when renewing ends, a handle's end of invisibility."""

from __future__ import annotations

from rmq.proxy.renew import next_visible_ms, renew_step_ms, retry_delay_ms
from rmq.store.config import MessageStoreConfig


def test_renew_steps_follow_the_5_3_3_policy_and_stay_at_the_last():
    minutes = [renew_step_ms(n) // 60_000 for n in range(8)]
    assert minutes == [1, 3, 5, 10, 30, 60, 60, 60]
    assert renew_step_ms(-1) == 60_000


def test_retry_delay_starts_at_the_third_level_and_stops_at_the_last():
    levels = MessageStoreConfig().delay_level_table()
    assert retry_delay_ms(levels, 0) == 10_000
    assert retry_delay_ms(levels, 1) == 30_000
    assert retry_delay_ms(levels, 99) == 7_200_000
    assert retry_delay_ms({}, 3) == 10_000


def test_next_visible_is_pop_time_plus_invisible_time():
    assert next_visible_ms("5 1700000000000 60000 1 0 broker-a 2 5 4096") == 1700000060000
