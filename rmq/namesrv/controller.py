"""NamesrvController: wires the name server together and runs its timers.

Mirrors ``NamesrvController`` and ``BrokerHousekeepingService`` of 4.9.8:
``initialize`` loads the KV table, ``start`` opens the remoting server (the
DefaultRequestProcessor is its default processor, the housekeeping service its
connection listener) and starts the timers -- the broker expiry scan (every
``scanNotActiveBrokerIntervalMillis``, first after at most 5 s) and the KV
table print (every 10 minutes, first after 1 minute); ``shutdown`` stops them
and the server gracefully.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from rmq.common.logging import NAMESRV_LOGGER_NAME
from rmq.common.metrics_http import MetricsHttpServer, exporter_enabled
from rmq.common.periodic import ScheduledTask
from rmq.common.route import BrokerData
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.configuration import Configuration
from rmq.namesrv.kv_config import KVConfigManager
from rmq.namesrv.processor import DefaultRequestProcessor
from rmq.namesrv.route_info import RouteInfoManager
from rmq.remoting import Channel, RemotingServer
from rmq.remoting.config import NettyServerConfig
from rmq.remoting.rpc_latency import RpcLatency, latency_family

log = logging.getLogger(NAMESRV_LOGGER_NAME)

KV_PRINT_INITIAL_SECONDS = 60.0
KV_PRINT_PERIOD_SECONDS = 600.0
SCAN_INITIAL_SECONDS = 5.0


class BrokerHousekeepingService:
    """Connection events -> route cleanup: a broker whose connection closes,
    fails or idles out is forgotten at once."""

    def __init__(self, route_info_manager: RouteInfoManager) -> None:
        self.route = route_info_manager

    def on_channel_connect(self, remote_addr: str, channel: Channel) -> None:
        pass

    def on_channel_close(self, remote_addr: str, channel: Channel) -> None:
        self.route.on_channel_destroy(remote_addr, channel)

    def on_channel_exception(self, remote_addr: str, channel: Channel) -> None:
        self.route.on_channel_destroy(remote_addr, channel)

    def on_channel_idle(self, remote_addr: str, channel: Channel) -> None:
        self.route.on_channel_destroy(remote_addr, channel)


_NO_BROKER = BrokerData("", "")


class NamesrvCollector(Collector):
    """The name server's Prometheus gauges (rmq's own: RocketMQ 5's name
    server exports none): live brokers per cluster, topics routed, and
    connections, labelled ``node_type="namesrv"`` and ``node_id`` host:port."""

    def __init__(self, controller: NamesrvController) -> None:
        self.c = controller

    def collect(self):
        route = self.c.route_info_manager
        base = ("namesrv", f"{self.c.netty_config.listenPort}")
        labels = ("node_type", "node_id")
        brokers = GaugeMetricFamily("rocketmq_namesrv_live_brokers",
                                    "brokers registered and alive", labels=(*labels, "cluster"))
        live = set(route.broker_live_table)
        for cluster, names in list(route.cluster_addr_table.items()):
            count = sum(1 for name in names
                        for addr in route.broker_addr_table.get(name, _NO_BROKER).brokerAddrs.values()
                        if addr in live)
            brokers.add_metric((*base, cluster), count)
        yield brokers
        topics = GaugeMetricFamily("rocketmq_topic_number", "topics routed", labels=labels)
        topics.add_metric(base, len(route.topic_queue_table))
        yield topics
        server = self.c.remoting_server
        conns = GaugeMetricFamily("rocketmq_namesrv_connections", "client and broker connections",
                                  labels=labels)
        conns.add_metric(base, len(server.channels) if server is not None else 0)
        yield conns
        if server is not None and server.rpc_latency is not None:
            yield latency_family(server.rpc_latency, labels, base)


class NamesrvController:
    def __init__(self, namesrv_config: NamesrvConfig, netty_config: NettyServerConfig) -> None:
        self.namesrv_config = namesrv_config
        self.netty_config = netty_config
        self.kv_config_manager = KVConfigManager(namesrv_config.kvConfigPath)
        self.route_info_manager = RouteInfoManager()
        self.housekeeping = BrokerHousekeepingService(self.route_info_manager)
        self.configuration = Configuration(namesrv_config, netty_config)
        self.remoting_server: RemotingServer | None = None
        self.processor: DefaultRequestProcessor | None = None
        self._timers: list[ScheduledTask] = []
        self.metrics_server: MetricsHttpServer | None = None

    def initialize(self) -> None:
        """Load persisted state; raises ConfigError on an unreadable KV file."""
        self.kv_config_manager.load()

    async def start(self) -> None:
        """Listen and start the timers; raises OSError when the port is taken."""
        server = RemotingServer(self.netty_config, self.housekeeping, name="namesrv")
        # Java queues name-server requests without bound; every handler here is
        # synchronous, so nothing is ever in flight to bound.
        self.processor = DefaultRequestProcessor(self)
        server.register_default_processor(self.processor)
        await server.start()
        self.remoting_server = server
        scan_ms = self.namesrv_config.scanNotActiveBrokerIntervalMillis
        self._timers = [
            ScheduledTask("scanNotActiveBroker", min(SCAN_INITIAL_SECONDS, scan_ms / 1000.0),
                          lambda: self.namesrv_config.scanNotActiveBrokerIntervalMillis / 1000.0,
                          self._scan_not_active_broker, log),
            ScheduledTask("printAllPeriodically", KV_PRINT_INITIAL_SECONDS,
                          lambda: KV_PRINT_PERIOD_SECONDS,
                          self.kv_config_manager.print_all_periodically, log),
        ]
        for timer in self._timers:
            await timer.start()
        cfg = self.namesrv_config
        if exporter_enabled(cfg.metricsExporterType):
            server.rpc_latency = RpcLatency()
            registry = CollectorRegistry(auto_describe=False)
            registry.register(NamesrvCollector(self))
            self.metrics_server = MetricsHttpServer(registry, cfg.metricsPromExporterHost,
                                                    cfg.metricsPromExporterPort)
            await self.metrics_server.start()

    def _scan_not_active_broker(self) -> None:
        removed = self.route_info_manager.scan_not_active_broker(
            self.namesrv_config.brokerChannelExpiredMillis)
        if removed:
            log.info("scanNotActiveBroker removed %d broker(s)", removed)

    @property
    def port(self) -> int:
        return self.remoting_server.port if self.remoting_server is not None else 0

    async def shutdown(self, grace_seconds: float = 5.0) -> None:
        if self.metrics_server is not None:
            await self.metrics_server.shutdown()
        for timer in self._timers:
            await timer.shutdown()
        self._timers = []
        if self.remoting_server is not None:
            await self.remoting_server.stop(grace_seconds)
            self.remoting_server = None
        if self.processor is not None:
            await self.processor.close()
