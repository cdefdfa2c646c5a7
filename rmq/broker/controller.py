"""BrokerController: owns every broker component and runs its life cycle.

Mirrors RocketMQ's ``BrokerController``:

* construction: config managers, producer/consumer managers and their
  housekeeping, the outer API (name servers), request queues with the
  4.9.8 capacities, fast failure, stats;
* ``initialize()``: load topics.json, consumerOffset.json,
  subscriptionGroup.json, consumerFilter.json; create and load the message
  store; create the main and fast remoting servers; register processors;
* ``start()``: store, servers, services, housekeeping, registration with every
  name server, then the scheduled tasks (offsets every
  flushConsumerOffsetInterval, filters every 10 s, protectBroker every 3 min,
  water mark every 1 s, dispatch-behind every 60 s, daily stats, name server
  address refresh every 2 min, re-registration every registerNameServerPeriod
  clamped to 10-60 s, on a slave SlaveSynchronize every 10 s) and fast failure;
* ``shutdown()``: unregister, stop accepting and finish in-flight requests,
  stop services, persist every manager, shut the store down (it removes the
  abort file last).  Safe to call twice.

Hook points for the messaging processors: ``MESSAGING_PROCESSORS`` names the
module and class serving each group of request codes and the request queue
(RocketMQ's thread-pool queue) that bounds them; a processor is built as
``cls(controller)`` and may add arrival listeners (``add_arrival_listener``: long
polling) and ``services`` (objects with ``async start()``/``async shutdown()``).
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import inspect
import logging
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from rmq._fast import compiled
from rmq.broker import slave_synchronize as slave_sync
from rmq.broker.client_manager import (
    ClientHousekeepingService,
    ConsumerGroupEvent,
    ConsumerManager,
    ProducerManager,
)
from rmq.broker.configuration import Configuration
from rmq.broker.consumer_filter_manager import ConsumerFilterManager
from rmq.broker.consumer_offset_manager import ConsumerOffsetManager
from rmq.broker.fast_failure import BrokerFastFailure, QueuedProcessor, RequestQueue
from rmq.broker.outer_api import BrokerIdentity, BrokerOuterAPI
from rmq.broker.pop_order import OrderInfoManager
from rmq.broker.put_delay import PutDelay
from rmq.broker.stats import BrokerStats, ExecutionTimes, ms_until_next_morning
from rmq.broker.subscription_group_manager import SubscriptionGroupManager
from rmq.broker.topic_config_manager import TopicConfigManager
from rmq.common.codes import RequestCode
from rmq.common.config_manager import ConfigLoadError, ConfigManager, write_file_safely
from rmq.common.data_version import DataVersion
from rmq.common.logging import BROKER_LOGGER_NAME, WATER_MARK_LOGGER_NAME
from rmq.common.message import is_readable, is_writeable
from rmq.common.periodic import ScheduledTask
from rmq.common.top_addressing import DEFAULT_DOMAIN, DEFAULT_SUBGROUP, fetch_ns_addr, ws_addr
from rmq.common.topic_config import TopicConfig, TopicConfigSerializeWrapper
from rmq.remoting import RemotingCommand, RemotingServer
from rmq.remoting.connection_limit import ConnectionLimiter

log = logging.getLogger(BROKER_LOGGER_NAME)
watermark_log = logging.getLogger(WATER_MARK_LOGGER_NAME)

R = RequestCode


def _on_runs(stats: BrokerStats, forms: list[tuple], runs: list[tuple],
             counted: bool = False) -> None:
    """The store's listener of a send lane's read or a reput walk
    (``RunQueue.summary`` tuples), bound to the controller's statistics and
    ``_runs_forms`` (``BrokerController.runs_listener``): what
    ``_on_message_arriving`` does for each run, or for each put of a run that
    lists them -- the put counts (``counted``: those of the runs that list no
    puts are counted already, by the send lane), then every listener that has
    something to do; one with a runs form hears once, when it waits for
    anything or the runs hold a topic of its.  Twin of the compiled
    ``rmq._fast.lane_runs.on_runs``."""
    stats.inc_put_runs(runs, counted)
    for listener, form, holder, attr, topics in forms:
        if form is None:
            for topic, queue_id, qoff, tags, store_ts, _n, _s, _e, each in runs:
                if each is None:
                    listener(topic, queue_id, qoff, tags, store_ts)
                else:
                    for next_offset, last_tags, last_ts, _pn, _ps in each:
                        listener(topic, queue_id, next_offset, last_tags, last_ts)
            continue
        if holder is not None and not getattr(holder, attr):
            continue  # nobody waits
        if topics is not None:
            for run in runs:
                if run[0] in topics:
                    break
            else:
                continue  # none of its topics
        form(runs)


def _on_counted_runs(stats: BrokerStats, forms: list[tuple], runs: list[tuple]) -> None:
    """``_on_runs`` for a send lane that counted the puts of the runs that
    list none itself (twin of ``rmq._fast.lane_runs.on_counted_runs``)."""
    _on_runs(stats, forms, runs, True)


_lane_runs = compiled("lane_runs")
on_runs = _on_runs if _lane_runs is None else _lane_runs.on_runs
on_counted_runs = _on_counted_runs if _lane_runs is None else _lane_runs.on_counted_runs


@dataclass(frozen=True, slots=True)
class ProcessorSpec:
    """Where the processor of some request codes lives and which queue bounds it."""

    module: str  # under rmq.broker.processor
    cls: str
    codes: tuple[int, ...]
    queue: str  # a key of BrokerController.request_queues
    fast_port: bool = True  # PULL_MESSAGE is not served on the fast port


MESSAGING_PROCESSORS: tuple[ProcessorSpec, ...] = (
    ProcessorSpec("send", "SendMessageProcessor",
                  (R.SEND_MESSAGE, R.SEND_MESSAGE_V2, R.SEND_BATCH_MESSAGE,
                   R.CONSUMER_SEND_MSG_BACK), "send"),
    ProcessorSpec("pull", "PullMessageProcessor", (R.PULL_MESSAGE,), "pull", fast_port=False),
    ProcessorSpec("reply", "ReplyMessageProcessor",
                  (R.SEND_REPLY_MESSAGE, R.SEND_REPLY_MESSAGE_V2), "reply"),
    ProcessorSpec("query", "QueryMessageProcessor",
                  (R.QUERY_MESSAGE, R.VIEW_MESSAGE_BY_ID), "query"),
    ProcessorSpec("client_manage", "ClientManageProcessor", (R.HEART_BEAT,), "heartbeat"),
    ProcessorSpec("client_manage", "ClientManageProcessor",
                  (R.UNREGISTER_CLIENT, R.CHECK_CLIENT_CONFIG), "client_manager"),
    ProcessorSpec("consumer_manage", "ConsumerManageProcessor",
                  (R.GET_CONSUMER_LIST_BY_GROUP, R.UPDATE_CONSUMER_OFFSET,
                   R.QUERY_CONSUMER_OFFSET), "consumer_manager"),
    ProcessorSpec("consumer_manage", "ConsumerManageProcessor",
                  (R.LOCK_BATCH_MQ, R.UNLOCK_BATCH_MQ), "admin"),
    ProcessorSpec("end_transaction", "EndTransactionProcessor", (R.END_TRANSACTION,),
                  "end_transaction"),
    ProcessorSpec("pop", "PopMessageProcessor",
                  (R.POP_MESSAGE, R.PEEK_MESSAGE, R.NOTIFICATION, R.POLLING_INFO), "pull"),
    ProcessorSpec("ack", "AckMessageProcessor",
                  (R.ACK_MESSAGE, R.BATCH_ACK_MESSAGE, R.CHANGE_MESSAGE_INVISIBLETIME),
                  "consumer_manager"),
    ProcessorSpec("query_assignment", "QueryAssignmentProcessor",
                  (R.QUERY_ASSIGNMENT, R.SET_MESSAGE_REQUEST_MODE), "admin"),
    ProcessorSpec("recall", "RecallMessageProcessor", (R.RECALL_MESSAGE,), "send"),
)

# request queue name -> the BrokerConfig capacity property (None: unbounded in 4.9.8)
QUEUE_CAPACITIES: dict[str, str | None] = {
    "send": "sendThreadPoolQueueCapacity",
    "put": "putThreadPoolQueueCapacity",
    "pull": "pullThreadPoolQueueCapacity",
    "reply": "replyThreadPoolQueueCapacity",
    "query": "queryThreadPoolQueueCapacity",
    "client_manager": "clientManagerThreadPoolQueueCapacity",
    "heartbeat": "heartbeatThreadPoolQueueCapacity",
    "end_transaction": "endTransactionPoolQueueCapacity",
    "consumer_manager": None,
    "admin": None,
}

# request queue name -> the BrokerConfig thread count (the number of workers)
QUEUE_WORKERS: dict[str, str] = {
    "send": "sendMessageThreadPoolNums",
    "put": "putMessageFutureThreadPoolNums",
    "pull": "pullMessageThreadPoolNums",
    "reply": "processReplyMessageThreadPoolNums",
    "query": "queryMessageThreadPoolNums",
    "client_manager": "clientManageThreadPoolNums",
    "heartbeat": "heartbeatThreadPoolNums",
    "end_transaction": "endTransactionThreadPoolNums",
    "consumer_manager": "consumerManageThreadPoolNums",
    "admin": "adminBrokerThreadPoolNums",
}

# queues whose waiting requests fast failure expires, with their BrokerConfig limit
FAST_FAILURE_LIMITS = {
    "send": "waitTimeMillsInSendQueue",
    "pull": "waitTimeMillsInPullQueue",
    "heartbeat": "waitTimeMillsInHeartbeatQueue",
    "end_transaction": "waitTimeMillsInTransactionQueue",
}


async def maybe_await(value: Any) -> Any:
    """Store methods may be plain or coroutine functions; accept both."""
    if inspect.isawaitable(value):
        return await value
    return value


class _Optional:
    """A service whose start failure is logged instead of failing the broker."""

    def __init__(self, inner: Any, what: str) -> None:
        self.inner = inner
        self.what = what
        self.started = False

    async def start(self) -> None:
        try:
            await self.inner.start()
            self.started = True
        except Exception as exc:  # noqa: BLE001 - logged; the broker goes on without it
            log.error("%s not started: %s", self.what, exc)
            print(f"{self.what} not started: {exc}", file=sys.stderr, flush=True)

    async def shutdown(self) -> None:
        if self.started:
            await self.inner.shutdown()


class BrokerController:
    def __init__(self, settings) -> None:
        self.settings = settings
        self.broker_config = bc = settings.broker
        self.server_config = settings.server
        self.client_config = settings.client
        self.store_config = settings.store
        self.log = log
        root = self.store_config.storePathRootDir
        self.topic_config_manager = TopicConfigManager(bc, root, self._register_after_new_topic)
        lmq = self.store_config.enableLmq
        self.topic_config_manager.lmq = lmq
        self.consumer_offset_manager = ConsumerOffsetManager(root, lmq)
        self.consumer_order_info_manager = OrderInfoManager(root)
        self.subscription_group_manager = SubscriptionGroupManager(bc, root)
        self.subscription_group_manager.lmq = lmq
        self.consumer_filter_manager = ConsumerFilterManager(bc, root)
        # the ext units' bitmaps are as long as the bloom filter (4.9.8 sets it here)
        self.store_config.bitMapLengthConsumeQueueExt = self.consumer_filter_manager.bloom.m
        self.producer_manager = ProducerManager()
        self.consumer_manager = ConsumerManager(self._on_consumer_ids_changed)
        self.client_housekeeping = ClientHousekeepingService(self.producer_manager,
                                                             self.consumer_manager)
        self.outer_api = BrokerOuterAPI(self.client_config)
        self.slave_synchronize = slave_sync.SlaveSynchronize(self)
        self.stats = BrokerStats(bc.brokerClusterName, bc.enableDetailStat)
        # kept while the metrics exporter is on (_initial_metrics)
        self.rpc_latency: Any = None
        # the gRPC endpoint's calls (rmq.remoting.rpc_latency.NamedLatency), set by it
        self.grpc_rpc_latency: Any = None
        self.topic_create_times: ExecutionTimes | None = None
        self.group_create_times: ExecutionTimes | None = None
        self.configuration = Configuration(settings)
        # (the settings read by C calls; see on_put_delay_changed)
        self.put_delay = PutDelay(partial(getattr, bc, "rmqTestPutDelayMillis"),
                                  partial(getattr, self.store_config,
                                          "osPageCacheBusyTimeOutMills"))
        self.request_queues = {
            name: RequestQueue(name, getattr(bc, prop) if prop else None,
                               getattr(bc, QUEUE_WORKERS[name]))
            for name, prop in QUEUE_CAPACITIES.items()
        }
        send_queue = self.request_queues["send"]
        send_queue.before_run = self.put_delay.hold
        self.on_put_delay_changed()
        self.fast_failure = BrokerFastFailure(
            self.request_queues,
            {q: (lambda p=prop: getattr(self.broker_config, p))
             for q, prop in FAST_FAILURE_LIMITS.items()},
            self._page_cache_busy, lambda: self.broker_config.brokerFastFailureEnable)
        self.message_store: Any = None
        self.ha_service: Any = None
        self.transactional_message_service: Any = None
        self.transactional_message_check_listener: Any = None
        self.transactional_message_check_service: Any = None
        self.remoting_server: RemotingServer | None = None
        self.fast_remoting_server: RemotingServer | None = None
        self.admin_processor: Any = None
        self.send_lane_support: Any = None  # rmq.broker.send_lane, while the lane is on
        self.pull_lane_support: Any = None  # rmq.broker.pull_lane, while the lane is on
        self.pop_lane_support: Any = None  # rmq.broker.pop_lane, while the lane is on
        self.access_validator: Any = None  # plain ACL (aclEnable=true)
        # what each listener is told of a send lane's read (add_arrival_listener):
        # (per-run listener, runs form or None, waiting holder, its attribute, topics)
        self._runs_forms: list[tuple] = []
        # the store's runs listener, and the same for a send lane that counted
        # its runs' puts itself (``BrokerStats.add_put_source``)
        self.runs_listener = partial(on_runs, self.stats, self._runs_forms)
        self.counted_runs_listener = partial(on_counted_runs, self.stats, self._runs_forms)
        self.services: list[Any] = []
        self.master_addr: str | None = None
        self.update_master_ha_periodically = False
        self._tasks: list[ScheduledTask] = []
        self._background: set[asyncio.Task] = set()
        self._register_lock = asyncio.Lock()
        # set once a whole topic table has gone to the name servers: a one-topic
        # registration waits for it, else it could reach a name server first and,
        # carrying the data version the whole table then carries, make it skip
        # the table
        self._sent_whole_table = asyncio.Event()
        self._persist_lock = threading.Lock()
        self._started = False
        self._shutdown_started = False
        self._shutdown_done = asyncio.Event()

    # ---- identity ---------------------------------------------------------------
    def broker_addr(self) -> str:
        return f"{self.broker_config.brokerIP1}:{self.server_config.listenPort}"

    def ha_server_addr(self) -> str:
        return f"{self.broker_config.brokerIP2}:{self.store_config.haListenPort}"

    def identity(self) -> BrokerIdentity:
        bc = self.broker_config
        return BrokerIdentity(bc.brokerClusterName, self.broker_addr(), bc.brokerName,
                              bc.brokerId)

    def server_for(self, channel) -> RemotingServer:
        """The server that accepted ``channel``: requests to a client (reply
        push, consumer queries) must go through it, because only that server
        sees the client's answers.  The accepting port tells them apart."""
        fast = self.fast_remoting_server
        if fast is not None and fast.port and \
                channel.local_addr.rpartition(":")[2] == str(fast.port):
            return fast
        return self.remoting_server

    def is_slave(self) -> bool:
        role = self.store_config.brokerRole
        return getattr(role, "name", role) == "SLAVE"

    def boot_line(self) -> str:
        tip = (f"The broker[{self.broker_config.brokerName}, {self.broker_addr()}] boot "
               f"success. serializeType=JSON")
        if self.broker_config.namesrvAddr:
            tip += f" and name server is {self.broker_config.namesrvAddr}"
        return tip

    # ---- initialize ---------------------------------------------------------------
    async def initialize(self) -> bool:
        try:
            for manager in (self.topic_config_manager, self.consumer_offset_manager,
                            self.subscription_group_manager, self.consumer_filter_manager,
                            self.consumer_order_info_manager):
                manager.load()
        except ConfigLoadError as exc:
            log.error("load config failed: %s", exc)
            print(f"broker initialize failed: {exc}", flush=True)
            return False
        commit_log = self._commit_log_kind()
        if not await self._create_store(commit_log):
            return False
        if commit_log is not None:
            self._initial_dledger()
        else:
            self._create_ha_service()
        self._initial_transaction()
        self._create_servers()
        self.register_processors()
        if not self._initial_acl():
            return False
        if not self._initial_metrics():
            return False
        self._initial_proxy()
        if self.broker_config.namesrvAddr:
            self.outer_api.update_name_server_address_list(self.broker_config.namesrvAddr)
            log.info("Set user specified name server address: %s",
                     self.broker_config.namesrvAddr)
        if self.is_slave() and self.ha_service is not None:
            ha = self.store_config.haMasterAddress
            if ha and len(ha) >= 6:
                await self._update_ha_master(ha)
            else:
                self.update_master_ha_periodically = True
        return True

    def _commit_log_kind(self) -> type | None:
        """The commit log the store is made with, chosen once here: a DLedger
        group's with ``enableDLegerCommitLog`` (no HA service then), else None
        for the store's own ``CommitLog`` (replicated by the HA service)."""
        if not self.store_config.enableDLegerCommitLog:
            return None
        from rmq.dledger.commit_log import DLedgerCommitLog

        return DLedgerCommitLog

    async def _create_store(self, commit_log: type | None = None) -> bool:
        from rmq.store import DefaultMessageStore

        self.message_store = DefaultMessageStore(
            self.store_config,
            store_host=(self.broker_config.brokerIP1, self.server_config.listenPort),
            broker_cluster_name=self.broker_config.brokerClusterName,
            message_arriving_listener=self._on_message_arriving, commit_log=commit_log)
        # the store calls the (compiled) walk straight: no frame of ours per read
        self.message_store.message_runs_listener = self.runs_listener
        # CommitLogDispatcherCalcBitMap (it checks enableCalcFilterBitMap per message)
        self.message_store.bitmap_calculator = self.consumer_filter_manager.calc_bitmap
        ok = await maybe_await(self.message_store.load())
        if ok is False:
            log.error("message store load failed")
            print("broker initialize failed: the message store could not be loaded "
                  "(see store.log)", flush=True)
            return False
        self._initial_timer()
        return True

    def _initial_timer(self) -> None:
        """RocketMQ 5 timer messages (rmq/store/timer): the wheel when
        ``timerWheelEnable``, else only the hook that refuses timer sends."""
        from rmq.store.timer import TimerMessageStore, TimerPutHook

        self.timer_message_store = None
        if not self.store_config.timerWheelEnable:
            self.message_store.put_message_hooks.append(TimerPutHook(self.store_config))
            return
        # the timer topic is a system topic of one queue (TopicConfigManager, 5.3.3)
        self.topic_config_manager._system(TimerMessageStore.TOPIC, 1)
        timer = TimerMessageStore(self.message_store, self.store_config)
        timer.load()
        self.timer_message_store = timer
        self.add_arrival_listener(timer.on_message_arriving, timer.on_message_runs,
                                  topics=frozenset((timer.TOPIC,)))
        if not self.is_slave():
            self.services.append(timer)

    def _initial_dledger(self) -> None:
        """The commit log is a DLedger group's: no HA service; the broker is a
        slave until the group makes it leader (DLedgerRoleChangeHandler), and
        the group's endpoint starts and stops with the other services."""
        from rmq.broker.dledger_role_change import DLedgerRoleChangeHandler, DLedgerService
        from rmq.store.config import BrokerRole

        self.store_config.brokerRole = BrokerRole.SLAVE
        commit_log = self.message_store.commit_log
        self.dledger_role_change = DLedgerRoleChangeHandler(self, commit_log)
        self.services.append(DLedgerService(commit_log.server))

    def _create_ha_service(self) -> None:
        """Commit-log replication on the loop: a master serves slaves on
        listenPort + 1 and SYNC_MASTER puts wait for it; a slave follows its master."""
        from rmq.store.ha import HAService

        self.ha_service = HAService(self.message_store, self.server_config.bindAddress)
        self.message_store.ha_service = self.ha_service
        self.services.append(self.ha_service)
        if not self.is_slave():
            self.add_arrival_listener(self.ha_service.on_message_arriving,
                                      self.ha_service.on_message_runs,
                                      waiting=(self.ha_service, "data_waiter"))

    def _initial_transaction(self) -> None:
        """``initialTransaction``: the half-message service, its check listener
        and the periodic back-check (started on masters only)."""
        from rmq.broker.transaction.bridge import TransactionalMessageBridge
        from rmq.broker.transaction.check_listener import TransactionalMessageCheckListener
        from rmq.broker.transaction.check_service import TransactionalMessageCheckService
        from rmq.broker.transaction.service import TransactionalMessageService

        self.transactional_message_service = TransactionalMessageService(
            TransactionalMessageBridge(self), lambda: self.store_config.fileReservedTime)
        self.transactional_message_check_listener = TransactionalMessageCheckListener(self)
        self.transactional_message_check_service = TransactionalMessageCheckService(self)

    def _create_servers(self) -> None:
        cfg = self.server_config
        limiter = ConnectionLimiter(cfg.serverMaxConnections, cfg.serverMaxConnectionsPerAddress)
        self.remoting_server = RemotingServer(cfg, self.client_housekeeping, name="broker",
                                              limiter=limiter)
        fast = copy.copy(cfg)
        fast.listenPort = cfg.listenPort - 2
        self.fast_remoting_server = RemotingServer(fast, self.client_housekeeping,
                                                   name="broker-fast", limiter=limiter)

    def _initial_acl(self) -> bool:
        """``initialAcl``: with aclEnable, plain ACL checks every request on both
        ports and its files are watched.  Rules that do not load stop the start
        (4.9.8 would carry on with ACL silently off)."""
        bc = self.broker_config
        if not bc.aclEnable:
            log.info("The broker does not enable acl")
            return True
        from rmq.acl import AclException
        from rmq.acl.validator import PlainAccessValidator

        try:
            self.access_validator = PlainAccessValidator(bc.rocketmqHome, bc.aclPlainFile)
        except AclException as exc:
            log.error("plain ACL rules cannot be loaded: %s", exc)
            print(f"broker initialize failed: ACL: {exc}", file=sys.stderr, flush=True)
            return False
        for server in (self.remoting_server, self.fast_remoting_server):
            server.register_rpc_hook(self.access_validator)
        self.services.append(self.access_validator)
        log.info("plain ACL enabled: %s", ", ".join(self.access_validator.manager.file_list()))
        return True

    def _initial_metrics(self) -> bool:
        """``metricsExporterType=PROM``: a Prometheus endpoint on the loop
        (``rmq.broker.metrics``); an exporter type rmq does not serve stops the
        start with a one-line error."""
        from rmq.common.metrics_http import exporter_enabled, exporter_type_error

        bc = self.broker_config
        error = exporter_type_error(bc.metricsExporterType)
        if error is not None:
            print(f"broker initialize failed: {error}", file=sys.stderr, flush=True)
            return False
        if not exporter_enabled(bc.metricsExporterType):
            return True
        from prometheus_client import CollectorRegistry

        from rmq.broker.metrics import BrokerCollector
        from rmq.common.metrics_http import MetricsHttpServer
        from rmq.remoting.rpc_latency import RpcLatency

        self.rpc_latency = RpcLatency()
        self.topic_create_times = ExecutionTimes(("invocation_status", "is_system"))
        self.group_create_times = ExecutionTimes(("invocation_status",))
        for holder in (self.remoting_server, self.fast_remoting_server,
                       getattr(self, "pull_request_hold_service", None)):
            if holder is not None:
                holder.rpc_latency = self.rpc_latency
        registry = CollectorRegistry(auto_describe=False)
        registry.register(BrokerCollector(self))
        self.stats.size_histograms = {}
        self.metrics_server = MetricsHttpServer(registry, bc.metricsPromExporterHost,
                                                bc.metricsPromExporterPort)
        self.services.append(self.metrics_server)
        return True

    def _initial_proxy(self) -> None:
        """5.x clients (``enableProxy``): the gRPC endpoint ``rmq.proxy.service``,
        loaded by name (it sits above the broker and calls its processors) and
        run as one of the services.  It is an addition to the remoting ports:
        when it cannot load (protocol modules not generated) or listen (port in
        use), the broker says so in its log and serves 4.x clients as before."""
        if not self.broker_config.enableProxy:
            return
        try:
            module = importlib.import_module("rmq.proxy.service")
        except ImportError as exc:
            log.error("enableProxy=true but the gRPC endpoint cannot be loaded (%s): 5.x clients "
                      "are not served (make proto generates its protocol modules)", exc)
            return
        self.services.append(_Optional(module.ProxyService(self), "gRPC endpoint"))

    def register_processors(self) -> None:
        """Admin processor as default on both ports; messaging processors by code."""
        from rmq.broker.processor.admin import AdminBrokerProcessor

        built: dict[tuple[str, str], Any] = {}
        for spec in MESSAGING_PROCESSORS:
            key = (spec.module, spec.cls)
            if key not in built:
                built[key] = self._build_processor(spec)
            processor = built[key]
            if processor is None:
                continue
            queue = self.request_queues[spec.queue]
            wrapped = QueuedProcessor(processor, queue)
            for code in spec.codes:
                self.remoting_server.register_processor(code, wrapped, queue.capacity,
                                                        pool=spec.queue)
                if spec.fast_port:
                    self.fast_remoting_server.register_processor(code, wrapped, queue.capacity,
                                                                 pool=spec.queue)
        send = built.get(("send", "SendMessageProcessor"))
        if send is not None and self.broker_config.rmqSendLaneEnable:
            self._install_send_lane(send)
        pop, ack = built.get(("pop", "PopMessageProcessor")), built.get(("ack", "AckMessageProcessor"))
        if pop is not None and ack is not None and self.broker_config.rmqPopLaneEnable:
            self._install_pop_lane(pop, ack)
        pull = built.get(("pull", "PullMessageProcessor"))
        if pull is not None and self.broker_config.rmqPullLaneEnable:
            self._install_pull_lane(pull)
        self.admin_processor = AdminBrokerProcessor(self)
        admin = QueuedProcessor(self.admin_processor, self.request_queues["admin"])
        self.remoting_server.register_default_processor(admin)
        self.fast_remoting_server.register_default_processor(admin)

    def _install_send_lane(self, send: Any) -> None:
        """Plain single sends are served straight from the receive buffer on
        both ports (``rmq.broker.send_lane``); the lane itself declines
        whatever the moment or the request rules out."""
        from rmq.broker.send_lane import SendLaneSupport, make_send_lane

        self.send_lane_support = SendLaneSupport(send)
        make = make_send_lane
        if self.message_store.commit_log.waits_for_quorum:  # a DLedger group's member
            from rmq.broker.dledger_lane import make_dledger_lane as make
        for server in (self.remoting_server, self.fast_remoting_server):
            server.lane = make(self.send_lane_support, server.config.frameMaxLength)

    def _install_pull_lane(self, pull: Any) -> None:
        """Pulls that find messages are served straight from the receive
        buffer on the main port, where PULL_MESSAGE is served
        (``rmq.broker.pull_lane``), beside the send lane when it is on."""
        from rmq.broker.lanes import join_lanes
        from rmq.broker.pull_lane import PullLaneSupport, make_pull_lane

        server = self.remoting_server
        self.pull_lane_support = PullLaneSupport(pull)
        lane = make_pull_lane(self.pull_lane_support, server.config.frameMaxLength)
        server.lane = join_lanes(server.lane, lane)

    def _install_pop_lane(self, pop: Any, ack: Any) -> None:
        """Pops that find messages and acks are served straight from the
        receive buffer on both ports, where they are served
        (``rmq.broker.pop_lane``), after the send lane and before the pull
        lane (a pull frame costs the pop lane a few byte compares; a pop frame
        would cost the pull lane a header read)."""
        from rmq.broker.lanes import join_lanes
        from rmq.broker.pop_lane import PopLaneSupport, make_pop_lane

        self.pop_lane_support = PopLaneSupport(pop, ack)
        for server in (self.remoting_server, self.fast_remoting_server):
            lane = make_pop_lane(self.pop_lane_support, server.config.frameMaxLength, server)
            server.lane = join_lanes(server.lane, lane)

    def _build_processor(self, spec: ProcessorSpec) -> Any:
        name = f"rmq.broker.processor.{spec.module}"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            log.warning("%s is not part of this build: codes %s are not served", name,
                        [int(c) for c in spec.codes])
            return None
        return getattr(module, spec.cls)(self)

    # ---- start --------------------------------------------------------------------
    def _pacer(self) -> Any:
        """What paces the client ports' polls: a busy poll when asked for
        (``rmqBusyPollMicros``), else read naps (``rmqReadNapMicros``) when
        every send is answered within its read; None for neither."""
        loop = asyncio.get_running_loop()
        config = self.broker_config
        if config.rmqBusyPollMicros > 0:
            from rmq.remoting.busy_poll import BusyPoll

            return BusyPoll(loop, config.rmqBusyPollMicros)
        if config.rmqReadNapMicros <= 0:
            return None
        from rmq.store.config import BrokerRole, FlushDiskType

        store = self.store_config
        waits = ("enableDLegerCommitLog" if store.enableDLegerCommitLog
                 else "SYNC_MASTER" if store.brokerRole is BrokerRole.SYNC_MASTER
                 else "SYNC_FLUSH" if store.flushDiskType is FlushDiskType.SYNC_FLUSH else None)
        if waits is not None:
            # a send's answer waits for a follower, a slave or the flush: a
            # nap would hold it back
            log.info("rmqReadNapMicros: no read naps with %s", waits)
            return None
        from rmq.remoting.read_nap import ReadNap

        return ReadNap(loop, config.rmqReadNapMicros)

    async def start(self) -> None:
        self.remoting_server.pacer = self.fast_remoting_server.pacer = self._pacer()
        await maybe_await(self.message_store.start())
        await self.remoting_server.start()
        await self.fast_remoting_server.start()
        for service in self.services:
            await service.start()
        if not self.is_slave():
            await self.transactional_message_check_service.start()
        await self.client_housekeeping.start()
        self._started = True
        await self.register_broker_all(check_order_config=True, oneway=False, force=True)
        self._schedule_tasks()
        for task in self._tasks:
            await task.start()
        await self.fast_failure.start()

    def _every(self, name: str, initial_s: float, period_s: Callable[[], float],
               fn: Callable[[], Awaitable[None] | None]) -> None:
        self._tasks.append(ScheduledTask(name, initial_s, period_s, fn, log))

    def _schedule_tasks(self) -> None:
        bc = self.broker_config
        self._every("brokerStats", ms_until_next_morning() / 1000, lambda: 86400.0,
                    self.stats.record)
        self._every("persistConsumerOffset", 10, lambda: bc.flushConsumerOffsetInterval / 1000,
                    lambda: self._persist_off_loop(self.consumer_offset_manager))
        self._every("persistConsumerFilter", 10, lambda: 10.0,
                    lambda: self._persist_off_loop(self.consumer_filter_manager))
        self._every("protectBroker", 180, lambda: 180.0, self.protect_broker)
        self._every("printWaterMark", 10, lambda: 1.0, self.print_water_mark)
        self._every("foldStats", 1, lambda: 1.0, self.stats.fold)
        # stats.log as 4.9.8's StatsItemSets print it: at each minute, hour and
        # (2 s before) midnight, the moment items every 5 minutes
        now = time.time()
        self._every("statsAtMinutes", 60 - now % 60, lambda: 60.0,
                    lambda: self.stats.print_window("Minute"))
        self._every("statsAtHour", 3600 - now % 3600, lambda: 3600.0,
                    lambda: self.stats.print_window("Hour"))
        self._every("statsAtDay", max(0.0, ms_until_next_morning() / 1000 - 2), lambda: 86400.0,
                    lambda: self.stats.print_window("Day"))
        self._every("statsMoments", 60 - now % 60, lambda: 300.0, self.stats.print_moments)
        self._every("dispatchBehind", 10, lambda: 60.0, self._log_dispatch_behind)
        if bc.namesrvAddr:
            self._every("updateNameServerAddr", 10, lambda: 120.0,
                        lambda: self.outer_api.update_name_server_address_list(bc.namesrvAddr))
        elif bc.fetchNamesrvAddrByAddressServer:
            self._every("fetchNameServerAddr", 10, lambda: 120.0, self.fetch_name_server_addr)
        self._every("registerBrokerAll", 10, lambda: bc.register_period_ms() / 1000,
                    lambda: self.register_broker_all(True, False, bc.forceRegister))
        if self.is_slave():
            self._every("slaveSynchronize", slave_sync.FIRST_RUN_S, lambda: slave_sync.PERIOD_S,
                        self.slave_synchronize.sync_all)
        else:
            self._every("printMasterAndSlaveDiff", 10, lambda: 60.0, self._log_slave_diff)

    async def fetch_name_server_addr(self) -> None:
        """fetchNamesrvAddrByAddressServer (no namesrvAddr set): ask the address
        server every 2 minutes, 10 s after start, and use what it answers."""
        props = self.settings.file_properties
        url = ws_addr(props.get("rmqAddressServerDomain", DEFAULT_DOMAIN),
                      props.get("rmqAddressServerSubGroup", DEFAULT_SUBGROUP))
        addrs = await asyncio.to_thread(fetch_ns_addr, url)
        if not addrs:
            return
        before = self.outer_api.name_server_addresses
        self.outer_api.update_name_server_address_list(addrs)
        if self.outer_api.name_server_addresses != before:  # register with them at once
            bc = self.broker_config
            await self.register_broker_all(True, False, bc.forceRegister)

    async def _persist_off_loop(self, manager: ConfigManager) -> None:
        """A periodic persist: the text is encoded on the loop (a consistent
        snapshot), the write and its fsync (2-12 ms on this kind of disk) run
        in a worker thread so that they do not stall every request in flight.
        A slave persists on the loop: its synchronization with the master
        writes the same files there."""
        if self.is_slave():
            manager.persist()
            return
        text = manager.encode(pretty=True)
        await asyncio.to_thread(self.write_config, text, manager.config_file_path())

    def write_config(self, text: str, path: str) -> None:
        """One writer per process at a time (the shutdown persist waits here
        for a periodic write still running); I/O errors are logged as Java does."""
        with self._persist_lock:
            try:
                write_file_safely(text, path)
            except OSError as exc:
                log.error("persist file %s exception: %s", path, exc)

    def _log_dispatch_behind(self) -> None:
        log.info("dispatch behind commit log %d bytes", self.message_store.dispatch_behind_bytes())

    def _log_slave_diff(self) -> None:
        if self.ha_service is None:  # a DLedger commit log has no HA service to ask
            return
        log.info("Slave fall behind master: %d bytes", self.ha_service.slave_fall_behind_much())

    def protect_broker(self) -> None:
        """Disable consumption of groups reading more than consumerFallbehindThreshold
        behind (disableConsumeIfConsumerReadSlowly)."""
        bc = self.broker_config
        if not bc.disableConsumeIfConsumerReadSlowly:
            return
        for group in self.stats.groups_falling_behind(bc.consumerFallbehindThreshold):
            log.info("[PROTECT_BROKER] the consumer[%s] consume slowly, disable it", group)
            self.subscription_group_manager.disable_consume(group)

    def print_water_mark(self) -> None:
        for title, name in (("Send", "send"), ("Pull", "pull"), ("Query", "query"),
                            ("Transaction", "end_transaction")):
            q = self.request_queues[name]
            watermark_log.info("[WATERMARK] %s Queue Size: %d SlowTimeMills: %d", title, len(q),
                               q.head_wait_ms())

    def _page_cache_busy(self) -> bool:
        if self.put_delay.page_cache_busy():
            return True
        store = self.message_store
        return store is not None and bool(store.is_os_page_cache_busy())

    # ---- registration ---------------------------------------------------------------
    async def register_broker_all(self, check_order_config: bool, oneway: bool,
                                  force: bool) -> None:
        """Send the topic table to every name server (``registerBrokerAll``)."""
        async with self._register_lock:
            wrapper = self.topic_config_manager.build_topic_config_serialize_wrapper()
            perm = self.broker_config.brokerPermission
            if not is_writeable(perm) or not is_readable(perm):
                wrapper.topicConfigTable = {
                    name: TopicConfig(name, tc.readQueueNums, tc.writeQueueNums, perm)
                    for name, tc in wrapper.topicConfigTable.items()
                }
            timeout = self.broker_config.registerBrokerTimeoutMills
            if not force and not await self.outer_api.need_register(
                    self.identity(), wrapper.dataVersion, timeout):
                return
            try:
                results = await self.outer_api.register_broker_all(
                    self.identity(), self.ha_server_addr(), wrapper, [], oneway, timeout,
                    self.broker_config.compressedRegister)
            finally:
                self._sent_whole_table.set()
            if results:
                await self._apply_register_result(results[0], check_order_config)

    async def register_increment_broker_data(self, tc: TopicConfig) -> None:
        """Register just one changed topic (after UPDATE_AND_CREATE_TOPIC),
        once the start-up registration has sent the whole table."""
        await self._sent_whole_table.wait()
        async with self._register_lock:
            dv = self.topic_config_manager.data_version
            wrapper = TopicConfigSerializeWrapper({tc.topicName: tc},
                                                  DataVersion(dv.timestamp, dv.counter))
            perm = self.broker_config.brokerPermission
            if not is_writeable(perm) or not is_readable(perm):
                wrapper.topicConfigTable = {
                    tc.topicName: TopicConfig(tc.topicName, tc.readQueueNums, tc.writeQueueNums,
                                              perm)}
            results = await self.outer_api.register_broker_all(
                self.identity(), self.ha_server_addr(), wrapper, [], False,
                self.broker_config.registerBrokerTimeoutMills,
                self.broker_config.compressedRegister)
            if results:
                await self._apply_register_result(results[0], True)

    async def _apply_register_result(self, result, check_order_config: bool) -> None:
        if self.update_master_ha_periodically and result.ha_server_addr:
            await self._update_ha_master(result.ha_server_addr)
        changed = result.master_addr != self.master_addr
        self.master_addr = result.master_addr
        if changed and result.master_addr and self.is_slave():
            self.log.info("the master of %s is now %s", self.broker_config.brokerName,
                          result.master_addr)
        if changed and result.master_addr and self.is_slave() and self._started:
            # a new master (or the first one): its metadata now, not at the next round
            self._spawn(self.slave_synchronize.sync_all())
        if check_order_config:
            self.topic_config_manager.update_order_topic_config(result.kv_table)

    async def _update_ha_master(self, addr: str) -> None:
        if self.ha_service is not None:
            self.ha_service.update_master_address(addr)

    def _register_after_new_topic(self) -> None:
        """A topic was auto-created: tell the name servers at once (oneway)."""
        if not self._started or self._shutdown_started:
            return
        self._spawn(self.register_broker_all(False, True, True))

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ---- client events ---------------------------------------------------------------
    def _on_consumer_ids_changed(self, event: ConsumerGroupEvent, group: str, arg: Any) -> None:
        """``DefaultConsumerIdsChangeListener``."""
        if event is ConsumerGroupEvent.CHANGE:
            if self.broker_config.notifyConsumerIdsChangedEnable and arg:
                for channel in arg:
                    self.notify_consumer_ids_changed(channel, group)
        elif event is ConsumerGroupEvent.UNREGISTER:
            self.consumer_filter_manager.unregister(group)
        elif event is ConsumerGroupEvent.REGISTER:
            self.consumer_filter_manager.register_group(group, arg or ())

    def notify_consumer_ids_changed(self, channel, group: str) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED (oneway) to one consumer connection."""
        request = RemotingCommand.create_request(R.NOTIFY_CONSUMER_IDS_CHANGED,
                                                 {"consumerGroup": group})
        request.mark_oneway()
        try:
            channel.write(request)
        except Exception as exc:  # the consumer went away; housekeeping removes it
            log.warning("notifyConsumerIdsChanged to %s failed: %s", channel.remote_addr, exc)

    def _on_message_arriving(self, topic: str, queue_id: int, next_offset: int, tags_code: int,
                             store_ts: int, nums: int = 1, size: int = 0, events: int = 1) -> None:
        """The store's arrival listener: count the put (``nums`` messages of
        ``size`` bytes in ``events`` requests: a batch is one, as 4.9.8 counts
        it), tell long polling and the delay-level service (explicit
        arguments: called once per message or run).  A listener that said
        when it has nothing to do (``add_arrival_listener``'s ``waiting`` and
        ``topics``) is not called then, as for the send lane's runs: a revive
        record or a plain send nobody waits for costs an attribute read per
        such listener, not a call."""
        self.stats.inc_put(topic, queue_id, nums, size, events)
        for listener, _runs, holder, attr, topics in self._runs_forms:
            if holder is not None and not getattr(holder, attr):
                continue  # nobody waits: the listener would return at once
            if topics is not None and topic not in topics:
                continue  # none of its topics: likewise
            listener(topic, queue_id, next_offset, tags_code, store_ts)

    def add_arrival_listener(self, each: Callable[..., None],
                             runs: Callable[[list[tuple]], None] | None = None, *,
                             waiting: tuple[Any, str] | None = None,
                             topics: frozenset[str] | None = None) -> None:
        """Listen to stored messages: ``each(topic, queue_id, next_offset,
        tags_code, store_ts)`` per message or run of one queue, ``runs`` with
        the send lane's whole read at once (``RunQueue.summary`` tuples; it
        must do what ``each`` would do for every run and every put the run
        lists): a produce-only read over many queues then costs each
        listener one call, not one per queue.  A listener that has something
        to do only while somebody waits says where that shows, ``waiting``
        (an object and the name of an attribute that is falsy while nobody
        waits), and one that cares for some topics only names them
        (``topics``): a read nobody waits on and of none of those topics
        then costs it an attribute read or a membership test, not a call."""
        self._runs_forms.append((each, runs, *(waiting or (None, "")), topics))

    # ---- runtime config changes ------------------------------------------------------
    def on_broker_permission_changed(self) -> None:
        """brokerPermission changed at runtime: new data version, re-register now."""
        self.topic_config_manager.bump_data_version()
        self._spawn(self.register_broker_all(False, False, True))

    def on_put_delay_changed(self) -> None:
        """rmqTestPutDelayMillis set (at start or at runtime): the send pool
        asks the delay's ``active`` only while the setting is on, so with it
        off (every broker but a test's) a lane's per-read check of the pool
        is a None test, not a Python call."""
        delay = self.put_delay
        self.request_queues["send"].before_run_active = \
            delay.active if delay.delay_ms() > 0 else None

    # ---- shutdown --------------------------------------------------------------------
    async def shutdown(self) -> None:
        """Orderly stop; a second call waits for the first one to finish."""
        if self._shutdown_started:
            await self._shutdown_done.wait()
            return
        self._shutdown_started = True
        try:
            await self._shutdown()
        finally:
            self._shutdown_done.set()

    async def _shutdown(self) -> None:
        for task in self._tasks:
            await task.shutdown()
        if self.transactional_message_check_service is not None:
            await self.transactional_message_check_service.shutdown()
        await self.fast_failure.shutdown()
        if self._started:
            await self.outer_api.unregister_broker_all(self.identity())
        for server in (self.remoting_server, self.fast_remoting_server):
            if server is not None and server.port:
                await server.stop()
        for service in reversed(self.services):
            try:
                await service.shutdown()
            except Exception:
                log.exception("shutdown of %s failed", type(service).__name__)
        await self.client_housekeeping.shutdown()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        with self._persist_lock:
            self.consumer_offset_manager.persist()
            self.consumer_filter_manager.persist()
            self.consumer_order_info_manager.persist()
        if self.message_store is not None:
            await maybe_await(self.message_store.shutdown())
        await self.outer_api.close()
        log.info("broker shutdown OK")


_on_message_arriving = BrokerController._on_message_arriving  # the twin
_c = compiled("arrival")
if _c is not None:
    # each single put's arrival notice (every revive record a pop or an ack writes)
    BrokerController._on_message_arriving = _c.on_message_arriving  # type: ignore[method-assign]
