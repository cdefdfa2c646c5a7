"""``LitePullConsumer`` (``DefaultLitePullConsumer``): the application polls.

Either ``assign`` queues explicitly or ``subscribe`` topics (queues then come
from rebalancing like a push consumer).  ``poll`` pulls the owned queues in
turn and returns what it found; ``seek`` moves a queue's position;
``commit`` writes the consumed positions to the broker (or the local file when
broadcasting).  ``pull`` is the raw one-shot call (``DefaultMQPullConsumer``).
"""

from __future__ import annotations

import asyncio
import time

from rmq.client import headers as h
from rmq.client.allocate import AllocateStrategy
from rmq.client.config import ClientConfig, ConsumerConfig
from rmq.client.consumer_base import ConsumerBase
from rmq.client.exceptions import MQClientError
from rmq.client.heartbeat import ConsumeType, SubscriptionData, build_subscription
from rmq.client.instance import MQClientInstance, subscribe_queues
from rmq.client.message import MessageExt, MessageQueue, PullResult, PullStatus
from rmq.client.offset_store import ReadOffsetType


class LitePullConsumer(ConsumerBase):
    consume_type = ConsumeType.CONSUME_ACTIVELY

    def __init__(self, group: str, namesrv_addr: str | None = None,
                 config: ConsumerConfig | None = None, client_config: ClientConfig | None = None,
                 instance: MQClientInstance | None = None,
                 allocate: AllocateStrategy | None = None, auto_commit: bool = True) -> None:
        super().__init__(group, namesrv_addr, config, client_config, instance, allocate)
        self.auto_commit = auto_commit
        self.assigned: list[MessageQueue] = []
        self._assigned_explicitly = False
        self.positions: dict[MessageQueue, int] = {}
        self._next = 0
        self._running = False
        self._pull_all: dict[str, SubscriptionData] = {}

    async def __aenter__(self) -> LitePullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.shutdown()

    def assign(self, mqs: list[MessageQueue]) -> None:
        """Consume exactly these queues (no rebalancing)."""
        self._assigned_explicitly = True
        self.assigned = sorted(mqs)
        for mq in mqs:
            if mq.topic not in self.subscriptions:
                self.subscriptions[mq.topic] = build_subscription(mq.topic, "*")

    async def start(self) -> None:
        self._running = True
        await self._start_base()
        if not self._assigned_explicitly:
            await self.do_rebalance()

    async def shutdown(self) -> None:
        self._running = False
        if self.auto_commit:
            await self.commit()
        self.instance.consumers.pop(self.group, None)
        if self._own_instance:
            await self.instance.shutdown()

    def owned_queues(self) -> list[MessageQueue]:
        return list(self.assigned)

    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of ``topic`` (``fetchMessageQueues``); works before
        ``start()`` too, when the consumer is not yet registered for routes."""
        route = await self.instance.update_route(topic)
        if route is None:
            raise MQClientError(17, f"No route info of this topic: {topic}")
        return subscribe_queues(topic, route)

    async def do_rebalance(self) -> None:
        if self._assigned_explicitly or not self._running:
            return
        mine: list[MessageQueue] = []
        for topic in self.subscriptions:
            got = await self.allocated_queues(topic)
            mine.extend(got or [])
        for mq in set(self.assigned) - set(mine):
            await self.offset_store.persist(mq)
            self.positions.pop(mq, None)
            self.offset_store.remove(mq)
        self.assigned = sorted(mine)

    async def _position(self, mq: MessageQueue) -> int:
        pos = self.positions.get(mq)
        if pos is None:
            pos = await self.compute_pull_from_where(mq)
            if pos < 0:
                raise MQClientError(-1, f"no start offset for {mq} yet")
            self.positions[mq] = pos
        return pos

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self.positions[mq] = offset
        self.offset_store.update(mq, offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        self.seek(mq, await self._call_offset(mq, "get_min_offset"))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        self.seek(mq, await self._call_offset(mq, "get_max_offset"))

    async def _call_offset(self, mq: MessageQueue, name: str) -> int:
        addr = await self.instance.find_broker_addr_or_fetch(mq)
        return await getattr(self.instance.api, name)(addr, mq)

    async def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32,
                   expression: str | None = None, block_ms: int = 0) -> PullResult:
        """One PULL_MESSAGE (``block_ms`` > 0 lets the broker hold it that long)."""
        addr = self.instance.find_broker_addr(mq.broker_name)  # known: no coroutine
        if addr is None:
            addr = await self.instance.find_broker_addr_or_fetch(mq)
        if expression is not None:
            sub = build_subscription(mq.topic, expression)
        else:
            sub = self.subscriptions.get(mq.topic)
            if sub is None:  # one "*" subscription per topic, not a parse per pull
                sub = self._pull_all.get(mq.topic)
                if sub is None:
                    sub = self._pull_all[mq.topic] = build_subscription(mq.topic, "*")
        sys_flag = h.PULL_FLAG_SUBSCRIPTION | h.PULL_FLAG_LITE_PULL
        if block_ms > 0:
            sys_flag |= h.PULL_FLAG_SUSPEND
        ext = h.pull_header(self.group, mq.topic, mq.queue_id, offset, max_nums, sys_flag, 0,
                            block_ms, sub.sub_string, sub.sub_version, sub.expression_type,
                            mq.broker_name)
        result = await self.instance.api.pull(addr, ext, max(block_ms + 5000, 10000),
                                              mq.broker_name)
        if sub.tags_set and result.messages:
            result.messages = [m for m in result.messages
                               if sub.matches_tag(m.properties.get("TAGS"))]
        return result

    async def poll(self, timeout_ms: int = 5000, max_nums: int | None = None) -> list[MessageExt]:
        """Messages from the next owned queue(s) that have any; [] after ``timeout_ms``."""
        deadline = time.monotonic() + timeout_ms / 1000
        batch = max_nums or self.config.pull_batch_size
        while True:
            if not self.assigned:
                await self.do_rebalance()
            for _ in range(len(self.assigned)):
                mq = self.assigned[self._next % len(self.assigned)]
                self._next += 1
                offset = await self._position(mq)
                result = await self.pull(mq, offset, batch)
                if result.status is PullStatus.OFFSET_ILLEGAL:
                    self.positions[mq] = result.next_begin_offset
                    continue
                self.positions[mq] = result.next_begin_offset
                if self.auto_commit:
                    self.offset_store.update(mq, result.next_begin_offset)
                if result.messages:
                    return result.messages
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            await asyncio.sleep(min(0.05, left))

    async def commit(self) -> None:
        """Commit the positions of every owned queue synchronously."""
        for mq in self.assigned:
            pos = self.positions.get(mq)
            if pos is not None:
                self.offset_store.update(mq, pos)
        await self.persist_offsets(oneway=False)

    async def committed(self, mq: MessageQueue) -> int:
        return await self.offset_store.read(mq, ReadOffsetType.READ_FROM_STORE)

    # broker requests (same contract as the push consumer)
    async def reset_offset(self, topic: str, table: dict[MessageQueue, int]) -> None:
        for mq, off in table.items():
            if mq.topic == topic:
                self.seek(mq, off)

    def running_info(self) -> dict:
        return {"properties": {"PROP_CONSUME_TYPE": self.consume_type.name,
                               "consumerGroup": self.group},
                "subscriptionSet": [s.to_json_obj() for s in self.subscriptions.values()],
                "mqTable": {}, "statusTable": {}}

    async def consume_directly(self, msg: MessageExt, broker_name: str) -> dict:
        return {"autoCommit": True, "consumeResult": "CR_RETURN_NULL", "order": False,
                "remark": "a pull consumer has no listener", "spentTimeMills": 0}
