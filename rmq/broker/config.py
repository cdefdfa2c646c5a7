"""BrokerConfig: the broker's own settings (RocketMQ ``BrokerConfig``).

Field names are the 4.9.8 property names of broker.conf, defaults are the
4.9.8 source defaults (``../shared/spec/DEFAULTS.md`` §5).  Values that Java
computes from the machine (cores, host name, local address) are computed the
same way here when the object is created.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import socket
from dataclasses import dataclass, field

from rmq.common.message import PERM_READ, PERM_WRITE
from rmq.common.topics import MASTER_ID, TRACE_TOPIC

_CORES = os.cpu_count() or 1

# The property names 4.9.8 marks @ImportantField (printed by ``-m``).
IMPORTANT_FIELDS = frozenset(
    {
        "namesrvAddr",
        "brokerIP1",
        "brokerName",
        "brokerClusterName",
        "brokerId",
        "autoCreateTopicEnable",
        "autoCreateSubscriptionGroup",
        "msgTraceTopicName",
        "traceTopicEnable",
        "rejectTransactionMessage",
        "fetchNamesrvAddrByAddressServer",
        "transactionTimeOut",
        "transactionCheckMax",
        "transactionCheckInterval",
        "aclEnable",
    }
)

# Keys that UPDATE_BROKER_CONFIG may never change, whatever configBlackList says.
ALWAYS_BLACKLISTED = frozenset({"brokerConfigPath", "rocketmqHome", "configBlackList"})


def installation_home() -> str:
    """The directory rmq is installed in (what the mqbroker script exports as
    ROCKETMQ_HOME when it is not set): the parent of the ``rmq`` package."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def local_host_name() -> str:
    """``BrokerConfig.localHostName``: the host name, DEFAULT_BROKER if unknown."""
    try:
        return socket.gethostname() or "DEFAULT_BROKER"
    except OSError:
        return "DEFAULT_BROKER"


def _interface_addresses() -> list[str]:
    """Every address of every interface, in interface order."""
    import psutil

    out: list[str] = []
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family in (socket.AF_INET, socket.AF_INET6):
                out.append(a.address.split("%", 1)[0])
    return out


def local_address(addresses: list[str] | None = None) -> str:
    """``RemotingUtil.getLocalAddress``: the first non-loopback IPv4 address not
    starting with 127.0 or 192.168, else the last IPv4 found, else the first
    IPv6, else the address of the local host name."""
    if addresses is None:
        addresses = _interface_addresses()
    v4: list[str] = []
    v6: list[str] = []
    for text in addresses:
        try:
            ip = ipaddress.ip_address(text)
        except ValueError:
            continue
        if ip.is_loopback:
            continue
        (v4 if ip.version == 4 else v6).append(str(ip))
    for ip in v4:
        if not (ip.startswith("127.0") or ip.startswith("192.168")):
            return ip
    if v4:
        return v4[-1]
    if v6:
        return v6[0]
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def _env_home() -> str | None:
    return os.environ.get("ROCKETMQ_HOME") or installation_home()


def _env_namesrv() -> str | None:
    return os.environ.get("NAMESRV_ADDR") or None


@dataclass(slots=True)
class BrokerConfig:
    """Broker settings with the 4.9.8 property names and defaults."""

    rocketmqHome: str | None = field(default_factory=_env_home)
    namesrvAddr: str | None = field(default_factory=_env_namesrv)
    brokerIP1: str = field(default_factory=local_address)
    brokerIP2: str = field(default_factory=local_address)
    brokerName: str = field(default_factory=local_host_name)
    brokerClusterName: str = "DefaultCluster"
    brokerId: int = MASTER_ID
    brokerPermission: int = PERM_READ | PERM_WRITE
    defaultTopicQueueNums: int = 8
    autoCreateTopicEnable: bool = True
    clusterTopicEnable: bool = True
    brokerTopicEnable: bool = True
    autoCreateSubscriptionGroup: bool = True
    messageStorePlugIn: str = ""
    msgTraceTopicName: str = TRACE_TOPIC
    traceTopicEnable: bool = False
    sendMessageThreadPoolNums: int = min(_CORES, 4)
    putMessageFutureThreadPoolNums: int = min(_CORES, 4)
    pullMessageThreadPoolNums: int = 16 + _CORES * 2
    processReplyMessageThreadPoolNums: int = 16 + _CORES * 2
    queryMessageThreadPoolNums: int = 8 + _CORES
    adminBrokerThreadPoolNums: int = 16
    clientManageThreadPoolNums: int = 32
    consumerManageThreadPoolNums: int = 32
    heartbeatThreadPoolNums: int = min(32, _CORES)
    endTransactionThreadPoolNums: int = max(8 + _CORES * 2, min(_CORES, 4) * 4)
    flushConsumerOffsetInterval: int = 5000
    flushConsumerOffsetHistoryInterval: int = 60000
    rejectTransactionMessage: bool = False
    fetchNamesrvAddrByAddressServer: bool = False
    sendThreadPoolQueueCapacity: int = 10000
    putThreadPoolQueueCapacity: int = 10000
    pullThreadPoolQueueCapacity: int = 100000
    replyThreadPoolQueueCapacity: int = 10000
    queryThreadPoolQueueCapacity: int = 20000
    clientManagerThreadPoolQueueCapacity: int = 1000000
    consumerManagerThreadPoolQueueCapacity: int = 1000000
    heartbeatThreadPoolQueueCapacity: int = 50000
    endTransactionPoolQueueCapacity: int = 100000
    filterServerNums: int = 0
    longPollingEnable: bool = True
    shortPollingTimeMills: int = 1000
    notifyConsumerIdsChangedEnable: bool = True
    highSpeedMode: bool = False
    commercialEnable: bool = True
    commercialTimerCount: int = 1
    commercialTransCount: int = 1
    commercialBigCount: int = 1
    commercialBaseCount: int = 1
    transferMsgByHeap: bool = True
    maxDelayTime: int = 40
    regionId: str = "DefaultRegion"
    registerBrokerTimeoutMills: int = 6000
    slaveReadEnable: bool = False
    disableConsumeIfConsumerReadSlowly: bool = False
    consumerFallbehindThreshold: int = 1024 * 1024 * 1024 * 16
    brokerFastFailureEnable: bool = True
    waitTimeMillsInSendQueue: int = 200
    waitTimeMillsInPullQueue: int = 5000
    waitTimeMillsInHeartbeatQueue: int = 31000
    waitTimeMillsInTransactionQueue: int = 3000
    startAcceptSendRequestTimeStamp: int = 0
    traceOn: bool = True
    enableCalcFilterBitMap: bool = False
    expectConsumerNumUseFilter: int = 32
    maxErrorRateOfBloomFilter: int = 20
    filterDataCleanTimeSpan: int = 24 * 3600 * 1000
    filterSupportRetry: bool = False
    enablePropertyFilter: bool = False
    compressedRegister: bool = False
    forceRegister: bool = True
    registerNameServerPeriod: int = 30000
    transactionTimeOut: int = 6000
    transactionCheckMax: int = 15
    transactionCheckInterval: int = 60000
    aclEnable: bool = False
    # rmq: the plain ACL file, relative to rocketmqHome or absolute (4.9.8's
    # -Drocketmq.acl.plain.file); conf/acl/**.yml is read as well
    aclPlainFile: str = "conf/plain_acl.yml"
    storeReplyMessageEnable: bool = True
    enableDetailStat: bool = True
    # RocketMQ 5's metrics exporter settings: PROM serves Prometheus text on
    # metricsPromExporterHost:metricsPromExporterPort (rmq.broker.metrics)
    metricsExporterType: str = "DISABLE"
    metricsPromExporterHost: str = ""
    metricsPromExporterPort: int = 5557
    autoDeleteUnusedStats: bool = False
    isolateLogEnable: bool = False
    configBlackList: str = "configBlackList;brokerConfigPath"
    # RECALL_MESSAGE (5.3.3's names and defaults): off unless enabled
    recallMessageEnable: bool = False
    allowRecallWhenBrokerNotWriteable: bool = True
    # RocketMQ 5.x clients (the gRPC MessagingService, rmq.proxy), served in
    # the broker process; names and defaults of 5.3.3's ProxyConfig.  Read at
    # start-up.
    enableProxy: bool = True
    grpcServerPort: int = 8081
    enableTopicMessageTypeCheck: bool = True
    useDelayLevel: bool = False
    # receipt handles of push consumers renewed by the endpoint (5.3.3's
    # ProxyConfig names and defaults, rmq.proxy.renew): the invisible time of
    # an auto-renewed receive, how long before it ends a handle is renewed,
    # for how long at most (then the message goes back), how often handles are
    # scanned, failed renewals retried, renewals in flight at once, and the
    # invisible time of the handles of a client that went away
    enableProxyAutoRenew: bool = True
    defaultInvisibleTimeMills: int = 60_000
    renewAheadTimeMillis: int = 10_000
    renewMaxTimeMillis: int = 3 * 3600 * 1000
    renewSchedulePeriodMillis: int = 5_000
    maxRenewRetryTimes: int = 3
    renewMaxThreadPoolNums: int = 4
    invisibleTimeMillisWhenClear: int = 1_000
    # rmq only, for tests (not in 4.9.8): every send first holds a simulated
    # commit-log lock this long (rmq.broker.put_delay); 0 = off
    rmqTestPutDelayMillis: int = 0
    # rmq only (not in 4.9.8): plain single sends are served straight from the
    # receive buffer (rmq.broker.send_lane); false sends every request through
    # the processor table.  Read at start-up.
    rmqSendLaneEnable: bool = True
    # rmq only (not in 4.9.8): pulls that find messages are served straight
    # from the receive buffer, each answered at once (rmq.broker.pull_lane);
    # false sends every pull through the processor table.  Read at start-up.
    rmqPullLaneEnable: bool = True
    # rmq only: pops that find messages and acks are served straight from the
    # receive buffer (rmq.broker.pop_lane); false sends them through the
    # processor table.  Read at start-up.
    rmqPopLaneEnable: bool = True
    # rmq only (not in 4.9.8): after each read the event loop keeps polling
    # for this many microseconds instead of sleeping (rmq.remoting.busy_poll):
    # lower round trips for a CPU spent spinning; 0 = off.  Read at start-up.
    rmqBusyPollMicros: int = 0
    # rmq only (not in 4.9.8): after a loop turn in which a client's read held
    # 2 to 15 requests, the event loop sleeps this many microseconds
    # before polling again, so the next read takes the requests that came
    # meanwhile (rmq.remoting.read_nap).  Never with rmqBusyPollMicros, DLedger,
    # SYNC_MASTER or SYNC_FLUSH, whose answers wait for another socket or the
    # flush.  Off by default (0): a client with a few requests in flight
    # waits on every nap (at 4 in flight, 100 µs naps halve its rate).
    # Read at start-up.
    rmqReadNapMicros: int = 0
    # RocketMQ 5.3.3's POP settings (rmq.broker.processor.pop, rmq.broker.pop_revive)
    reviveQueueNum: int = 8
    popFromRetryProbability: int = 20
    enableRetryTopicV2: bool = False
    # a group's first pop with initMode MAX starts at 0 while the queue's first message
    # is still in memory (5.3.3 PopMessageProcessor), else at the last message
    initPopOffsetByCheckMsgInMem: bool = True
    popResponseReturnActualRetryTopic: bool = False
    popPollingMaxWaiters: int = 100000  # rmq's bound on held pops (POLLING_FULL past it)
    serverLoadBalancerEnable: bool = True  # QUERY_ASSIGNMENT balances the queues

    def register_period_ms(self) -> int:
        """The effective re-registration period: clamped to 10-60 s as 4.9.8 does."""
        return max(10000, min(self.registerNameServerPeriod, 60000))

    def namesrv_list(self) -> list[str]:
        """The configured name servers, in order (empty entries dropped)."""
        if not self.namesrvAddr:
            return []
        return [a.strip() for a in self.namesrvAddr.split(";") if a.strip()]

    def black_list(self) -> set[str]:
        """Keys UPDATE_BROKER_CONFIG refuses (``configBlackList`` plus the fixed ones)."""
        keys = {k.strip() for k in self.configBlackList.split(";") if k.strip()}
        return keys | ALWAYS_BLACKLISTED


def field_names(obj) -> list[str]:
    """The property names of a config dataclass, in declaration order."""
    return [f.name for f in dataclasses.fields(obj) if not f.name.startswith("_")]
