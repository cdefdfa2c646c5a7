"""Producer/consumer tables: registration, change events, expiry scan, close events."""

from __future__ import annotations

import time

from rmq.broker.client_manager import (
    CHANNEL_EXPIRED_TIMEOUT_MS,
    ClientChannelInfo,
    ClientHousekeepingService,
    ConsumerGroupEvent,
    ConsumerManager,
    ProducerManager,
)
from rmq.client.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData


class FakeChannel:
    """A connection object as the tables see it (only identity and close matter)."""

    def __init__(self, addr: str) -> None:
        self.remote_addr = addr
        self.closed = False

    def is_active(self) -> bool:
        return not self.closed

    def close(self) -> None:
        self.closed = True


def register(cm: ConsumerManager, ch, cid: str, topics=("T",)) -> bool:
    info = ClientChannelInfo(ch, cid, 0, 409)
    return cm.register_consumer("g", info, ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
                                ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                                [SubscriptionData(t) for t in topics], True)


def test_consumer_join_leave_events():
    events = []
    cm = ConsumerManager(lambda e, g, a: events.append((e, g)))
    a, b = FakeChannel("1:1"), FakeChannel("1:2")
    assert register(cm, a, "c1")
    assert not register(cm, a, "c1")
    assert register(cm, b, "c2")
    assert (ConsumerGroupEvent.CHANGE, "g") in events
    assert sorted(cm.get_consumer_group_info("g").all_client_ids()) == ["c1", "c2"]
    events.clear()
    hk = ClientHousekeepingService(ProducerManager(), cm)
    hk.on_channel_close("1:1", a)
    hk.on_channel_close("1:2", b)
    assert cm.get_consumer_group_info("g") is None
    assert (ConsumerGroupEvent.UNREGISTER, "g") in events


def test_subscription_change_detected():
    cm = ConsumerManager()
    ch = FakeChannel("1:1")
    register(cm, ch, "c1", ("T",))
    assert register(cm, ch, "c1", ("T", "U"))
    assert cm.query_topic_consume_by_who("U") == {"g"}


def test_expiry_scan_closes_silent_channels():
    pm, cm = ProducerManager(), ConsumerManager()
    p, c = FakeChannel("1:1"), FakeChannel("1:2")
    pm.register_producer("pg", ClientChannelInfo(p, "p1", 0, 409))
    register(cm, c, "c1")
    hk = ClientHousekeepingService(pm, cm)
    hk.scan_exception_channel()
    assert "pg" in pm.group_channel_table and not p.closed
    # past the expiry of both registrations (the consumer's may be a millisecond later)
    later = time.time_ns() // 1_000_000 + CHANNEL_EXPIRED_TIMEOUT_MS + 1
    pm.scan_not_active_channel(later)
    cm.scan_not_active_channel(later)
    assert p.closed and c.closed
    assert "pg" not in pm.group_channel_table and cm.get_consumer_group_info("g") is None
