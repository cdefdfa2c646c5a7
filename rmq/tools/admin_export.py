"""``rmq-admin`` export commands of mqadmin 4.9.8 (``tools/command/export``):
``exportMetadata`` (user topics and subscription groups, merged over a
cluster's masters), ``exportConfigs`` (the broker settings a migration needs,
and the cluster's size) and ``exportMetrics`` (per broker: memory, disk
ratios, TPS, a day's message counts, client versions).  Each writes a JSON
file in fastjson's pretty form under ``-f`` and prints ``export <file> success``.
"""

from __future__ import annotations

import argparse
import os

from rmq.client.admin import MQAdmin
from rmq.client.api import loads
from rmq.client.exceptions import MQBrokerError, MQClientError
from rmq.common import topics as T
from rmq.common.codes import RequestCode
from rmq.common.java import CURRENT_VERSION_DESC, is_admin_system_group, version_desc
from rmq.common.protocol.headers_admin import ViewBrokerStatsDataRequestHeader
from rmq.common.topics import MASTER_ID
from rmq.remoting.exceptions import RemotingError
from rmq.tools.admin_base import CommandTable, Output, pretty_json, time_ms

EXPORT_COMMANDS = CommandTable()
DEFAULT_PATH = "/tmp/rocketmq/export"
# the broker settings exportConfigs keeps (ExportConfigsCommand.needBrokerProprties)
EXPORTED_BROKER_KEYS = (
    "brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime",
    "filterServerNums", "flushDiskType", "maxMessageSize", "messageDelayLevel",
    "msgTraceTopicName", "slaveReadEnable", "traceOn", "traceTopicEnable", "useTLS",
    "autoCreateTopicEnable", "autoCreateSubscriptionGroup")


def _file_arg(p: argparse.ArgumentParser, name: str) -> None:
    p.add_argument("-f", "--filePath", default=DEFAULT_PATH,
                   help=f"export {name} path | default {DEFAULT_PATH}")


def write_export(directory: str, name: str, data: object) -> Output:
    """``MixAll.string2FileNotSafe``: the directory is created when missing."""
    path = os.path.join(directory.strip(), name)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(pretty_json(data))
    return Output({"file": path, "data": data}, f"export {path} success")


# --- metadata ----------------------------------------------------------------------
async def user_topics(admin: MQAdmin, addr: str, special: bool) -> dict:
    """GET_ALL_TOPIC_CONFIG without the broker's system topics, and without
    retry and dead-letter topics unless ``special`` (``getUserTopicConfig``)."""
    wrapper = loads((await admin.api.call(addr, RequestCode.GET_ALL_TOPIC_CONFIG,
                                          timeout_ms=10_000)).body)
    system = set(loads((await admin.api.call(addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
                                             timeout_ms=10_000)).body).get("topicList") or [])
    table = wrapper.get("topicConfigTable") or {}
    wrapper["topicConfigTable"] = {
        t: c for t, c in table.items() if t not in system
        and (special or not (T.is_retry_topic(t) or T.is_dlq_topic(t)))}
    return wrapper


async def user_groups(admin: MQAdmin, addr: str) -> dict:
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG without system groups (``getUserSubscriptionGroup``)."""
    wrapper = loads((await admin.api.call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                                          timeout_ms=10_000)).body)
    table = wrapper.get("subscriptionGroupTable") or {}
    wrapper["subscriptionGroupTable"] = {
        g: c for g, c in table.items()
        if not is_admin_system_group(g)}
    return wrapper


def _merge(into: dict, table: dict, fields: tuple[str, ...]) -> None:
    """A name exported by several masters keeps the last config, with the
    ``fields`` (queue counts) summed over all of them."""
    for name, config in table.items():
        seen = into.get(name)
        if seen is not None:
            config = dict(config, **{f: int(seen.get(f, 0)) + int(config.get(f, 0))
                                     for f in fields})
        into[name] = config


def _metadata_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--clusterName", help="choose a cluster to export")
    p.add_argument("-b", "--brokerAddr", help="choose a broker to export")
    _file_arg(p, "metadata.json")
    p.add_argument("-t", "--topic", action="store_true", help="only export topic metadata")
    p.add_argument("-g", "--subscriptionGroup", action="store_true",
                   help="only export subscriptionGroup metadata")
    p.add_argument("-s", "--specialTopic", action="store_true", help="need retryTopic and dlqTopic")


@EXPORT_COMMANDS.command("exportMetadata", "export metadata", _metadata_args)
async def export_metadata(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    """``-b``: that broker's topic.json (``-t``) or subscriptionGroup.json
    (``-g``), as it serves them; neither exports both into metadata.json.
    ``-c``: the cluster's masters merged (queue counts summed), with the time."""
    if ns.brokerAddr:
        addr = ns.brokerAddr.strip()
        if ns.topic:
            return write_export(ns.filePath, "topic.json",
                                await user_topics(admin, addr, ns.specialTopic))
        if ns.subscriptionGroup:
            return write_export(ns.filePath, "subscriptionGroup.json", await user_groups(admin, addr))
        masters = [addr]
    elif ns.clusterName:
        masters = await admin.master_addrs(ns.clusterName.strip())
    else:
        raise MQClientError(-1, "choose a cluster (-c) or a broker (-b) to export")
    topics: dict = {}
    groups: dict = {}
    for addr in masters:
        _merge(topics, (await user_topics(admin, addr, ns.specialTopic))["topicConfigTable"],
               ("writeQueueNums", "readQueueNums"))
        _merge(groups, (await user_groups(admin, addr))["subscriptionGroupTable"],
               ("retryQueueNums",))
    if ns.topic:
        result, name = {"topicConfigTable": topics}, "topic.json"
    elif ns.subscriptionGroup:
        result, name = {"subscriptionGroupTable": groups}, "subscriptionGroup.json"
    else:
        result = {"topicConfigTable": topics, "subscriptionGroupTable": groups}
        name = "metadata.json"
    result["exportTime"] = time_ms()
    return write_export(ns.filePath, name, result)


# --- configs -------------------------------------------------------------------------
async def masters_and_slaves(admin: MQAdmin, cluster: str) -> dict[str, list[str]]:
    """master address -> its slaves' (``fetchMasterAndSlaveDistinguish``)."""
    info = await admin.cluster_info()
    names = info.clusterAddrTable.get(cluster)
    if names is None:
        raise MQClientError(-1, f"cluster {cluster} not found")
    out = {}
    for name in sorted(names):
        bd = info.brokerAddrTable.get(name)
        if bd is None or MASTER_ID not in bd.brokerAddrs:
            continue
        out[bd.brokerAddrs[MASTER_ID]] = [a for i, a in sorted(bd.brokerAddrs.items())
                                          if i != MASTER_ID]
    return out


@EXPORT_COMMANDS.command("exportConfigs", "export configs", lambda p: (
    p.add_argument("-c", "--clusterName", required=True, help="choose a cluster to export"),
    _file_arg(p, "configs.json")))
async def export_configs(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    layout = await masters_and_slaves(admin, ns.clusterName.strip())
    configs = {}
    for master in layout:
        props = await admin.broker_config(master)
        configs[props.get("brokerName", master)] = {
            k: props[k] for k in EXPORTED_BROKER_KEYS if k in props}
    scale = {"namesrvSize": len(admin.config.namesrv_list()), "masterBrokerSize": len(layout),
             "slaveBrokerSize": sum(len(s) for s in layout.values())}
    return write_export(ns.filePath, "configs.json",
                        {"brokerConfigs": configs, "clusterScale": scale})


# --- metrics -------------------------------------------------------------------------
async def _put_stats(admin: MQAdmin, addr: str, topic: str) -> dict | None:
    """BrokerStatsData of TOPIC_PUT_NUMS for ``topic``; None when the broker has
    none (nothing put there yet)."""
    try:
        resp = await admin.api.call(addr, RequestCode.VIEW_BROKER_STATS_DATA,
                                    ViewBrokerStatsDataRequestHeader(statsName="TOPIC_PUT_NUMS",
                                                                     statsKey=topic))
    except MQBrokerError:
        return None
    return loads(resp.body)


def day_sum(stats: dict | None) -> int:
    """``StatsAllSubCommand.compute24HourSum``: the day's sum, else the hour's,
    else the minute's."""
    for period in ("statsDay", "statsHour", "statsMinute"):
        total = int(((stats or {}).get(period) or {}).get("sum", 0))
        if total:
            return total
    return 0


def minute_tps(stats: dict | None) -> float:
    return float(((stats or {}).get("statsMinute") or {}).get("tps", 0.0))


def _first_number(text: str | None) -> float:
    """"12.5 10.1 9.9" (put TPS over 10 s, 1 min, 10 min) -> 12.5."""
    return float((text or "0").split(" ")[0] or 0)


async def _client_versions(admin: MQAdmin, groups: dict) -> list[str]:
    """LANGUAGE%VERSION of every online consumer of the broker's user groups."""
    seen = set()
    for group in groups:
        try:
            conn = await admin.consumer_connection(group)
        except (MQClientError, RemotingError):
            continue
        for c in conn.get("connectionSet") or []:
            seen.add(f"{c.get('language')}%{version_desc(int(c.get('version', 0)))}")
    return sorted(seen)


async def broker_metrics(admin: MQAdmin, addr: str, totals: dict) -> dict:
    """One broker's evaluateReport entry; adds its figures to ``totals``."""
    kv = await admin.broker_runtime_info(addr)
    props = await admin.broker_config(addr)
    groups = (await user_groups(admin, addr))["subscriptionGroupTable"]
    topics = (await user_topics(admin, addr, False))["topicConfigTable"]
    trans = await _put_stats(admin, addr, T.TRANS_HALF_TOPIC)
    schedule = await _put_stats(admin, addr, T.SCHEDULE_TOPIC)
    tps = {"normalInTps": _first_number(kv.get("putTps")),
           "normalOutTps": _first_number(kv.get("getTransferedTps")),
           "transInTps": minute_tps(trans), "scheduleInTps": minute_tps(schedule)}
    day = {"normalOneDayInNum": int(kv.get("msgPutTotalTodayMorning", 0))
           - int(kv.get("msgPutTotalYesterdayMorning", 0)),
           "normalOneDayOutNum": int(kv.get("msgGetTotalTodayMorning", 0))
           - int(kv.get("msgGetTotalYesterdayMorning", 0)),
           "transOneDayInNum": day_sum(trans), "scheduleOneDayInNum": day_sum(schedule)}
    for key, value in tps.items():
        totals["totalTps"]["total" + key[0].upper() + key[1:]] += value
    for key, value in day.items():
        totals["totalOneDayNum"][key] += value
    return {
        "runtimeEnv": {"cpuNum": props.get("clientCallbackExecutorThreads"),
                       "totalMemKBytes": kv.get("totalMemKBytes")},
        "runtimeQuota": {
            "diskRatio": {"commitLogDiskRatio": kv.get("commitLogDiskRatio"),
                          "consumeQueueDiskRatio": kv.get("consumeQueueDiskRatio")},
            "tps": tps, "oneDayNum": day,
            "messageAverageSize": kv.get("putMessageAverageSize"),
            "topicSize": len(topics), "groupSize": len(groups)},
        "runtimeVersion": {"rocketmqVersion": CURRENT_VERSION_DESC,
                           "clientInfo": await _client_versions(admin, groups)},
    }


@EXPORT_COMMANDS.command("exportMetrics", "export metrics", lambda p: (
    p.add_argument("-c", "--clusterName", required=True, help="choose a cluster to export"),
    _file_arg(p, "metrics.json")))
async def export_metrics(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    info = await admin.cluster_info()
    cluster = ns.clusterName.strip()
    names = info.clusterAddrTable.get(cluster)
    if names is None:
        raise MQClientError(-1, f"cluster {cluster} not found")
    totals = {"totalTps": {"totalNormalInTps": 0.0, "totalNormalOutTps": 0.0,
                           "totalTransInTps": 0.0, "totalScheduleInTps": 0.0},
              "totalOneDayNum": {"normalOneDayInNum": 0, "normalOneDayOutNum": 0,
                                 "transOneDayInNum": 0, "scheduleOneDayInNum": 0}}
    report = {}
    for name in sorted(names):
        bd = info.brokerAddrTable.get(name)
        if bd is not None and MASTER_ID in bd.brokerAddrs:
            report[name] = await broker_metrics(admin, bd.brokerAddrs[MASTER_ID], totals)
    return write_export(ns.filePath, "metrics.json", {"evaluateReport": report,
                                                      "totalData": totals})
