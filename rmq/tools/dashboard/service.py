"""What rmq-dashboard shows and does, over rmq's own admin client.

Each method answers one page or one action of the console with plain
dicts (the web layer turns them into JSON).  Errors from name servers and
brokers are not caught here: they reach the user with their code and remark.
The sampler keeps a short history of broker TPS and group lag for the live
charts, so opening the page shows the last minutes at once.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import urllib.request
from collections import deque
from typing import Any

from rmq.client.admin import MQAdmin
from rmq.client.exceptions import MQClientError
from rmq.client.message import Message, MessageExt, MessageQueue
from rmq.common import fastjson
from rmq.common.codes import RequestCode
from rmq.common.java import is_dashboard_system_group
from rmq.common.topics import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    is_system_topic,
)
from rmq.remoting.exceptions import RemotingError
from rmq.tools.admin_base import message_dict, send_result_dict, tool_producer
from rmq.tools.admin_message import consume_directly, read_queue
from rmq.tools.admin_offset import reset_offset

log = logging.getLogger("rmq.dashboard")

MASTER_ID = 0
MESSAGE_LIMIT = 200  # messages a time-range search returns at most, as the console pages
HISTORY = 360  # samples kept per series for the live charts


def _first_number(text: str | None) -> float:
    """The first figure of a runtime-info value such as putTps ``"12.5 11.0 9.8"``."""
    try:
        return float((text or "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


INFLIGHT_METRIC = "rocketmq_consumer_inflight_messages"


def _fetch_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode("utf-8", "replace")


def inflight_rows(text: str) -> list[tuple[str, int]]:
    """(consumer_group, value) of each in-flight row of a Prometheus text page."""
    rows = []
    for line in text.splitlines():
        if not line.startswith(INFLIGHT_METRIC + "{"):
            continue
        labels, _, value = line.rpartition(" ")
        m = re.search(r'consumer_group="((?:[^"\\]|\\.)*)"', labels)
        if m is None:
            continue
        try:
            rows.append((m.group(1), int(float(value))))
        except ValueError:
            continue
    return rows


def topic_kind(topic: str) -> str:
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "retry"
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return "dlq"
    return "system" if is_system_topic(topic) else "normal"


def message_view(m: MessageExt) -> dict:
    """A message as the console shows it: every field, the properties and the body."""
    d = message_dict(m, body=True)
    d["bodySize"] = len(m.body)
    return d


class DashboardService:
    """The console's reads and writes against one set of name servers."""

    def __init__(self, namesrv: str, timeout_ms: int = 5000) -> None:
        self.admin = MQAdmin(namesrv, timeout_ms)
        self.tps: dict[str, deque] = {}  # broker name -> (time ms, put TPS, get TPS)
        self.lag: dict[str, deque] = {}  # group -> (time ms, messages behind)
        self._sampler: asyncio.Task | None = None

    async def close(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            await asyncio.gather(self._sampler, return_exceptions=True)
        await self.admin.close()

    # ---- cluster ------------------------------------------------------------
    async def cluster(self) -> dict:
        info = await self.admin.cluster_info()
        rows = []
        for cluster, names in sorted(info.clusterAddrTable.items()):
            for name in sorted(names):
                bd = info.brokerAddrTable.get(name)
                if bd is None:
                    continue
                for broker_id, addr in sorted(bd.brokerAddrs.items()):
                    rows.append(await self._broker_row(cluster, name, int(broker_id), addr))
        return {"brokers": rows, "clusters": sorted(info.clusterAddrTable)}

    async def _broker_row(self, cluster: str, name: str, broker_id: int, addr: str) -> dict:
        row: dict[str, Any] = {"cluster": cluster, "brokerName": name, "brokerId": broker_id,
                               "addr": addr, "role": "MASTER" if broker_id == MASTER_ID
                               else "SLAVE"}
        try:
            rt = await self.admin.broker_runtime_info(addr)
        except (MQClientError, RemotingError) as exc:
            row["error"] = str(exc)  # shown in the row: one broker down is not a page error
            return row
        row.update(version=rt.get("brokerVersionDesc", ""),
                   putTps=_first_number(rt.get("putTps")),
                   getTps=_first_number(rt.get("getTransferedTps")),
                   diskRatio=float(rt.get("commitLogDiskRatio") or 0),
                   putToday=int(rt.get("msgPutTotalTodayNow") or 0),
                   getToday=int(rt.get("msgGetTotalTodayNow") or 0),
                   bootTimestamp=int(rt.get("bootTimestamp") or 0),
                   # RocketMQ 5 timers: pending in the wheel, not yet in it, delivery behind (s)
                   timerPending=int(rt.get("timerCongestNum") or 0),
                   timerBacklog=int(rt.get("timerOffsetBehind") or 0),
                   timerBehind=int(rt.get("timerReadBehind") or 0))
        return row

    # ---- topics -------------------------------------------------------------
    async def topics(self) -> list[dict]:
        return [{"topic": t, "kind": topic_kind(t)} for t in sorted(await self.admin.topic_list())]

    async def topic(self, topic: str) -> dict:
        route = await self.admin.topic_route(topic)
        status = await self.admin.topic_status(topic)
        return {"topic": topic,
                "route": [{"brokerName": q.brokerName, "readQueueNums": q.readQueueNums,
                           "writeQueueNums": q.writeQueueNums, "perm": q.perm}
                          for q in route.queueDatas],
                "brokers": [{"brokerName": b.brokerName, "cluster": b.cluster,
                             "addrs": {str(k): v for k, v in b.brokerAddrs.items()}}
                            for b in route.brokerDatas],
                "queues": status}

    async def create_topic(self, topic: str, cluster: str, read: int, write: int,
                           perm: int, order: bool = False) -> dict:
        """UPDATE_AND_CREATE_TOPIC on every master of ``cluster``."""
        addrs = await self.admin.master_addrs(cluster)
        if not addrs:
            raise MQClientError(-1, f"cluster {cluster} has no master broker")
        for addr in addrs:
            await self.admin.create_topic(addr, topic, read, write, perm, order)
        return {"topic": topic, "brokers": addrs}

    async def delete_topic(self, topic: str, cluster: str) -> dict:
        await self.admin.delete_topic(topic, cluster)
        return {"topic": topic, "deleted": True}

    async def send(self, topic: str, tag: str, key: str, body: str) -> dict:
        """A test message from a producer of the console's own group."""
        message = Message(topic, body.encode("utf-8"), tags=tag or None, keys=key or None)
        async with tool_producer(self.admin, "rmq_dashboard_producer") as producer:
            return send_result_dict(await producer.send(message))

    # ---- consumer groups ----------------------------------------------------
    async def _masters(self) -> list[str]:
        info = await self.admin.cluster_info()
        return sorted(bd.brokerAddrs[MASTER_ID] for bd in info.brokerAddrTable.values()
                      if MASTER_ID in bd.brokerAddrs)

    async def group_names(self) -> list[str]:
        names: set[str] = set()
        for addr in await self._masters():
            resp = await self.admin.api.call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            names.update(fastjson.loads(resp.body).get("subscriptionGroupTable") or {})
        return sorted(names)

    async def groups(self) -> list[dict]:
        names = await self.group_names()
        rows = await asyncio.gather(*(self._group_row(g) for g in names))
        inflight = await self.inflight()
        for row in rows:
            row["inflight"] = inflight.get(row["group"])
        return list(rows)

    async def inflight(self) -> dict[str, int]:
        """Popped, unacknowledged messages per group: the sum over the masters
        of their ``rocketmq_consumer_inflight_messages`` (RocketMQ 5.3's metric,
        which a broker serves with metricsExporterType=PROM; no remoting request
        of 5.3.3 answers it). Groups of brokers without the exporter are absent."""
        out: dict[str, int] = {}
        for addr in await self._masters():
            try:
                cfg = await self.admin.broker_config(addr)
            except (MQClientError, RemotingError):
                continue
            if cfg.get("metricsExporterType", "").upper() != "PROM":
                continue
            host = cfg.get("metricsPromExporterHost") or addr.rpartition(":")[0]
            if host in ("0.0.0.0", "::"):
                host = addr.rpartition(":")[0]
            url = f"http://{host}:{cfg.get('metricsPromExporterPort', '5557')}/metrics"
            try:
                text = await asyncio.to_thread(_fetch_text, url)
            except OSError as exc:
                log.warning("metrics of %s unreadable: %s", addr, exc)
                continue
            for group, n in inflight_rows(text):
                out[group] = out.get(group, 0) + n
        return out

    async def _group_row(self, group: str) -> dict:
        row: dict[str, Any] = {"group": group, "system": is_dashboard_system_group(group),
                               "connections": 0, "lag": None}
        try:
            row["lag"] = sum(r["diff"] for r in await self.admin.consumer_progress(group))
        except (MQClientError, RemotingError):
            pass  # a group that never consumed has no offsets: no lag to show
        try:
            conn = await self.admin.consumer_connection(group)
            row["connections"] = len(conn.get("connectionSet") or [])
            row["consumeType"] = conn.get("consumeType", "")
            row["messageModel"] = conn.get("messageModel", "")
        except (MQClientError, RemotingError):
            pass  # offline
        return row

    async def group(self, group: str) -> dict:
        detail: dict[str, Any] = {"group": group, "connections": [], "subscriptions": [],
                                  "progress": [], "online": False}
        try:
            conn = await self.admin.consumer_connection(group)
        except (MQClientError, RemotingError) as exc:
            detail["offline"] = str(exc)
        else:
            detail["online"] = bool(conn.get("connectionSet"))
            detail["connections"] = conn.get("connectionSet") or []
            detail["subscriptions"] = list((conn.get("subscriptionTable") or {}).values())
            detail["consumeType"] = conn.get("consumeType", "")
            detail["messageModel"] = conn.get("messageModel", "")
        detail["progress"] = await self.admin.consumer_progress(group)
        detail["lag"] = sum(r["diff"] for r in detail["progress"])
        return detail

    async def reset_offset(self, group: str, topic: str, timestamp_ms: int) -> dict:
        """To the offsets at ``timestamp_ms`` (-1: the end, skipping the backlog);
        through the online consumers, else written by the console."""
        rows, offline = await reset_offset(self.admin, group, topic, timestamp_ms, True)
        return {"rows": rows, "offline": offline}

    # ---- messages -----------------------------------------------------------
    async def messages_by_time(self, topic: str, begin_ms: int, end_ms: int,
                               limit: int = MESSAGE_LIMIT) -> dict:
        route = await self.admin.topic_route(topic)
        found: list[MessageExt] = []
        for q in sorted(route.queueDatas, key=lambda q: q.brokerName):
            for queue_id in range(q.readQueueNums):
                mq = MessageQueue(topic, q.brokerName, queue_id)
                # from the offset at begin onwards (the offset searched for a time past
                # the last message is that message's, so end is applied by store time)
                msgs = await read_queue(self.admin, mq, str(begin_ms), None, "*", limit)
                found.extend(m for m in msgs if begin_ms <= m.store_timestamp <= end_ms)
        found.sort(key=lambda m: m.store_timestamp, reverse=True)
        return {"messages": [message_view(m) for m in found[:limit]],
                "truncated": len(found) > limit}

    async def messages_by_key(self, topic: str, key: str) -> dict:
        return {"messages": [message_view(m) for m in await self.admin.query_message(topic, key)]}

    async def message_by_id(self, topic: str, msg_id: str) -> dict:
        """By unique key (the client's msgId), else as an offset message id."""
        found = await self.admin.query_message(topic, msg_id, max_num=1, unique=True)
        if not found:
            try:
                found = [await self.admin.view_message(msg_id)]
            except ValueError:
                raise MQClientError(-1, f"no message {msg_id} in {topic}") from None
        return {"messages": [message_view(m) for m in found]}

    async def consume_directly(self, group: str, client_id: str, msg_id: str) -> dict:
        return await consume_directly(self.admin, group, client_id, msg_id)

    # ---- producers ----------------------------------------------------------
    async def producers(self, topic: str, group: str) -> dict:
        return await self.admin.producer_connection(group, topic)

    # ---- live charts --------------------------------------------------------
    def start_sampler(self, interval_s: float) -> None:
        self._sampler = asyncio.get_running_loop().create_task(self._sample_forever(interval_s))

    async def _sample_forever(self, interval_s: float) -> None:
        while True:
            try:
                await self.sample()
            except (MQClientError, RemotingError, OSError) as exc:
                log.warning("live sample failed: %s", exc)
            await asyncio.sleep(interval_s)

    async def sample(self) -> None:
        now = int(time.time() * 1000)
        for row in (await self.cluster())["brokers"]:
            if row["brokerId"] == MASTER_ID and "error" not in row:
                series = self.tps.setdefault(row["brokerName"], deque(maxlen=HISTORY))
                series.append((now, row["putTps"], row["getTps"]))
        for row in await self.groups():
            if row["lag"] is not None and not row["system"]:
                self.lag.setdefault(row["group"], deque(maxlen=HISTORY)).append((now, row["lag"]))

    def live(self) -> dict:
        return {"tps": {name: list(s) for name, s in self.tps.items()},
                "lag": {group: list(s) for group, s in self.lag.items()}}
