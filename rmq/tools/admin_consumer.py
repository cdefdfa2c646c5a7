"""``rmq-admin`` consumer commands of mqadmin not in ``rmq.tools.admin``:
``consumerProgress`` (5.3.3's: a group's queues and lag, with ``-s`` the
client on each queue, or without ``-g`` every group), ``consumerStatus``
(every client's ConsumerRunningInfo, analysed as mqadmin 4.9.8 does), ``getConsumerConfig`` (the group's subscription config on each broker)
and ``startMonitoring`` (``MonitorService`` with ``DefaultMonitorListener``:
backlog per group and topic, stuck queues, offset-moved events, printed as
``[MONITOR]`` lines)."""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from dataclasses import replace
from datetime import datetime

import orjson

from rmq.client import ConsumerConfig, ConsumeStatus, PushConsumer
from rmq.client.admin import MQAdmin, mq_table, progress_rows
from rmq.client.api import loads
from rmq.client.exceptions import MQClientError
from rmq.client.message import MessageQueue
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.java import version_desc
from rmq.common.protocol.headers_admin import (
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
)
from rmq.common.topics import (
    MASTER_ID,
    MONITOR_CONSUMER_GROUP,
    OFFSET_MOVED_EVENT,
    is_retry_topic,
    retry_topic_group,
)
from rmq.remoting.exceptions import RemotingError
from rmq.tools.admin_base import (
    CommandTable,
    Output,
    compact_time,
    emit,
    java_bool,
    mq_text,
    parse_bool,
)

CONSUMER_COMMANDS = CommandTable()
RETRY_PREFIX = "%RETRY%"
SUBSCRIPTION_CHECK_AFTER_MS = 2 * 60 * 1000  # a push consumer this old must agree with its group
BLOCKED_AFTER_MS = 60 * 1000
STATUS_HEADER = "%-10s %-40s %-20s %s"
STATUS_ROW = "%-10d %-40s %-20s %s"
QUEUE_HEADER = "%-64s  %-32s  %-4s  %-20s"
OFFSET_ROW = "%-32s  %-32s  %-4d  %-20d"
DETAIL_ROW = "%-64s  %-32s  %-4d  %s"
RT_HEADER = "%-64s  %14s %14s %14s %14s %18s %25s"
RT_ROW = "%-32s  %14.2f %14.2f %14.2f %14.2f %18.2f %25d"


# --- ConsumerRunningInfo ------------------------------------------------------------
def _subscriptions(info: dict) -> list[dict]:
    """The subscription set, in the order of Java's TreeSet (topic@expression)."""
    subs = info.get("subscriptionSet") or []
    return sorted(subs, key=lambda s: f"{s.get('topic')}@{s.get('subString')}")


def process_queue_text(pq: dict) -> str:
    """``ProcessQueueInfo.toString``."""
    def t(key: str) -> str:
        return compact_time(int(pq.get(key) or 0))

    return (f"ProcessQueueInfo [commitOffset={pq.get('commitOffset', 0)}, "
            f"cachedMsgMinOffset={pq.get('cachedMsgMinOffset', 0)}, "
            f"cachedMsgMaxOffset={pq.get('cachedMsgMaxOffset', 0)}, "
            f"cachedMsgCount={pq.get('cachedMsgCount', 0)}, "
            f"cachedMsgSizeInMiB={pq.get('cachedMsgSizeInMiB', 0)}, "
            f"transactionMsgMinOffset={pq.get('transactionMsgMinOffset', 0)}, "
            f"transactionMsgMaxOffset={pq.get('transactionMsgMaxOffset', 0)}, "
            f"transactionMsgCount={pq.get('transactionMsgCount', 0)}, "
            f"locked={java_bool(bool(pq.get('locked')))}, "
            f"tryUnlockTimes={pq.get('tryUnlockTimes', 0)}, lastLockTimestamp={t('lastLockTimestamp')}, "
            f"droped={java_bool(bool(pq.get('droped')))}, lastPullTimestamp={t('lastPullTimestamp')}, "
            f"lastConsumeTimestamp={t('lastConsumeTimestamp')}]")


def running_info_text(info: dict) -> str:
    """``ConsumerRunningInfo.formatString``: properties, subscriptions, offsets,
    queue details, RT and TPS per topic, and the thread dump when asked for."""
    out = ["#Consumer Properties#\n"]
    out += [f"{k:<40}: {v}\n" for k, v in sorted((info.get("properties") or {}).items())]
    out.append("\n\n#Consumer Subscription#\n")
    for i, s in enumerate(_subscriptions(info), 1):
        out.append(f"{i:03d} Topic: {s.get('topic', ''):<40} ClassFilter: "
                   f"{java_bool(bool(s.get('classFilterMode'))):<8} SubExpression: "
                   f"{s.get('subString', '')}\n")
    queues = mq_table(info.get("mqTable"))
    out.append("\n\n#Consumer Offset#\n")
    out.append(QUEUE_HEADER % ("#Topic", "#Broker Name", "#QID", "#Consumer Offset") + "\n")
    out += [OFFSET_ROW % (mq.topic, mq.broker_name, mq.queue_id, int(pq.get("commitOffset", 0)))
            + "\n" for mq, pq in queues]
    out.append("\n\n#Consumer MQ Detail#\n")
    out.append(QUEUE_HEADER % ("#Topic", "#Broker Name", "#QID", "#ProcessQueueInfo") + "\n")
    out += [DETAIL_ROW % (mq.topic, mq.broker_name, mq.queue_id, process_queue_text(pq)) + "\n"
            for mq, pq in queues]
    out.append("\n\n#Consumer RT&TPS#\n")
    out.append(RT_HEADER % ("#Topic", "#Pull RT", "#Pull TPS", "#Consume RT", "#ConsumeOK TPS",
                            "#ConsumeFailed TPS", "#ConsumeFailedMsgsInHour") + "\n")
    for topic, st in sorted((info.get("statusTable") or {}).items()):
        out.append(RT_ROW % (topic, *(float(st.get(k, 0)) for k in (
            "pullRT", "pullTPS", "consumeRT", "consumeOKTPS", "consumeFailedTPS")),
            int(st.get("consumeFailedMsgs", 0))) + "\n")
    if info.get("jstack") is not None:
        out.append("\n\n#Consumer jstack#\n")
        out.append(str(info["jstack"]))
    return "".join(out)


def _is_push(info: dict) -> bool:
    return (info.get("properties") or {}).get("PROP_CONSUME_TYPE") == "CONSUME_PASSIVELY"


def same_subscription(infos: dict[str, dict]) -> bool:
    """``analyzeSubscription``: push consumers running for two minutes must all
    subscribe the same (topic, expression) pairs, and not none."""
    first = infos[min(infos)]
    started = int((first.get("properties") or {}).get("PROP_CONSUMER_START_TIMESTAMP") or 0)
    if not _is_push(first) or time.time() * 1000 - started <= SUBSCRIPTION_CHECK_AFTER_MS:
        return True
    sets = [{(s.get("topic"), s.get("subString")) for s in i.get("subscriptionSet") or []}
            for i in infos.values()]
    return all(s == sets[0] for s in sets) and bool(sets[-1])


def process_queue_problems(client_id: str, info: dict) -> str:
    """``analyzeProcessQueue``: orderly queues not locked (or failing to unlock),
    concurrent queues holding messages untouched for a minute."""
    if not _is_push(info):
        return ""
    orderly = str((info.get("properties") or {}).get("PROP_CONSUMEORDERLY")).lower() == "true"
    now = int(time.time() * 1000)
    out = []
    for mq, pq in mq_table(info.get("mqTable")):
        if orderly:
            if not pq.get("locked"):
                out.append(f"{client_id} {mq_text(mq)} can't lock for a while, "
                           f"{now - int(pq.get('lastLockTimestamp', 0))}ms\n")
            elif pq.get("droped") and int(pq.get("tryUnlockTimes", 0)) > 0:
                out.append(f"{client_id} {mq_text(mq)} unlock {pq['tryUnlockTimes']} times, "
                           "still failed\n")
        else:
            idle = now - int(pq.get("lastConsumeTimestamp", 0))
            if idle > BLOCKED_AFTER_MS and int(pq.get("cachedMsgCount", 0)) > 0:
                out.append(f"{client_id} {mq_text(mq)} can't consume for a while, maybe "
                           f"blocked, {idle}ms\n")
    return "".join(out)


async def _group_broker(admin: MQAdmin, group: str) -> str:
    """A broker of the group's retry topic (its master, else any)."""
    route = await admin.topic_route(RETRY_PREFIX + group)
    for bd in route.brokerDatas:
        addr = bd.brokerAddrs.get(MASTER_ID) or next(iter(bd.brokerAddrs.values()), None)
        if addr:
            return addr
    raise MQClientError(-1, f"no broker serves the retry topic of {group}")


async def consumer_running_info(admin: MQAdmin, group: str, client_id: str,
                                jstack: bool = False) -> dict:
    """GET_CONSUMER_RUNNING_INFO, which the broker forwards to the client."""
    resp = await admin.api.call(
        await _group_broker(admin, group), RequestCode.GET_CONSUMER_RUNNING_INFO,
        GetConsumerRunningInfoRequestHeader(consumerGroup=group, clientId=client_id,
                                            jstackEnable=jstack),
        timeout_ms=admin.api.timeout_ms * 3)
    return loads(resp.body)


async def consumer_connections(admin: MQAdmin, group: str, addr: str | None = None) -> list[dict]:
    if addr is None:
        conn = await admin.consumer_connection(group)
    else:
        resp = await admin.api.call(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                    GetConsumerConnectionListRequestHeader(consumerGroup=group))
        conn = loads(resp.body)
    return sorted(conn.get("connectionSet") or [], key=lambda c: c.get("clientId", ""))


@CONSUMER_COMMANDS.command("consumerStatus", "Query consumer's internal data structure",
                           lambda p: (
    p.add_argument("-g", "--consumerGroup", required=True, help="consumer group name"),
    p.add_argument("-i", "--clientId", help="The consumer's client id"),
    p.add_argument("-b", "--brokerAddr", help="broker address"),
    p.add_argument("-s", "--jstack", action="store_true",
                   help="Run jstack command in the consumer progress")))
async def consumer_status(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    """With ``-i``: that client's running info.  Without: every client's is
    written to ``<now>/<clientId>`` (as mqadmin does) and the group analysed."""
    group = ns.consumerGroup.strip()
    if ns.clientId:
        info = await consumer_running_info(admin, group, ns.clientId.strip(), ns.jstack)
        return Output(info, running_info_text(info).rstrip("\n"))
    conns = await consumer_connections(admin, group, ns.brokerAddr.strip() if ns.brokerAddr else None)
    now = int(time.time() * 1000)
    lines = [STATUS_HEADER % ("#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile")]
    infos: dict[str, dict] = {}
    failed = []
    for conn in conns:
        cid = conn.get("clientId", "")
        try:
            info = await consumer_running_info(admin, group, cid, ns.jstack)
        except (MQClientError, RemotingError) as e:
            failed.append(f"{cid}: {e}")
            continue
        infos[cid] = info
        path = os.path.join(str(now), cid)
        os.makedirs(str(now), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(running_info_text(info))
        lines.append(STATUS_ROW % (len(infos), cid, version_desc(int(conn.get("version", 0))), path))
    text = "\n".join(lines) + "\n"
    analysis: dict[str, object] = {}
    if infos:
        same = same_subscription(infos)
        analysis["sameSubscription"] = same
        if same:
            text += "\n\nSame subscription in the same group of consumer\n\nRebalance OK\n"
            problems = {cid: process_queue_problems(cid, i) for cid, i in sorted(infos.items())}
            text += "".join(problems.values())
            analysis["problems"] = {c: p.splitlines() for c, p in problems.items() if p}
        else:
            text += "\n\nWARN: Different subscription in the same group of consumer!!!"
    error = f"no running info from {'; '.join(failed)}" if failed else None
    return Output({"clients": infos, **analysis}, text.rstrip("\n"), error)


# --- consumerProgress (5.3.3) ---------------------------------------------------------------
PROGRESS_HEADER = "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s%s"
PROGRESS_ROW = "%-64s  %-32s  %-4d  %-20d  %-20d  %-20d %-20d %s"
PROGRESS_IP_HEADER = "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s %-20s%s"
PROGRESS_IP_ROW = "%-64s  %-32s  %-4d  %-20d  %-20d  %-20s %-20d %-20d %s"
GROUPS_HEADER = "%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s"
GROUPS_ROW = "%-64s  %-6d  %-24s %-5s  %-14s  %-7d  %d"


async def queue_client_ips(admin: MQAdmin, group: str) -> dict[MessageQueue, str]:
    """Which client holds each queue: the queues of every connected client's
    running info, by the IP part of its client id.  A failure ends the search
    with what was found, as in 5.3.3 (the other queues show N/A)."""
    ips: dict[MessageQueue, str] = {}
    try:
        for conn in await consumer_connections(admin, group):
            client_id = conn.get("clientId", "")
            info = await consumer_running_info(admin, group, client_id)
            for mq, _ in mq_table(info.get("mqTable")):
                ips[mq] = client_id.split("@")[0]
    except (MQClientError, RemotingError):
        pass
    return ips


def _last_time(ms: int) -> str:
    """``UtilAll.formatDate(.., YYYY_MM_DD_HH_MM_SS)`` in local time, N/A for none."""
    return "N/A" if not ms else datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def progress_text(rows: list[dict], tps: float, show_ip: bool) -> str:
    """5.3.3's queue table (names cut at 64 and 32 characters) and summary."""
    if show_ip:
        lines = [PROGRESS_IP_HEADER % ("#Topic", "#Broker Name", "#QID", "#Broker Offset",
                                       "#Consumer Offset", "#Client IP", "#Diff", "#Inflight",
                                       "#LastTime")]
    else:
        lines = [PROGRESS_HEADER % ("#Topic", "#Broker Name", "#QID", "#Broker Offset",
                                    "#Consumer Offset", "#Diff", "#Inflight", "#LastTime")]
    for r in rows:
        head = (r["topic"][:64], r["brokerName"][:32], r["queueId"], r["brokerOffset"],
                r["consumerOffset"])
        tail = (r["diff"], r["inflight"], _last_time(r["lastTimestamp"]))
        if show_ip:
            lines.append(PROGRESS_IP_ROW % (*head, r["clientIP"] or "N/A", *tail))
        else:
            lines.append(PROGRESS_ROW % (*head, *tail))
    lines += ["", f"Consume TPS: {tps:.2f}",
              f"Consume Diff Total: {sum(r['diff'] for r in rows)}",
              f"Consume Inflight Total: {sum(r['inflight'] for r in rows)}"]
    return "\n".join(lines)


async def group_consume_info(admin: MQAdmin, group: str) -> dict:
    """5.3.3's ``GroupConsumeInfo`` of a group: its consume stats and its
    connections, each left at none when the brokers have none to give."""
    row = {"group": group, "count": 0, "version": "OFFLINE", "type": "", "model": "",
           "tps": 0, "diffTotal": 0}
    try:
        stats, tps = await admin.consume_stats_and_tps(group)
        row["tps"] = int(tps)
        row["diffTotal"] = sum(r["diff"] for r in progress_rows(stats))
    except (MQClientError, RemotingError):
        pass
    try:
        conn = await admin.consumer_connection(group)
    except (MQClientError, RemotingError):
        return row
    clients = conn.get("connectionSet") or []
    if clients:
        push = conn.get("consumeType") != "CONSUME_ACTIVELY"
        row.update(count=len(clients),
                   version=version_desc(min(int(c.get("version", 0)) for c in clients)),
                   type="PUSH" if push else "PULL",
                   model=str(conn.get("messageModel", "")) if push else "")
    return row


# what 5.3.3's examineConsumeStats raises (CONSUMER_NOT_ONLINE) for a group
# none of whose brokers holds an offset of it
NO_OFFSETS = ("Not found the consumer group consume stats, because return offset table is "
              "empty, maybe the consumer not consume any message")


@CONSUMER_COMMANDS.command("consumerProgress", "Query consumer's progress, speed.", lambda p: (
    p.add_argument("-g", "--groupName", help="consumer group name (none: every group)"),
    p.add_argument("-t", "--topicName", help="topic name"),
    p.add_argument("-s", "--showClientIP", type=parse_bool, default=False,
                   help="true: show the client IP holding each queue"),
    p.add_argument("-c", "--cluster",
                   help="cluster name: routes an LMQ (or timer) topic no broker registers")))
async def consumer_progress(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    """With ``-g``: the group's queues (GET_CONSUME_STATS), the client on each
    with ``-s true`` (GET_CONSUMER_CONNECTION_LIST, then GET_CONSUMER_RUNNING_INFO
    per client).  Without: one line per group of every ``%RETRY%`` topic the
    name servers list (GET_ALL_TOPIC_LIST_FROM_NAMESERVER)."""
    if ns.groupName is None:
        groups = [retry_topic_group(t) for t in await admin.topic_list() if is_retry_topic(t)]
        infos = [await group_consume_info(admin, g) for g in groups]
        lines = [GROUPS_HEADER % ("#Group", "#Count", "#Version", "#Type", "#Model", "#TPS",
                                  "#Diff Total")]
        lines += [GROUPS_ROW % (i["group"][:64], i["count"], i["version"], i["type"], i["model"],
                                i["tps"], i["diffTotal"]) for i in infos]
        return Output(infos, "\n".join(lines))
    group = ns.groupName.strip()
    topic = ns.topicName.strip() if ns.topicName else None
    cluster = ns.cluster.strip() if ns.cluster else None
    stats, tps = await admin.consume_stats_and_tps(group, topic, cluster)
    if not stats:
        raise MQClientError(ResponseCode.CONSUMER_NOT_ONLINE, NO_OFFSETS)
    rows = progress_rows(stats)
    if ns.showClientIP:
        ips = await queue_client_ips(admin, group)
        for (mq, _), row in zip(stats, rows, strict=True):
            row["clientIP"] = ips.get(mq)
    return Output(rows, progress_text(rows, tps, ns.showClientIP))


# --- subscription group config ----------------------------------------------------------
GROUP_FIELDS = ("groupName", "consumeEnable", "consumeFromMinEnable", "consumeBroadcastEnable",
                "retryQueueNums", "retryMaxTimes", "brokerId", "whichBrokerWhenConsumeSlowly",
                "notifyConsumerIdsChangedEnable")


@CONSUMER_COMMANDS.command("getConsumerConfig", "Get consumer config by subscription group name!",
                           lambda p: p.add_argument("-g", "--groupName", required=True,
                                                    help="subscription group name"))
async def get_consumer_config(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    """The group's SubscriptionGroupConfig on every broker that has it, field
    by field in the class's order."""
    group = ns.groupName.strip()
    info = await admin.cluster_info()
    found, text = [], []
    for name, bd in sorted(info.brokerAddrTable.items()):
        addr = bd.brokerAddrs.get(MASTER_ID) or next(iter(bd.brokerAddrs.values()), None)
        if addr is None:
            continue
        resp = await admin.api.call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        config = (loads(resp.body).get("subscriptionGroupTable") or {}).get(group)
        if config is None:
            continue
        cluster = next((c for c, names in info.clusterAddrTable.items() if name in names), None)
        found.append({"clusterName": cluster, "brokerName": name, "config": config})
        text.append(f"============================={cluster}:{name}=============================")
        for field in GROUP_FIELDS:
            value = config.get(field)
            shown = "" if value is None else java_bool(value) if isinstance(value, bool) else value
            text.append(f"{field:<40}=  {shown}")
    if not found:
        raise MQClientError(-1, f"no broker has subscription group {group}")
    return Output(found, "\n".join(text))


# --- MonitorService ------------------------------------------------------------------------
def _monitor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--roundInterval", type=int, default=60_000,
                   help="ms between rounds (rmq; mqadmin: 60000, the first after 20000)")
    p.add_argument("--rounds", type=int, default=0,
                   help="stop after this many rounds (rmq; default 0: run until stopped)")


class MonitorService:
    """``MonitorService`` + ``DefaultMonitorListener``: each round looks at every
    group with a retry topic; a push consumer on OFFSET_MOVED_EVENT reports
    consumers whose offsets the broker corrected."""

    PREFIX = "[MONITOR] "
    NOTIFY = PREFIX + " [NOTIFY] "

    def __init__(self, admin: MQAdmin, as_json: bool) -> None:
        self.admin = admin
        self.as_json = as_json
        self.events = PushConsumer(
            MONITOR_CONSUMER_GROUP, listener=self._offset_moved,
            config=ConsumerConfig(consume_concurrently_max=1),
            client_config=replace(admin.config,
                                  instance_name=f"MonitorService_{os.getpid()}_{time.time_ns()}"))
        self.events.subscribe(OFFSET_MOVED_EVENT, "*")

    def report(self, kind: str, text: str, **data) -> None:
        if self.as_json:
            emit(orjson.dumps({"report": kind, **data}).decode())
        else:
            emit(text)

    def _offset_moved(self, msgs, ctx) -> ConsumeStatus:
        try:
            ev = loads(msgs[0].body)
            mq = ev.get("messageQueue") or {}
            mq_s = mq_text(MessageQueue(mq.get("topic"), mq.get("brokerName"), mq.get("queueId")))
            self.report("deleteMsgsEvent",
                        f"{self.PREFIX}reportDeleteMsgsEvent: DeleteMsgsEvent [offsetMovedEvent="
                        f"OffsetMovedEvent [consumerGroup={ev.get('consumerGroup')}, messageQueue="
                        f"{mq_s}, offsetRequest={ev.get('offsetRequest')}, offsetNew="
                        f"{ev.get('offsetNew')}], eventTimestamp={msgs[0].store_timestamp}]",
                        offsetMovedEvent=ev, eventTimestamp=msgs[0].store_timestamp)
        except (ValueError, TypeError, AttributeError):
            pass  # not an event the broker wrote: ignored, as MonitorService does
        return ConsumeStatus.CONSUME_SUCCESS

    async def start(self) -> None:
        await self.events.start()

    async def stop(self) -> None:
        await self.events.shutdown()

    async def round(self) -> None:
        self.report("beginRound", self.PREFIX + "=========================================beginRound")
        for topic in await self.admin.topic_list():
            if topic.startswith(RETRY_PREFIX):
                group = topic[len(RETRY_PREFIX):]
                await self._undone(group)
                await self._running_info(group)
        self.report("endRound", self.PREFIX + "=========================================endRound")

    async def _undone(self, group: str) -> None:
        """Backlog per topic: total, the largest queue's, and how far the last
        consumed message trails the newest one."""
        try:
            stats = await self.admin.consume_stats(group)
            await self.admin.consumer_connection(group)
        except (MQClientError, RemotingError):
            return
        by_topic: dict[str, list] = {}
        for mq, st in stats:
            by_topic.setdefault(mq.topic, []).append((mq, st))
        for topic, queues in sorted(by_topic.items()):
            total = single = delay = 0
            for mq, st in queues:
                diff = int(st.get("brokerOffset", 0)) - int(st.get("consumerOffset", 0))
                single = max(single, diff)
                total += max(diff, 0)
                last = int(st.get("lastTimestamp", 0))
                if last > 0:
                    delay = max(delay, await self._newest_store_time(mq) - last)
            self.report("undoneMsgs",
                        f"{self.PREFIX}reportUndoneMsgs: UndoneMsgs [consumerGroup={group}, "
                        f"topic={topic}, undoneMsgsTotal={total}, undoneMsgsSingleMQ={single}, "
                        f"undoneMsgsDelayTimeMills={delay}]",
                        consumerGroup=group, topic=topic, undoneMsgsTotal=total,
                        undoneMsgsSingleMQ=single, undoneMsgsDelayTimeMills=delay)

    async def _newest_store_time(self, mq: MessageQueue) -> int:
        """Store time of the queue's last message; 0 when there is none."""
        try:
            route = await self.admin.topic_route(mq.topic)
            addr = next(bd.brokerAddrs.get(MASTER_ID) for bd in route.brokerDatas
                        if bd.brokerName == mq.broker_name)
            newest = await self.admin.api.get_max_offset(addr, mq)
            msg = await self.admin.query_by_offset(mq.topic, mq.broker_name, mq.queue_id,
                                                   newest - 1) if newest > 0 else None
        except (MQClientError, RemotingError, StopIteration):
            return 0
        return msg.store_timestamp if msg is not None else 0

    async def _running_info(self, group: str) -> None:
        try:
            conns = await consumer_connections(self.admin, group)
        except (MQClientError, RemotingError):
            return
        infos = {}
        for conn in conns:
            try:
                infos[conn["clientId"]] = await consumer_running_info(self.admin, group,
                                                                      conn["clientId"])
            except (MQClientError, RemotingError, KeyError):
                continue
        if not infos:
            return
        if not same_subscription(infos):
            self.report("subscriptionDifferent",
                        f"{self.NOTIFY}reportConsumerRunningInfo: ConsumerGroup: {group}, "
                        "Subscription different", consumerGroup=group)
        for cid, info in sorted(infos.items()):
            problems = process_queue_problems(cid, info)
            if problems:
                self.report("processQueue",
                            f"{self.NOTIFY}reportConsumerRunningInfo: ConsumerGroup: {group}, "
                            f"ClientId: {cid}, {problems}".rstrip("\n"),
                            consumerGroup=group, clientId=cid, problems=problems.splitlines())


@CONSUMER_COMMANDS.command("startMonitoring", "Start Monitoring", _monitor_args)
async def start_monitoring(admin: MQAdmin, ns: argparse.Namespace) -> None:
    if ns.roundInterval <= 0 or ns.rounds < 0:
        raise MQClientError(-1, "--roundInterval must be > 0 and --rounds >= 0")
    await admin.cluster_info()  # an unreachable name server fails here, in one line
    monitor = MonitorService(admin, ns.json)
    await monitor.start()
    try:
        await asyncio.sleep(min(20_000, ns.roundInterval) / 1000)
        done = 0
        while True:
            await monitor.round()
            done += 1
            if ns.rounds and done >= ns.rounds:
                return
            await asyncio.sleep(ns.roundInterval / 1000)
    finally:
        await monitor.stop()
