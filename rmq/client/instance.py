"""``MQClientInstance``: what producers and consumers of one client id share.

It owns the remoting connections, the topic routes (refreshed every
``pollNameServerInterval`` and whenever a send fails), the broker address
table, the heartbeats to every broker, the periodic consumer offset commits,
the rebalance service, and the answers to the requests brokers send to
clients (NOTIFY_CONSUMER_IDS_CHANGED, RESET_CONSUMER_CLIENT_OFFSET,
GET_CONSUMER_STATUS_FROM_CLIENT, GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from rmq.acl.signer import AclClientRPCHook, SessionCredentials
from rmq.client.api import MQClientAPI
from rmq.client.config import ClientConfig
from rmq.client.exceptions import MQClientError
from rmq.client.heartbeat import ConsumerData, HeartbeatData
from rmq.client.message import MessageQueue
from rmq.client.remoting_processor import ClientRemotingProcessor
from rmq.client.request_reply import RequestFutures
from rmq.common.message import is_readable, is_writeable
from rmq.common.route import TopicRouteData
from rmq.common.topics import MASTER_ID
from rmq.remoting import RemotingClient
from rmq.remoting.config import NettyClientConfig

log = logging.getLogger("rmq.client")


class ProducerLike(Protocol):
    group: str

    def publish_topics(self) -> list[str]: ...

    def on_route(self, topic: str, route: TopicRouteData) -> None: ...


class ConsumerLike(Protocol):
    group: str

    def subscribe_topics(self) -> list[str]: ...

    def consumer_data(self) -> ConsumerData: ...

    def on_route(self, topic: str, route: TopicRouteData) -> None: ...

    async def do_rebalance(self) -> None: ...

    async def persist_offsets(self) -> None: ...


def publish_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """Writable queues of brokers that have a master (``topicRouteData2TopicPublishInfo``);
    an ``orderTopicConf`` ("broker-a:4;broker-b:4") replaces the queue data."""
    out: list[MessageQueue] = []
    masters = {b.brokerName for b in route.brokerDatas if MASTER_ID in b.brokerAddrs}
    if route.orderTopicConf:
        for item in route.orderTopicConf.split(";"):
            name, _, num = item.partition(":")
            if num.isdigit():
                out.extend(MessageQueue(topic, name, i) for i in range(int(num)))
        return out
    for qd in sorted(route.queueDatas, key=lambda q: q.brokerName):
        if is_writeable(qd.perm) and qd.brokerName in masters:
            out.extend(MessageQueue(topic, qd.brokerName, i) for i in range(qd.writeQueueNums))
    return out


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """Readable queues (``topicRouteData2TopicSubscribeInfo``)."""
    out = []
    for qd in route.queueDatas:
        if is_readable(qd.perm):
            out.extend(MessageQueue(topic, qd.brokerName, i) for i in range(qd.readQueueNums))
    return sorted(out)


def sign_with(remoting: RemotingClient, credentials: SessionCredentials | None) -> None:
    """Sign every request of ``remoting`` with ``credentials`` (plain ACL), if any."""
    if credentials is not None:
        remoting.register_rpc_hook(AclClientRPCHook(credentials))


def client_instance(namesrv_addr: str | None, client_config: ClientConfig | None,
                    instance: MQClientInstance | None) -> tuple[MQClientInstance, bool]:
    """The instance a producer or consumer runs on and whether it owns it (and so
    shuts it down): the given one, else a new one from ``client_config`` with
    ``namesrv_addr`` overriding its name-server list."""
    if instance is not None:
        return instance, False
    cc = client_config or ClientConfig()
    if namesrv_addr:
        cc.namesrv_addr = namesrv_addr
    return MQClientInstance(cc), True


class MQClientInstance:
    """One client id's connections, routes and services."""

    def __init__(self, config: ClientConfig, netty: NettyClientConfig | None = None) -> None:
        self.config = config
        self.client_id = config.build_client_id()
        self.remoting = RemotingClient(netty)
        sign_with(self.remoting, config.credentials())
        self.remoting.update_namesrv_address_list(config.namesrv_list())
        self.api = MQClientAPI(self.remoting, config.mq_client_api_timeout)
        self.routes: dict[str, TopicRouteData] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self.broker_versions: dict[str, int] = {}
        self.producers: dict[str, ProducerLike] = {}
        self.consumers: dict[str, ConsumerLike] = {}
        self._tasks: list[asyncio.Task] = []
        self._last_heartbeat_soon = 0.0
        self._rebalance_wakeup = asyncio.Event()
        self._route_lock = asyncio.Lock()
        self.started = False
        self.processor = ClientRemotingProcessor(self)
        self.requests = RequestFutures()  # request() calls waiting for their reply
        self.processor.register(self.remoting)

    # --- lifecycle ---------------------------------------------------------------
    async def start(self) -> None:
        if self.started:
            return
        if not self.config.namesrv_list():
            raise ValueError("no name server address: set namesrv_addr or NAMESRV_ADDR")
        self.started = True
        cfg = self.config
        self._spawn(self._every(cfg.poll_name_server_interval / 1000, self.update_all_routes, 0.01))
        self._spawn(self._every(cfg.heartbeat_broker_interval / 1000, self.heartbeat_all, 1.0))
        self._spawn(self._every(cfg.persist_consumer_offset_interval / 1000,
                                self.persist_all_offsets, 10.0))
        self._spawn(self._rebalance_service())

    def _spawn(self, coro: Awaitable) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(coro))

    async def _every(self, period: float, fn: Callable[[], Awaitable], first: float) -> None:
        await asyncio.sleep(first)
        while True:
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a failed round is retried next period
                log.warning("client periodic task %s failed: %s", fn.__name__, e)
            await asyncio.sleep(period)

    async def shutdown(self) -> None:
        """Stop timers, unregister every group from every broker, close connections."""
        self.started = False
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks.clear()
        await self.unregister_all()
        await self.remoting.close()

    # --- registration -----------------------------------------------------------
    def register_producer(self, producer: ProducerLike) -> None:
        if producer.group in self.producers:
            raise ValueError(f"producer group {producer.group} already registered")
        self.producers[producer.group] = producer

    def register_consumer(self, consumer: ConsumerLike) -> None:
        if consumer.group in self.consumers:
            raise ValueError(f"consumer group {consumer.group} already registered")
        self.consumers[consumer.group] = consumer

    async def unregister_all(self) -> None:
        groups = [(g, None) for g in self.producers] + [(None, g) for g in self.consumers]
        for addrs in list(self.broker_addrs.values()):
            for addr in addrs.values():
                for pg, cg in groups:
                    try:
                        await self.api.unregister_client(addr, self.client_id, pg, cg)
                    except Exception as e:
                        log.info("unregister %s/%s from %s failed: %s", pg, cg, addr, e)

    # --- routes -------------------------------------------------------------
    async def fetch_route(self, topic: str) -> TopicRouteData | None:
        """The route of ``topic`` (broker addresses learned), without handing it
        to producers and consumers; None when unknown or unreachable."""
        try:
            route = await self.api.get_topic_route(topic)
        except Exception as e:
            log.debug("route of %s not available: %s", topic, e)
            return None
        for bd in route.brokerDatas:
            self.broker_addrs[bd.brokerName] = dict(bd.brokerAddrs)
        return route

    async def update_route(self, topic: str) -> TopicRouteData | None:
        """Fetch ``topic``'s route and hand it to producers and consumers; None
        when the name server does not know the topic (or cannot be reached)."""
        route = await self.fetch_route(topic)
        if route is None:
            return None
        self.routes[topic] = route
        for p in list(self.producers.values()):
            p.on_route(topic, route)
        for c in list(self.consumers.values()):
            c.on_route(topic, route)
        return route

    async def update_all_routes(self) -> None:
        topics: set[str] = set()
        for p in self.producers.values():
            topics.update(p.publish_topics())
        for c in self.consumers.values():
            topics.update(c.subscribe_topics())
        for topic in topics:
            await self.update_route(topic)

    def find_broker_addr(self, broker_name: str, broker_id: int = MASTER_ID,
                         only_this: bool = False) -> str | None:
        """Address of ``broker_id`` in ``broker_name``; falls back to any replica
        unless ``only_this``."""
        addrs = self.broker_addrs.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        if addr is None and not only_this:
            addr = next(iter(addrs.values()), None)
        return addr

    async def find_broker_addr_or_fetch(self, mq: MessageQueue) -> str:
        """The master (or any replica) of ``mq``'s broker, refreshing the topic's
        route once when the broker is unknown; MQClientError when still unknown."""
        addr = self.find_broker_addr(mq.broker_name)
        if addr is None:
            await self.update_route(mq.topic)
            addr = self.find_broker_addr(mq.broker_name)
            if addr is None:
                raise MQClientError(-1, f"The broker[{mq.broker_name}] not exist")
        return addr

    def any_broker_of(self, topic: str) -> str | None:
        route = self.routes.get(topic)
        if route is None:
            return None
        for bd in route.brokerDatas:
            addr = bd.brokerAddrs.get(MASTER_ID) or next(iter(bd.brokerAddrs.values()), None)
            if addr:
                return addr
        return None

    # --- heartbeats / offsets / rebalance --------------------------------------
    def heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(self.client_id, list(self.producers),
                             [c.consumer_data() for c in self.consumers.values()])

    async def heartbeat_all(self) -> None:
        """HEART_BEAT to every broker (masters only when there are no consumers)."""
        if not self.producers and not self.consumers:
            return
        data = self.heartbeat_data()
        masters_only = not self.consumers
        for name, addrs in list(self.broker_addrs.items()):
            for bid, addr in addrs.items():
                if masters_only and bid != MASTER_ID:
                    continue
                try:
                    self.broker_versions[addr] = await self.api.heartbeat(addr, data)
                except Exception as e:
                    log.info("heartbeat to %s (%s) failed: %s", name, addr, e)

    def heartbeat_soon(self) -> None:
        """Heartbeat every broker now (at most once a second): a broker that
        restarted knows none of this client's groups until it hears one, and
        answers their pulls SUBSCRIPTION_NOT_EXIST until then (the periodic
        heartbeat could be 30 s away)."""
        now = time.monotonic()
        if now - self._last_heartbeat_soon < 1.0:
            return
        self._last_heartbeat_soon = now
        self._tasks = [t for t in self._tasks if not t.done()]
        self._spawn(self.heartbeat_all())

    async def persist_all_offsets(self) -> None:
        for c in list(self.consumers.values()):
            await c.persist_offsets()

    def rebalance_immediately(self) -> None:
        self._rebalance_wakeup.set()

    async def rebalance_all(self) -> None:
        for c in list(self.consumers.values()):
            try:
                await c.do_rebalance()
            except Exception as e:
                log.warning("rebalance of %s failed: %s", c.group, e)

    async def _rebalance_service(self) -> None:
        interval = min((getattr(c, "rebalance_interval", 20.0) for c in self.consumers.values()),
                       default=20.0)
        while self.started:
            # asyncio.timeout, not wait_for: 3.11's wait_for drops a cancellation that
            # arrives together with the wake-up (a NOTIFY during shutdown)
            try:
                async with asyncio.timeout(interval):
                    await self._rebalance_wakeup.wait()
            except TimeoutError:
                pass
            self._rebalance_wakeup.clear()
            await self.rebalance_all()
