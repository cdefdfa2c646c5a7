"""``rmq-admin`` statistics commands of mqadmin 4.9.8: ``statsAll`` (every
topic's put TPS and day's count, and per consuming group its TPS, day's count
and backlog, from VIEW_BROKER_STATS_DATA on each master) and
``brokerConsumeStats`` (GET_BROKER_CONSUME_STATS: every group's per-queue
offsets and lag on one broker).  The columns and number formats are
mqadmin's, so scripts that cut its output keep working.
"""

from __future__ import annotations

import argparse
from datetime import datetime

from rmq.client.admin import MQAdmin, mq_table
from rmq.client.api import loads
from rmq.client.exceptions import MQBrokerError, MQClientError
from rmq.common import topics as T
from rmq.common.codes import RequestCode
from rmq.common.protocol.headers_admin import (
    GetConsumeStatsInBrokerHeader,
    ViewBrokerStatsDataRequestHeader,
)
from rmq.common.topics import MASTER_ID
from rmq.remoting.exceptions import RemotingError
from rmq.tools.admin_base import CommandTable, Output, parse_bool
from rmq.tools.admin_export import day_sum, minute_tps

STATS_COMMANDS = CommandTable()

STATS_ALL_ROW = "%-64s  %-64s %12s %11s %11s %14s %14s"
CONSUME_STATS_ROW = "%-64s  %-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s"


def _front(text: str, width: int) -> str:
    """``UtilAll.frontStringAtLeast``: at most ``width`` characters."""
    return text[:width]


async def _stats(admin: MQAdmin, addr: str, name: str, key: str) -> dict | None:
    """BrokerStatsData of one item; None when the broker has none (mqadmin
    ignores every failure here)."""
    try:
        resp = await admin.api.call(addr, RequestCode.VIEW_BROKER_STATS_DATA,
                                    ViewBrokerStatsDataRequestHeader(statsName=name, statsKey=key))
    except (MQBrokerError, MQClientError, RemotingError):
        return None
    return loads(resp.body)


async def _consumer_groups(admin: MQAdmin, masters: list[str], topic: str) -> list[str]:
    """QUERY_TOPIC_CONSUME_BY_WHO at the first master that answers."""
    for addr in masters:
        try:
            resp = await admin.api.call(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                                        {"topic": topic})
        except (MQBrokerError, MQClientError, RemotingError):
            continue
        return list(loads(resp.body).get("groupList") or [])
    return []


async def _backlog(admin: MQAdmin, group: str, topic: str) -> int:
    try:
        table = await admin.consume_stats(group, topic)
    except (MQBrokerError, MQClientError, RemotingError):
        return 0
    diff = sum(int(s.get("brokerOffset", 0)) - int(s.get("consumerOffset", 0)) for _, s in table)
    return max(0, diff)


async def topic_rows(admin: MQAdmin, topic: str, active_only: bool) -> list[dict]:
    """``StatsAllSubCommand.printTopicDetail`` for one topic."""
    route = await admin.topic_route(topic)
    masters = [bd.brokerAddrs[MASTER_ID] for bd in route.brokerDatas
               if MASTER_ID in bd.brokerAddrs]
    in_tps, in_day = 0.0, 0
    for addr in masters:
        stats = await _stats(admin, addr, "TOPIC_PUT_NUMS", topic)
        in_tps += minute_tps(stats)
        in_day += day_sum(stats)
    groups = await _consumer_groups(admin, masters, topic)
    if not groups:
        if active_only and in_day <= 0:
            return []
        return [{"topic": topic, "group": "", "accumulation": 0, "inTps": in_tps,
                 "outTps": None, "inMsg24Hour": in_day, "outMsg24Hour": None}]
    rows = []
    for group in groups:
        out_tps, out_day = 0.0, 0
        for addr in masters:
            stats = await _stats(admin, addr, "GROUP_GET_NUMS", f"{topic}@{group}")
            out_tps += minute_tps(stats)
            out_day += day_sum(stats)
        backlog = await _backlog(admin, group, topic)
        if not active_only or in_day > 0 or out_day > 0:
            rows.append({"topic": topic, "group": group, "accumulation": backlog,
                         "inTps": in_tps, "outTps": out_tps, "inMsg24Hour": in_day,
                         "outMsg24Hour": out_day})
    return rows


def stats_all_line(r: dict) -> str:
    if r["outTps"] is None:
        return STATS_ALL_ROW % (_front(r["topic"], 64), "", "0", f"{r['inTps']:.2f}", "",
                                r["inMsg24Hour"], "NO_CONSUMER")
    return STATS_ALL_ROW % (_front(r["topic"], 64), _front(r["group"], 64), r["accumulation"],
                            f"{r['inTps']:.2f}", f"{r['outTps']:.2f}", r["inMsg24Hour"],
                            r["outMsg24Hour"])


@STATS_COMMANDS.command("statsAll", "Topic and Consumer tps stats", lambda p: (
    p.add_argument("-a", "--activeTopic", action="store_true", help="print active topic only"),
    p.add_argument("-t", "--topic", help="print select topic only")))
async def stats_all(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    """Every topic but retry and dead-letter ones (or only ``-t``); a topic
    whose statistics cannot be read is left out, as mqadmin leaves it."""
    selected = (ns.topic or "").strip()
    rows: list[dict] = []
    for topic in await admin.topic_list():
        if T.is_retry_topic(topic) or T.is_dlq_topic(topic) or (selected and topic != selected):
            continue
        try:
            rows.extend(await topic_rows(admin, topic, ns.activeTopic))
        except (MQBrokerError, MQClientError, RemotingError):
            continue
    head = STATS_ALL_ROW % ("#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS",
                            "#InMsg24Hour", "#OutMsg24Hour")
    return Output(rows, "\n".join([head, *(stats_all_line(r) for r in rows)]))


def _date(ms: int) -> str:
    """``UtilAll.formatDate(.., "yyyy-MM-dd HH:mm:ss")`` in local time."""
    return f"{datetime.fromtimestamp(ms / 1000):%Y-%m-%d %H:%M:%S}"


def consume_stats_rows(body: dict, diff_level: int) -> list[dict]:
    """The queues of a ConsumeStatsList with a consumer timestamp and a lag of
    at least ``diff_level``, per group in the broker's order, queues sorted."""
    rows = []
    for per_group in body.get("consumeStatsList") or []:
        for group, stats_array in per_group.items():
            for stats in stats_array or []:
                for mq, w in mq_table(stats.get("offsetTable")):
                    broker, consumer = int(w.get("brokerOffset", 0)), int(w.get("consumerOffset", 0))
                    last = int(w.get("lastTimestamp", 0))
                    if broker - consumer < diff_level or last <= 0:
                        continue
                    rows.append({"topic": mq.topic, "group": group, "brokerName": mq.broker_name,
                                 "queueId": mq.queue_id, "brokerOffset": broker,
                                 "consumerOffset": consumer, "diff": broker - consumer,
                                 "lastTimestamp": last})
    return rows


@STATS_COMMANDS.command("brokerConsumeStats", "Fetch broker consume stats data", lambda p: (
    p.add_argument("-b", "--brokerAddr", required=True, help="Broker address"),
    p.add_argument("-t", "--timeoutMillis", type=int, default=50000,
                   help="request timeout Millis"),
    p.add_argument("-l", "--level", type=int, default=0, help="threshold of print diff"),
    p.add_argument("-o", "--order", type=parse_bool, default=False, help="order topic")))
async def broker_consume_stats(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    resp = await admin.api.call(ns.brokerAddr.strip(), RequestCode.GET_BROKER_CONSUME_STATS,
                                GetConsumeStatsInBrokerHeader(isOrder=ns.order),
                                timeout_ms=ns.timeoutMillis)
    body = loads(resp.body)
    rows = consume_stats_rows(body, ns.level)
    total = int(body.get("totalDiff", 0))
    lines = [CONSUME_STATS_ROW % ("#Topic", "#Group", "#Broker Name", "#QID", "#Broker Offset",
                                  "#Consumer Offset", "#Diff", "#LastTime")]
    lines += [CONSUME_STATS_ROW % (_front(r["topic"], 64), r["group"], _front(r["brokerName"], 32),
                                   r["queueId"], r["brokerOffset"], r["consumerOffset"],
                                   r["diff"], _date(r["lastTimestamp"])) for r in rows]
    lines += ["", f"Diff Total: {total}"]
    return Output({"brokerAddr": body.get("brokerAddr"), "rows": rows, "totalDiff": total},
                  "\n".join(lines))
