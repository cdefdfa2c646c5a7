"""``MQAdmin`` (``DefaultMQAdminExt``): the operator calls used by ``rmq-admin``.

Name-server calls go to the configured name servers (KV and wipe calls to
each of them); broker calls go to the address given, or to every master of a
cluster when the CLI is given ``-c``.  Results are plain dicts/lists so they
print as tables or JSON unchanged.
"""

from __future__ import annotations

import time

import orjson

from rmq.acl.signer import SessionCredentials
from rmq.client import headers as h
from rmq.client.acl_admin import AclAdmin
from rmq.client.api import MQClientAPI, loads
from rmq.client.config import ClientConfig
from rmq.client.exceptions import MQBrokerError, MQClientError
from rmq.client.instance import sign_with
from rmq.client.message import MessageExt, MessageQueue
from rmq.common.codes import RequestCode as RC
from rmq.common.codes import ResponseCode
from rmq.common.message_id import decode_message_id
from rmq.common.properties import format_properties, parse_properties
from rmq.common.protocol.headers_admin import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
    ResetOffsetRequestHeader,
)
from rmq.common.route import ClusterInfo, TopicRouteData
from rmq.common.timer import TIMER_TOPIC
from rmq.common.topics import MASTER_ID, pop_retry_topic_v1, retry_topic
from rmq.remoting import RemotingClient
from rmq.remoting.exceptions import RemotingError
from rmq.store.multi_dispatch import is_lmq


def mq_table(obj: dict) -> list[tuple[MessageQueue, object]]:
    """A MessageQueue-keyed map (keys are compact JSON after fastjson parsing)."""
    out = [(MessageQueue.from_json_obj(orjson.loads(k)), v) for k, v in (obj or {}).items()]
    return sorted(out, key=lambda kv: kv[0])


class MQAdmin:
    def __init__(self, namesrv_addr: str, timeout_ms: int = 5000,
                 credentials: SessionCredentials | None = None) -> None:
        """``credentials``: sign every request (brokers with plain ACL)."""
        self.config = ClientConfig(namesrv_addr=namesrv_addr)
        if credentials is not None:
            self.config.access_key = credentials.access_key
            self.config.secret_key = credentials.secret_key
            self.config.security_token = credentials.security_token
        self.remoting = RemotingClient()
        sign_with(self.remoting, self.config.credentials())
        self.remoting.update_namesrv_address_list(self.config.namesrv_list())
        self.api = MQClientAPI(self.remoting, timeout_ms)
        self.acl = AclAdmin(self.api)

    async def close(self) -> None:
        await self.remoting.close()

    async def __aenter__(self) -> MQAdmin:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # --- name server -------------------------------------------------------------
    async def cluster_info(self) -> ClusterInfo:
        return await self.api.get_broker_cluster_info()

    async def topic_route(self, topic: str) -> TopicRouteData:
        return await self.api.get_topic_route(topic)

    async def topic_list(self, cluster: str | None = None) -> list[str]:
        if cluster:
            return sorted(await self.api.get_topics_by_cluster(cluster))
        return sorted(await self.api.get_all_topic_list())

    async def master_addrs(self, cluster: str) -> list[str]:
        info = await self.cluster_info()
        names = info.clusterAddrTable.get(cluster)
        if names is None:
            raise MQClientError(-1, f"cluster {cluster} not found")
        out = []
        for name in sorted(names):
            bd = info.brokerAddrTable.get(name)
            if bd is not None and MASTER_ID in bd.brokerAddrs:
                out.append(bd.brokerAddrs[MASTER_ID])
        return out

    async def namesrv_config(self) -> dict[str, dict[str, str]]:
        out = {}
        for ns in self.config.namesrv_list():
            out[ns] = parse_properties((await self.api.get_namesrv_config(ns)).decode("utf-8"))
        return out

    async def update_kv_config(self, namespace: str, key: str, value: str) -> None:
        for ns in self.config.namesrv_list():
            await self.api.put_kv_config(ns, namespace, key, value)

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        for ns in self.config.namesrv_list():
            await self.api.delete_kv_config(ns, namespace, key)

    async def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        return {ns: await self.api.wipe_write_perm(ns, broker_name)
                for ns in self.config.namesrv_list()}

    # --- topics -------------------------------------------------------------------
    async def create_topic(self, addr: str, topic: str, read: int = 8, write: int = 8,
                           perm: int = 6, order: bool = False,
                           attributes: str | None = None) -> None:
        """``attributes``: 5.x topic attributes, ``+message.type=FIFO,...``."""
        await self.api.call(addr, RC.UPDATE_AND_CREATE_TOPIC, CreateTopicRequestHeader(
            topic=topic, defaultTopic="TBW102", readQueueNums=read, writeQueueNums=write,
            perm=perm, topicFilterType="SINGLE_TAG", topicSysFlag=0, order=order,
            attributes=attributes))

    async def delete_topic(self, topic: str, cluster: str) -> None:
        for addr in await self.master_addrs(cluster):
            await self.api.call(addr, RC.DELETE_TOPIC_IN_BROKER,
                                DeleteTopicRequestHeader(topic=topic))
        for ns in self.config.namesrv_list():
            await self.api.delete_topic_in_namesrv(ns, topic, cluster)

    async def topic_status(self, topic: str) -> list[dict]:
        route = await self.topic_route(topic)
        rows = []
        for bd in route.brokerDatas:
            addr = bd.brokerAddrs.get(MASTER_ID)
            if addr is None:
                continue
            resp = await self.api.call(addr, RC.GET_TOPIC_STATS_INFO,
                                       GetTopicStatsInfoRequestHeader(topic=topic))
            for mq, st in mq_table(loads(resp.body).get("offsetTable")):
                rows.append({"brokerName": mq.broker_name, "queueId": mq.queue_id,
                             "minOffset": st.get("minOffset", 0),
                             "maxOffset": st.get("maxOffset", 0),
                             "lastUpdateTimestamp": st.get("lastUpdateTimestamp", 0)})
        return rows

    # --- brokers ----------------------------------------------------------------
    async def broker_runtime_info(self, addr: str) -> dict[str, str]:
        resp = await self.api.call(addr, RC.GET_BROKER_RUNTIME_INFO)
        return dict(loads(resp.body).get("table") or {})

    async def broker_config(self, addr: str) -> dict[str, str]:
        resp = await self.api.call(addr, RC.GET_BROKER_CONFIG)
        return parse_properties(bytes(resp.body or b"").decode("utf-8"))

    async def update_broker_config(self, addr: str, props: dict[str, str]) -> None:
        await self.api.call(addr, RC.UPDATE_BROKER_CONFIG, None,
                            format_properties(props).encode("utf-8"))

    # --- groups -------------------------------------------------------------------
    async def update_sub_group(self, addr: str, config: dict) -> None:
        await self.api.call(addr, RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None,
                            orjson.dumps(config, option=orjson.OPT_SORT_KEYS))

    async def set_consume_mode(self, addr: str, topic: str, group: str, mode: str,
                               pop_share_queue_num: int = 0) -> None:
        """SET_MESSAGE_REQUEST_MODE (5.x): PULL or POP for the group on ``topic``."""
        await self.api.call(addr, RC.SET_MESSAGE_REQUEST_MODE, None, orjson.dumps({
            "consumerGroup": group, "mode": mode, "popShareQueueNum": pop_share_queue_num,
            "topic": topic}))

    async def delete_sub_group(self, addr: str, group: str, remove_offset: bool) -> None:
        await self.api.call(addr, RC.DELETE_SUBSCRIPTIONGROUP, DeleteSubscriptionGroupRequestHeader(
            groupName=group, removeOffset=remove_offset))

    async def _group_brokers(self, topic: str) -> list[str]:
        route = await self.topic_route(topic)
        return [bd.brokerAddrs[MASTER_ID] for bd in route.brokerDatas
                if MASTER_ID in bd.brokerAddrs]

    async def consume_stats(self, group: str, topic: str | None = None
                            ) -> list[tuple[MessageQueue, dict]]:
        """Per queue {brokerOffset, consumerOffset, lastTimestamp, pullOffset},
        sorted, from every broker of the group's retry topic (``examineConsumeStats``)."""
        return (await self.consume_stats_and_tps(group, topic))[0]

    async def _consume_stats_brokers(self, group: str, topic: str | None,
                                     cluster: str | None) -> list[str]:
        """The brokers ``examineConsumeStats`` asks (5.3.3): those of the first
        of these with a route: the group's retry topic; with a topic, the topic
        and its POP retry topic; for an LMQ or the wheel timer topic, which no
        broker registers, the ``cluster`` (every broker registers its cluster's
        name as a topic)."""
        candidates = [retry_topic(group)]
        if topic is not None:
            candidates += [topic, pop_retry_topic_v1(topic, group)]
            if cluster and (is_lmq(topic) or topic == TIMER_TOPIC):
                candidates.append(cluster)
        for i, candidate in enumerate(candidates):
            try:
                return await self._group_brokers(candidate)
            except MQBrokerError as e:
                if i < len(candidates) - 1:
                    continue
                if topic is not None or e.code != ResponseCode.TOPIC_NOT_EXIST:
                    raise
                # every group that ever consumed has a retry topic on its brokers
                raise MQClientError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                    f"no such consumer group {group}: no broker holds offsets "
                                    f"for it (its retry topic {candidate} has no route)") from None
        raise AssertionError("unreachable: the candidates are never empty")

    async def consume_stats_and_tps(self, group: str, topic: str | None = None,
                                    cluster: str | None = None
                                    ) -> tuple[list[tuple[MessageQueue, dict]], float]:
        """``consume_stats`` and the group's consume TPS summed over its brokers;
        ``cluster`` routes an LMQ ``topic`` (mqadmin's ``-c``)."""
        table: list[tuple[MessageQueue, dict]] = []
        tps = 0.0
        for addr in await self._consume_stats_brokers(group, topic, cluster):
            resp = await self.api.call(addr, RC.GET_CONSUME_STATS, GetConsumeStatsRequestHeader(
                consumerGroup=group, topic=topic))
            body = loads(resp.body)
            table.extend(mq_table(body.get("offsetTable")))
            tps += float(body.get("consumeTps") or 0)
        return sorted(table, key=lambda kv: kv[0]), tps

    async def consumer_progress(self, group: str, topic: str | None = None) -> list[dict]:
        """Per queue as 5.3.3's ``consumerProgress`` shows it: broker offset,
        consumer offset, diff (broker - consumer) and inflight (pull offset -
        consumer offset: pulled, not yet committed; a broker without
        ``pullOffset`` counts none)."""
        return progress_rows(await self.consume_stats(group, topic))

    async def consumer_connection(self, group: str) -> dict:
        for addr in await self._group_brokers(f"%RETRY%{group}"):
            resp = await self.api.call(addr, RC.GET_CONSUMER_CONNECTION_LIST,
                                       GetConsumerConnectionListRequestHeader(consumerGroup=group))
            return loads(resp.body)
        raise MQClientError(ResponseCode.CONSUMER_NOT_ONLINE, f"no broker knows group {group}")

    async def producer_connection(self, group: str, topic: str) -> dict:
        connections: dict[str, dict] = {}
        for addr in await self._group_brokers(topic):
            resp = await self.api.call(addr, RC.GET_PRODUCER_CONNECTION_LIST,
                                       GetProducerConnectionListRequestHeader(producerGroup=group))
            for c in loads(resp.body).get("connectionSet") or []:
                connections[c.get("clientId", "")] = c
        return {"connectionSet": list(connections.values())}

    async def reset_offset_by_time(self, group: str, topic: str, timestamp_ms: int,
                                   force: bool = True) -> list[dict]:
        rows = []
        for addr in await self._group_brokers(topic):
            resp = await self.api.call(
                addr, RC.INVOKE_BROKER_TO_RESET_OFFSET, ResetOffsetRequestHeader(
                    topic=topic, group=group, timestamp=timestamp_ms, isForce=force))
            for mq, off in mq_table(loads(resp.body).get("offsetTable")):
                rows.append({"brokerName": mq.broker_name, "queueId": mq.queue_id,
                             "offset": int(off)})
        return rows

    # --- messages ----------------------------------------------------------------
    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """The message an offset id points at, with the name of the broker at that
        address when the cluster knows it."""
        (ip, port), offset = decode_message_id(offset_msg_id)
        addr = f"{ip}:{port}"
        name = ""
        try:
            info = await self.cluster_info()
            name = next((n for n, bd in info.brokerAddrTable.items()
                         if addr in bd.brokerAddrs.values()), "")
        except (MQClientError, RemotingError):
            pass  # the broker answers by address alone
        return await self.api.view_message(addr, offset, name)

    async def query_message(self, topic: str, key: str, max_num: int = 64, begin_ms: int = 0,
                            end_ms: int | None = None, unique: bool = False) -> list[MessageExt]:
        end_ms = end_ms if end_ms is not None else int(time.time() * 1000) + 60000
        route = await self.topic_route(topic)
        found: list[MessageExt] = []
        for bd in route.brokerDatas:
            addr = bd.brokerAddrs.get(MASTER_ID) or next(iter(bd.brokerAddrs.values()), None)
            if addr is None:
                continue
            try:
                msgs = await self.api.query_message(addr, topic, key, max_num, begin_ms, end_ms,
                                                    unique, bd.brokerName)
            except MQBrokerError:
                continue
            if unique:
                found.extend(m for m in msgs if m.msg_id == key)
            else:
                found.extend(m for m in msgs if m.topic == topic and
                             key in (m.properties.get("KEYS") or "").split(" "))
        found.sort(key=lambda m: m.store_timestamp)
        return found[:1] if unique and found else found

    async def query_by_offset(self, topic: str, broker_name: str, queue_id: int,
                              offset: int) -> MessageExt | None:
        route = await self.topic_route(topic)
        for bd in route.brokerDatas:
            if bd.brokerName == broker_name:
                addr = bd.brokerAddrs.get(MASTER_ID) or next(iter(bd.brokerAddrs.values()))
                ext = h.pull_header("TOOLS_CONSUMER", topic, queue_id, offset, 1,
                                    h.PULL_FLAG_SUBSCRIPTION, 0, 0, "*", 0, "TAG", broker_name)
                result = await self.api.pull(addr, ext, 10000, broker_name)
                return result.messages[0] if result.messages else None
        raise MQClientError(-1, f"broker {broker_name} has no queue of {topic}")


def progress_rows(stats: list[tuple[MessageQueue, dict]]) -> list[dict]:
    rows = []
    for mq, st in stats:
        b, c = int(st.get("brokerOffset", 0)), int(st.get("consumerOffset", 0))
        pulled = int(st.get("pullOffset", c))
        rows.append({"topic": mq.topic, "brokerName": mq.broker_name,
                     "queueId": mq.queue_id, "brokerOffset": b, "consumerOffset": c,
                     "diff": b - c, "inflight": pulled - c,
                     "lastTimestamp": st.get("lastTimestamp", 0)})
    return rows
