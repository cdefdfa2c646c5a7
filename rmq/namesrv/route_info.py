"""RouteInfoManager: the name server's five route tables (``RouteInfoManager`` of 4.9.8).

Tables (all in memory; brokers repopulate them within one registration period)::

    topicQueueTable    topic      -> {brokerName -> QueueData}
    brokerAddrTable    brokerName -> BrokerData{cluster, brokerName, {brokerId -> addr}}
    clusterAddrTable   cluster    -> {brokerName}
    brokerLiveTable    brokerAddr -> BrokerLiveInfo{lastUpdate, dataVersion, channel, haServerAddr}
    filterServerTable  brokerAddr -> [filter server addr]

Read/write discipline: Java guards the tables with one read/write lock.  rmq
runs every request, timer and connection event of the name server on one
event loop, and every public method here is synchronous (no ``await``), so each
call is atomic with respect to all others: a reader never sees half of a
registration.  Nothing outside this class mutates the tables; readers get
copies (``BrokerData.copy``) or freshly encoded bytes.

Encoded routes are cached per (topic, dialect, orderTopicConf); any change to
the topic, broker or filter tables empties the cache, so a cached body is
always what a fresh encoding would give.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from rmq.common.data_version import DataVersion
from rmq.common.logging import NAMESRV_LOGGER_NAME
from rmq.common.message import PERM_READ, PERM_WRITE
from rmq.common.route import BrokerData, ClusterInfo, QueueData, TopicList, TopicRouteData
from rmq.common.topic_config import TopicConfigSerializeWrapper
from rmq.common.topics import MASTER_ID

log = logging.getLogger(NAMESRV_LOGGER_NAME)

TOPIC_SYS_FLAG_UNIT = 0x1
TOPIC_SYS_FLAG_UNIT_SUB = 0x2
DEFAULT_BROKER_CHANNEL_EXPIRED_MS = 120_000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class BrokerLiveInfo:
    lastUpdateTimestamp: int
    dataVersion: DataVersion
    channel: Any
    haServerAddr: str | None


@dataclass(slots=True)
class RegisterBrokerResult:
    haServerAddr: str | None = None
    masterAddr: str | None = None


class RouteInfoManager:
    def __init__(self, clock=_now_ms) -> None:
        self.clock = clock
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}
        self._route_cache: dict[tuple[str, bool, str | None], bytes] = {}

    def _changed(self) -> None:
        self._route_cache.clear()

    # ---------------------------------------------------------------- register

    def register_broker(self, cluster_name: str, broker_addr: str, broker_name: str,
                        broker_id: int, ha_server_addr: str | None,
                        topic_config_wrapper: TopicConfigSerializeWrapper | None,
                        filter_server_list: list[str] | None, channel: Any) -> RegisterBrokerResult:
        """Apply one REGISTER_BROKER (../shared/spec/PROTOCOL.md section 8.2)."""
        result = RegisterBrokerResult()
        changed = False
        names = self.cluster_addr_table.setdefault(cluster_name, set())
        if broker_name not in names:
            names.add(broker_name)
            changed = True

        register_first = False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None:
            register_first = True
            broker_data = BrokerData(cluster_name, broker_name, {})
            self.broker_addr_table[broker_name] = broker_data
        addrs = broker_data.brokerAddrs
        # one address has one id: a slave promoted to master re-registers as id 0
        for stale_id in [i for i, a in addrs.items() if a == broker_addr and i != broker_id]:
            del addrs[stale_id]
            changed = True
        old_addr = addrs.get(broker_id)
        addrs[broker_id] = broker_addr
        if old_addr != broker_addr:
            changed = True
            if broker_id == MASTER_ID:
                log.info("cluster [%s] brokerName [%s] master address change from %s to %s",
                         broker_data.cluster, broker_name, old_addr, broker_addr)
        register_first = register_first or old_addr is None

        data_version = (topic_config_wrapper.dataVersion if topic_config_wrapper is not None
                        else DataVersion(0, 0))
        if topic_config_wrapper is not None and broker_id == MASTER_ID:
            if register_first or self.is_broker_topic_config_changed(broker_addr, data_version):
                for tc in topic_config_wrapper.topicConfigTable.values():
                    changed |= self._create_and_update_queue_data(broker_name, tc)

        prev = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            self.clock(), data_version, channel, ha_server_addr)
        if prev is None:
            log.info("new broker registered, %s HAServer: %s", broker_addr, ha_server_addr)

        if filter_server_list is not None:
            if filter_server_list:
                if self.filter_server_table.get(broker_addr) != filter_server_list:
                    self.filter_server_table[broker_addr] = list(filter_server_list)
                    changed = True
            elif self.filter_server_table.pop(broker_addr, None) is not None:
                changed = True

        if broker_id != MASTER_ID:
            master_addr = addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self.broker_live_table.get(master_addr)
                if master_live is not None:
                    result.haServerAddr = master_live.haServerAddr
                    result.masterAddr = master_addr
        if changed:
            self._changed()
        return result

    def _create_and_update_queue_data(self, broker_name: str, tc) -> bool:
        qd = QueueData(broker_name, tc.readQueueNums, tc.writeQueueNums, tc.perm,
                       tc.topicSysFlag)
        queue_map = self.topic_queue_table.setdefault(tc.topicName, {})
        old = queue_map.get(broker_name)
        if old == qd:
            return False
        queue_map[broker_name] = qd
        if old is None:
            log.info("new topic registered, %s %s", tc.topicName, qd)
        else:
            log.info("topic changed, %s OLD: %s NEW: %s", tc.topicName, old, qd)
        return True

    def is_broker_topic_config_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        prev = self.query_broker_topic_config(broker_addr)
        return prev is None or prev != data_version

    def query_broker_topic_config(self, broker_addr: str) -> DataVersion | None:
        live = self.broker_live_table.get(broker_addr)
        return None if live is None else live.dataVersion

    def update_broker_info_update_timestamp(self, broker_addr: str, timestamp: int) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.lastUpdateTimestamp = timestamp

    # -------------------------------------------------------------- unregister

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str,
                          broker_id: int) -> None:
        """UNREGISTER_BROKER (section 8.3): drop the address; a broker name left
        with no address leaves its cluster and every topic."""
        live = self.broker_live_table.pop(broker_addr, None)
        log.info("unregisterBroker, remove from brokerLiveTable %s, %s",
                 "OK" if live is not None else "Failed", broker_addr)
        self.filter_server_table.pop(broker_addr, None)
        remove_name = False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None:
            broker_data.brokerAddrs.pop(broker_id, None)
            if not broker_data.brokerAddrs:
                del self.broker_addr_table[broker_name]
                remove_name = True
        if remove_name:
            names = self.cluster_addr_table.get(cluster_name)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster_name]
            self._remove_topic_by_broker_name(broker_name)
        self._changed()

    def _remove_topic_by_broker_name(self, broker_name: str) -> None:
        emptied = []
        for topic, queue_map in self.topic_queue_table.items():
            if queue_map.pop(broker_name, None) is not None:
                log.info("removeTopicByBrokerName, remove one broker's topic %s %s",
                         broker_name, topic)
            if not queue_map:
                emptied.append(topic)
        for topic in emptied:
            del self.topic_queue_table[topic]

    # ---------------------------------------------------------------- liveness

    def scan_not_active_broker(self, expired_ms: int = DEFAULT_BROKER_CHANNEL_EXPIRED_MS) -> int:
        """Remove brokers whose last registration is older than ``expired_ms``."""
        now = self.clock()
        expired = [(addr, live) for addr, live in self.broker_live_table.items()
                   if live.lastUpdateTimestamp + expired_ms < now]
        for addr, live in expired:
            log.warning("The broker channel expired, %s %dms", addr, expired_ms)
            if live.channel is not None:
                live.channel.close()
            # clean by address: the channel may already serve a newer registration
            self._clean_broker_addr(addr)
        return len(expired)

    def on_channel_destroy(self, remote_addr: str | None, channel: Any) -> None:
        """A broker connection closed, failed or idled out: forget that broker in
        every table (section 8.4)."""
        found = None
        if channel is not None:
            for addr, live in self.broker_live_table.items():
                if live.channel is channel:
                    found = addr
                    break
        if found is None:
            found = remote_addr
        else:
            log.info("the broker's channel destroyed, %s, clean it's data structure at once",
                     found)
        if found:
            self._clean_broker_addr(found)

    def _clean_broker_addr(self, found: str) -> None:
        """Forget ``found`` in every table; a broker name left without any
        address leaves its cluster and every topic."""
        self.broker_live_table.pop(found, None)
        self.filter_server_table.pop(found, None)
        name_found = None
        remove_name = False
        for broker_name, broker_data in list(self.broker_addr_table.items()):
            for broker_id, addr in list(broker_data.brokerAddrs.items()):
                if addr == found:
                    name_found = broker_name
                    del broker_data.brokerAddrs[broker_id]
                    log.info("remove brokerAddr[%s, %s] from brokerAddrTable, because channel "
                             "destroyed", broker_id, addr)
                    break
            if not broker_data.brokerAddrs:
                remove_name = True
                del self.broker_addr_table[broker_name]
                log.info("remove brokerName[%s] from brokerAddrTable, because channel destroyed",
                         broker_name)
            if name_found is not None:
                break
        if name_found is not None and remove_name:
            for cluster, names in list(self.cluster_addr_table.items()):
                if name_found in names:
                    names.discard(name_found)
                    if not names:
                        del self.cluster_addr_table[cluster]
                    break
        if remove_name and name_found is not None:
            self._remove_topic_by_broker_name(name_found)
        self._changed()

    # -------------------------------------------------------------------- reads

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """The route of ``topic``, or None when it has no queue data or none of
        its brokers is known (section 8.5)."""
        queue_map = self.topic_queue_table.get(topic)
        if not queue_map:
            return None
        route = TopicRouteData(queueDatas=[QueueData(q.brokerName, q.readQueueNums,
                                                     q.writeQueueNums, q.perm, q.topicSysFlag)
                                           for q in queue_map.values()])
        for broker_name in queue_map:
            broker_data = self.broker_addr_table.get(broker_name)
            if broker_data is None:
                continue
            clone = broker_data.copy()
            route.brokerDatas.append(clone)
            if self.filter_server_table:
                for addr in clone.brokerAddrs.values():
                    servers = self.filter_server_table.get(addr)
                    if servers is not None:
                        route.filterServerTable[addr] = list(servers)
        return route if route.brokerDatas else None

    def encoded_topic_route(self, topic: str, standard: bool,
                            order_topic_conf: str | None = None) -> bytes | None:
        """The route body as sent on the wire (cached), or None when not found."""
        key = (topic, standard, order_topic_conf)
        body = self._route_cache.get(key)
        if body is not None:
            return body
        route = self.pickup_topic_route_data(topic)
        if route is None:
            return None
        route.orderTopicConf = order_topic_conf
        body = route.encode(standard=standard)
        if len(self._route_cache) > 4 * len(self.topic_queue_table) + 1024:
            self._route_cache.clear()
        self._route_cache[key] = body
        return body

    def get_all_cluster_info(self) -> ClusterInfo:
        return ClusterInfo({k: v.copy() for k, v in self.broker_addr_table.items()},
                           {k: set(v) for k, v in self.cluster_addr_table.items()})

    def get_all_topic_list(self) -> TopicList:
        return TopicList(list(self.topic_queue_table))

    def get_topics_by_cluster(self, cluster: str) -> TopicList:
        names = self.cluster_addr_table.get(cluster, set())
        return TopicList([topic for topic, queue_map in self.topic_queue_table.items()
                          if any(name in queue_map for name in names)])

    def get_system_topic_list(self) -> TopicList:
        """Cluster and broker names (the topics every broker serves by its own
        name), plus one broker address the client can ask for the rest."""
        result = TopicList()
        seen: set[str] = set()
        for cluster, names in self.cluster_addr_table.items():
            for name in (cluster, *sorted(names)):
                if name not in seen:
                    seen.add(name)
                    result.topicList.append(name)
        for broker_data in self.broker_addr_table.values():
            if broker_data.brokerAddrs:
                result.brokerAddr = next(iter(broker_data.brokerAddrs.values()))
                break
        return result

    def _topics_where(self, pick) -> TopicList:
        # Java looks at the first QueueData of each topic only
        return TopicList([topic for topic, queue_map in self.topic_queue_table.items()
                          if queue_map and pick(next(iter(queue_map.values())).topicSysFlag)])

    def get_unit_topics(self) -> TopicList:
        return self._topics_where(lambda f: bool(f & TOPIC_SYS_FLAG_UNIT))

    def get_has_unit_sub_topic_list(self) -> TopicList:
        return self._topics_where(lambda f: bool(f & TOPIC_SYS_FLAG_UNIT_SUB))

    def get_has_unit_sub_ununit_topic_list(self) -> TopicList:
        return self._topics_where(
            lambda f: not f & TOPIC_SYS_FLAG_UNIT and bool(f & TOPIC_SYS_FLAG_UNIT_SUB))

    # ------------------------------------------------------------------ admin

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV: the whole topic, or only one cluster's queues."""
        if not cluster_name:
            self.topic_queue_table.pop(topic, None)
        else:
            queue_map = self.topic_queue_table.get(topic)
            if queue_map is not None:
                for name in self.cluster_addr_table.get(cluster_name, ()):
                    queue_map.pop(name, None)
                if not queue_map:
                    del self.topic_queue_table[topic]
        self._changed()

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        return self._operate_write_perm(broker_name, wipe=True)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        return self._operate_write_perm(broker_name, wipe=False)

    def _operate_write_perm(self, broker_name: str, wipe: bool) -> int:
        count = 0
        for queue_map in self.topic_queue_table.values():
            qd = queue_map.get(broker_name)
            if qd is not None:
                qd.perm = qd.perm & ~PERM_WRITE if wipe else PERM_READ | PERM_WRITE
                count += 1
        self._changed()
        return count

    def print_all_periodically(self) -> None:
        log.info("--------------------------------------------------------")
        log.info("topicQueueTable SIZE: %d", len(self.topic_queue_table))
        for topic, queue_map in self.topic_queue_table.items():
            log.info("topicQueueTable Topic: %s %s", topic, list(queue_map.values()))
        log.info("brokerAddrTable SIZE: %d", len(self.broker_addr_table))
        for name, data in self.broker_addr_table.items():
            log.info("brokerAddrTable brokerName: %s %s", name, data)
        log.info("brokerLiveTable SIZE: %d", len(self.broker_live_table))
        for addr, live in self.broker_live_table.items():
            log.info("brokerLiveTable brokerAddr: %s lastUpdateTimestamp: %d dataVersion: %s",
                     addr, live.lastUpdateTimestamp, live.dataVersion)
        log.info("clusterAddrTable SIZE: %d", len(self.cluster_addr_table))
        for cluster, names in self.cluster_addr_table.items():
            log.info("clusterAddrTable clusterName: %s %s", cluster, sorted(names))
