"""What push and lite-pull consumers share (``RebalanceImpl`` and the offset
plumbing of ``DefaultMQPushConsumerImpl``): subscriptions, the queue table
learned from routes, rebalancing, where to start reading, offset commits."""

from __future__ import annotations

import asyncio
import logging
import time

from rmq.client.allocate import AllocateMessageQueueAveragely, AllocateStrategy
from rmq.client.config import ClientConfig, ConsumerConfig
from rmq.client.exceptions import MQClientError
from rmq.client.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    SubscriptionData,
    build_subscription,
)
from rmq.client.instance import MQClientInstance, client_instance, subscribe_queues
from rmq.client.message import MessageQueue
from rmq.client.message_selector import MessageSelector
from rmq.client.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from rmq.common.route import TopicRouteData
from rmq.common.topics import is_retry_topic, retry_topic

log = logging.getLogger("rmq.client")


class _BrokerOffsets:
    """``OffsetBackend`` over the instance: finds the master of the queue's broker."""

    def __init__(self, instance: MQClientInstance) -> None:
        self.instance = instance

    def _addr(self, mq: MessageQueue) -> str:
        addr = self.instance.find_broker_addr(mq.broker_name)
        if addr is None:
            raise MQClientError(-1, f"The broker[{mq.broker_name}] not exist")
        return addr

    async def query_consumer_offset(self, group: str, mq: MessageQueue) -> int:
        addr = await self.instance.find_broker_addr_or_fetch(mq)
        return await self.instance.api.query_consumer_offset(addr, group, mq)

    async def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int,
                                     oneway: bool) -> None:
        await self.instance.api.update_consumer_offset(self._addr(mq), group, mq, offset, oneway)


def allocate_decision(strategy: AllocateStrategy, group: str, client_id: str,
                      mq_all: list[MessageQueue], cid_all: list[str],
                      model: MessageModel) -> list[MessageQueue]:
    """The queues this client should own (sorted inputs, as every member sorts)."""
    if model is MessageModel.BROADCASTING:
        return sorted(mq_all)
    if not mq_all or not cid_all:
        return []
    return strategy.allocate(group, client_id, sorted(mq_all), sorted(cid_all))


class ConsumerBase:
    consume_type = ConsumeType.CONSUME_PASSIVELY

    def __init__(self, group: str, namesrv_addr: str | None, config: ConsumerConfig | None,
                 client_config: ClientConfig | None, instance: MQClientInstance | None,
                 allocate: AllocateStrategy | None) -> None:
        self.config = config or ConsumerConfig()
        self.config.consumer_group = group
        self.group = group
        self.instance, self._own_instance = client_instance(namesrv_addr, client_config, instance)
        self.allocate = allocate or AllocateMessageQueueAveragely()
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.topic_queues: dict[str, list[MessageQueue]] = {}
        self.offset_store: OffsetStore | None = None
        self.rebalance_interval = self.config.rebalance_interval / 1000
        self.start_ts = int(time.time() * 1000)

    @property
    def clustering(self) -> bool:
        return self.config.message_model is MessageModel.CLUSTERING

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Subscribe ``topic`` with a tag expression (``*`` or ``TagA || TagB``)
        or a selector (``MessageSelector.by_sql("a > 5")``, filtered by the
        broker)."""
        if isinstance(expression, MessageSelector):
            self.subscriptions[topic] = build_subscription(topic, expression.expression,
                                                           expression.expression_type)
        else:
            self.subscriptions[topic] = build_subscription(topic, expression)

    def _make_offset_store(self) -> OffsetStore:
        if self.clustering:
            return RemoteBrokerOffsetStore(self.group, _BrokerOffsets(self.instance))
        return LocalFileOffsetStore(self.group, self.instance.client_id,
                                    self.config.offset_store_dir)

    async def _start_base(self) -> None:
        if self.clustering and retry_topic(self.group) not in self.subscriptions:
            self.subscriptions[retry_topic(self.group)] = build_subscription(
                retry_topic(self.group), "*")
        self.offset_store = self._make_offset_store()
        await self.offset_store.load()
        self.instance.register_consumer(self)
        await self.instance.start()
        for topic in self.subscriptions:
            await self.instance.update_route(topic)
        await self.instance.heartbeat_all()
        await self._await_retry_route()

    async def _await_retry_route(self) -> None:
        """The first heartbeat makes the broker create ``%RETRY%group`` and
        register it; fetch its route at once (for up to 1 s) rather than at the
        next 30 s route refresh, so that retries flow from the start."""
        topic = retry_topic(self.group)
        if topic not in self.subscriptions:
            return
        for _ in range(10):
            if self.topic_queues.get(topic):
                return
            await asyncio.sleep(0.1)
            await self.instance.update_route(topic)

    # --- instance callbacks ----------------------------------------------------
    def subscribe_topics(self) -> list[str]:
        return list(self.subscriptions)

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(self.group, self.consume_type, self.config.message_model,
                            self.config.consume_from_where, list(self.subscriptions.values()))

    def on_route(self, topic: str, route: TopicRouteData) -> None:
        if topic in self.subscriptions:
            self.topic_queues[topic] = subscribe_queues(topic, route)

    async def allocated_queues(self, topic: str) -> list[MessageQueue] | None:
        """This client's share of ``topic``; None when it cannot be decided now."""
        mq_all = self.topic_queues.get(topic)
        if mq_all is None:
            return None
        cids: list[str] = []
        if self.clustering:
            addr = self.instance.any_broker_of(topic)
            if addr is None:
                return None
            cids = await self.instance.api.get_consumer_id_list(addr, self.group)
            if self.instance.client_id not in cids:
                return None
        return allocate_decision(self.allocate, self.group, self.instance.client_id, mq_all,
                                 cids, self.config.message_model)

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """Stored offset, else ``consume_from_where`` (``computePullFromWhere``);
        -1 means "skip this queue for now" (broker not reachable)."""
        last = await self.offset_store.read(mq, ReadOffsetType.READ_FROM_STORE)
        if last >= 0:
            return last
        if last != -1:
            return -1
        api, addr = self.instance.api, self.instance.find_broker_addr(mq.broker_name)
        if addr is None:
            return -1
        cfw = self.config.consume_from_where
        try:
            if cfw in (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                       ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET):
                return 0
            if is_retry_topic(mq.topic):
                return 0 if cfw is not ConsumeFromWhere.CONSUME_FROM_TIMESTAMP else \
                    await api.get_max_offset(addr, mq)
            if cfw is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
                ts = self.config.consume_timestamp or int(time.time() * 1000) - 30 * 60 * 1000
                return await api.search_offset(addr, mq, ts)
            return await api.get_max_offset(addr, mq)
        except Exception as e:
            log.warning("cannot compute the start offset of %s: %s", mq, e)
            return -1

    async def persist_offsets(self, oneway: bool = True) -> None:
        if self.offset_store is not None:
            await self.offset_store.persist_all(set(self.owned_queues()), oneway)

    def owned_queues(self) -> list[MessageQueue]:
        raise NotImplementedError

    def offset_table(self, topic: str) -> dict[MessageQueue, int]:
        return self.offset_store.clone_table(topic) if self.offset_store else {}
