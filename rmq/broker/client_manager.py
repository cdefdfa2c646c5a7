"""Producer and consumer connection tables and their housekeeping.

Mirrors RocketMQ's ``ProducerManager``, ``ConsumerManager``/``ConsumerGroupInfo``
and ``ClientHousekeepingService``: HEART_BEAT (handled by the client-manage
processor) registers channels here; a channel silent for 120 s is closed and
removed by a scan every 10 s; a closed, idle or failed connection is removed
at once through the remoting servers' channel events.  Consumer group
membership changes go to a ``ConsumerIdsChangeListener`` (the controller's
default one notifies consumers and keeps filter data in step).
"""

from __future__ import annotations

import enum
import itertools
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rmq.client.heartbeat import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from rmq.common.logging import BROKER_LOGGER_NAME
from rmq.common.periodic import PeriodicService
from rmq.remoting import Channel

log = logging.getLogger(BROKER_LOGGER_NAME)

CHANNEL_EXPIRED_TIMEOUT_MS = 1000 * 120
GET_AVAILABLE_CHANNEL_RETRY_COUNT = 3
SCAN_INTERVAL_S = 10.0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ConsumerGroupEvent(enum.Enum):
    CHANGE = "CHANGE"
    UNREGISTER = "UNREGISTER"
    REGISTER = "REGISTER"


ConsumerIdsChangeListener = Callable[[ConsumerGroupEvent, str, Any], None]


@dataclass(slots=True, eq=False)
class ClientChannelInfo:
    """One client connection (``ClientChannelInfo``)."""

    channel: Channel
    client_id: str
    language: int
    version: int
    last_update_timestamp: int = field(default_factory=_now_ms)


class ProducerManager:
    def __init__(self) -> None:
        self.group_channel_table: dict[str, dict[Channel, ClientChannelInfo]] = {}
        self._counter = itertools.count(1)

    def get_available_channel(self, group: str | None) -> Channel | None:
        """One live connection of producer group ``group`` (``getAvailableChannel``):
        round-robin from a shared counter, trying a few; None when none is active.
        The transaction back-check sends its CHECK_TRANSACTION_STATE there."""
        table = self.group_channel_table.get(group) if group is not None else None
        if not table:
            return None
        channels = list(table)
        index = next(self._counter) % len(channels)
        for _ in range(min(GET_AVAILABLE_CHANNEL_RETRY_COUNT, len(channels))):
            channel = channels[index]
            if channel.is_active():
                return channel
            index = (index + 1) % len(channels)
        return None

    def register_producer(self, group: str, info: ClientChannelInfo) -> None:
        channels = self.group_channel_table.setdefault(group, {})
        old = channels.get(info.channel)
        if old is None:
            channels[info.channel] = info
            log.info("new producer connected, group: %s channel: %s", group, info.client_id)
        else:
            old.last_update_timestamp = _now_ms()

    def unregister_producer(self, group: str, info: ClientChannelInfo) -> None:
        channels = self.group_channel_table.get(group)
        if channels and channels.pop(info.channel, None) is not None:
            log.info("unregister a producer[%s] from groupChannelTable %s", group, info.client_id)
            if not channels:
                del self.group_channel_table[group]

    def scan_not_active_channel(self, now_ms: int | None = None) -> None:
        now = _now_ms() if now_ms is None else now_ms
        for group, channels in list(self.group_channel_table.items()):
            for ch, info in list(channels.items()):
                if now - info.last_update_timestamp > CHANNEL_EXPIRED_TIMEOUT_MS:
                    del channels[ch]
                    log.warning("SCAN: remove expired channel[%s] from ProducerManager "
                                "groupChannelTable, producer group name: %s",
                                ch.remote_addr, group)
                    ch.close()
            if not channels:
                del self.group_channel_table[group]

    def do_channel_close_event(self, remote_addr: str, channel: Channel) -> None:
        for group, channels in list(self.group_channel_table.items()):
            if channels.pop(channel, None) is not None:
                log.info("NETTY EVENT: remove channel[%s] from ProducerManager "
                         "groupChannelTable, producer group: %s", remote_addr, group)
                if not channels:
                    del self.group_channel_table[group]

    def find_channel(self, client_id: str) -> Channel | None:
        for channels in self.group_channel_table.values():
            for ch, info in channels.items():
                if info.client_id == client_id and ch.is_active():
                    return ch
        return None


@dataclass(slots=True)
class ConsumerGroupInfo:
    group_name: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    channel_info_table: dict[Channel, ClientChannelInfo] = field(default_factory=dict)
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    last_update_timestamp: int = field(default_factory=_now_ms)

    def all_channels(self) -> list[Channel]:
        return list(self.channel_info_table)

    def all_client_ids(self) -> list[str]:
        return [info.client_id for info in self.channel_info_table.values()]

    def update_channel(self, info: ClientChannelInfo, consume_type: ConsumeType,
                       message_model: MessageModel, consume_from_where: ConsumeFromWhere) -> bool:
        """Returns True when a new channel joined (the group changed)."""
        self.consume_type, self.message_model = consume_type, message_model
        self.consume_from_where = consume_from_where
        old = self.channel_info_table.get(info.channel)
        now = _now_ms()
        self.last_update_timestamp = now
        if old is None:
            self.channel_info_table[info.channel] = info
            log.info("new consumer connected, group: %s %s %s channel: %s", self.group_name,
                     consume_type.name, message_model.name, info.client_id)
            return True
        if old.client_id != info.client_id:
            log.error("[BUG] consumer channel exist in broker, but clientId not equal. "
                      "GROUP: %s OLD: %s NEW: %s", self.group_name, old.client_id,
                      info.client_id)
            self.channel_info_table[info.channel] = info
        else:
            old.last_update_timestamp = now
        return False

    def update_subscription(self, subs: Iterable[SubscriptionData]) -> bool:
        """Replace the subscriptions; True when a topic was added or removed."""
        subs = list(subs)
        changed = False
        for sub in subs:
            old = self.subscription_table.get(sub.topic)
            if old is None:
                self.subscription_table[sub.topic] = sub
                changed = True
                log.info("subscription changed, add new topic, group: %s %s", self.group_name,
                         sub.topic)
            elif sub.sub_version > old.sub_version:
                self.subscription_table[sub.topic] = sub
        wanted = {s.topic for s in subs}
        for topic in [t for t in self.subscription_table if t not in wanted]:
            del self.subscription_table[topic]
            changed = True
            log.warning("subscription changed, group: %s remove topic %s", self.group_name,
                        topic)
        self.last_update_timestamp = _now_ms()
        return changed

    def remove_channel(self, channel: Channel) -> bool:
        return self.channel_info_table.pop(channel, None) is not None


class ConsumerManager:
    def __init__(self, listener: ConsumerIdsChangeListener | None = None) -> None:
        self.consumer_table: dict[str, ConsumerGroupInfo] = {}
        self.listener = listener

    def _fire(self, event: ConsumerGroupEvent, group: str, arg: Any) -> None:
        if self.listener is not None:
            self.listener(event, group, arg)

    def get_consumer_group_info(self, group: str) -> ConsumerGroupInfo | None:
        return self.consumer_table.get(group)

    def find_subscription_data(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.consumer_table.get(group)
        return None if info is None else info.subscription_table.get(topic)

    def find_channel(self, group: str, client_id: str) -> ClientChannelInfo | None:
        info = self.consumer_table.get(group)
        if info is None:
            return None
        for ci in info.channel_info_table.values():
            if ci.client_id == client_id:
                return ci
        return None

    def register_consumer(self, group: str, info: ClientChannelInfo, consume_type: ConsumeType,
                          message_model: MessageModel, consume_from_where: ConsumeFromWhere,
                          subs: Iterable[SubscriptionData], is_notify: bool) -> bool:
        """A consumer heartbeat; returns True when the group's membership or
        subscriptions changed (the listener then hears CHANGE)."""
        subs = list(subs)
        group_info = self.consumer_table.get(group)
        if group_info is None:
            group_info = ConsumerGroupInfo(group, consume_type, message_model, consume_from_where)
            self.consumer_table[group] = group_info
        r1 = group_info.update_channel(info, consume_type, message_model, consume_from_where)
        r2 = group_info.update_subscription(subs)
        if (r1 or r2) and is_notify:
            self._fire(ConsumerGroupEvent.CHANGE, group, group_info.all_channels())
        self._fire(ConsumerGroupEvent.REGISTER, group, subs)
        return r1 or r2

    def unregister_consumer(self, group: str, info: ClientChannelInfo, is_notify: bool) -> None:
        group_info = self.consumer_table.get(group)
        if group_info is None:
            return
        if group_info.remove_channel(info.channel):
            log.info("unregister consumer ok, group: %s client: %s", group, info.client_id)
        if not group_info.channel_info_table:
            del self.consumer_table[group]
            log.info("unregister consumer ok, no any connection, and remove consumer group, %s",
                     group)
            self._fire(ConsumerGroupEvent.UNREGISTER, group, None)
        if is_notify:
            self._fire(ConsumerGroupEvent.CHANGE, group, group_info.all_channels())

    def _remove_channel_everywhere(self, channel: Channel, why: str) -> None:
        for group, group_info in list(self.consumer_table.items()):
            if group_info.remove_channel(channel):
                log.info("%s: remove channel[%s] from consumer group %s", why,
                         channel.remote_addr, group)
                if not group_info.channel_info_table:
                    del self.consumer_table[group]
                    log.info("unregister consumer ok, no any connection, and remove consumer "
                             "group, %s", group)
                    self._fire(ConsumerGroupEvent.UNREGISTER, group, None)
                self._fire(ConsumerGroupEvent.CHANGE, group, group_info.all_channels())

    def do_channel_close_event(self, remote_addr: str, channel: Channel) -> None:
        self._remove_channel_everywhere(channel, "NETTY EVENT")

    def scan_not_active_channel(self, now_ms: int | None = None) -> None:
        now = _now_ms() if now_ms is None else now_ms
        for group, group_info in list(self.consumer_table.items()):
            for ch, info in list(group_info.channel_info_table.items()):
                if now - info.last_update_timestamp > CHANNEL_EXPIRED_TIMEOUT_MS:
                    log.warning("SCAN: remove expired channel from ConsumerManager "
                                "consumerTable. channel=%s, consumerGroup=%s",
                                ch.remote_addr, group)
                    group_info.remove_channel(ch)
                    ch.close()
            if not group_info.channel_info_table:
                log.warning("SCAN: remove expired channel from ConsumerManager consumerTable, "
                            "all clear, consumerGroup=%s", group)
                del self.consumer_table[group]

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        return {g for g, info in self.consumer_table.items() if topic in info.subscription_table}


class ClientHousekeepingService(PeriodicService):
    """Channel events of both servers -> both tables; a scan every 10 s."""

    interval_s = SCAN_INTERVAL_S
    failure_message = "Error occurred when scan not active client channels."

    def __init__(self, producers: ProducerManager, consumers: ConsumerManager,
                 extra_close_handlers: list[Callable[[str, Channel], None]] | None = None) -> None:
        super().__init__(logger=log)
        self.producers = producers
        self.consumers = consumers
        # other per-channel state (e.g. filter servers, orderly locks) cleaned on close
        self.extra_close_handlers = extra_close_handlers if extra_close_handlers is not None else []

    def run_once(self) -> None:
        self.scan_exception_channel()

    def scan_exception_channel(self) -> None:
        self.producers.scan_not_active_channel()
        self.consumers.scan_not_active_channel()

    def _gone(self, remote_addr: str, channel: Channel) -> None:
        self.producers.do_channel_close_event(remote_addr, channel)
        self.consumers.do_channel_close_event(remote_addr, channel)
        for handler in self.extra_close_handlers:
            handler(remote_addr, channel)

    # ChannelEventListener
    def on_channel_connect(self, remote_addr: str, channel: Channel) -> None:
        pass

    def on_channel_close(self, remote_addr: str, channel: Channel) -> None:
        self._gone(remote_addr, channel)

    def on_channel_exception(self, remote_addr: str, channel: Channel) -> None:
        self._gone(remote_addr, channel)

    def on_channel_idle(self, remote_addr: str, channel: Channel) -> None:
        self._gone(remote_addr, channel)
