"""``rmq-admin`` topic commands of mqadmin 4.9.8 not in ``rmq.tools.admin``:
``updateTopicPerm``, ``topicClusterList``, ``updateOrderConf`` and ``allocateMQ``
(``tools/command/topic``).  Tables print mqadmin's lines; ``--json`` the same
facts as objects."""

from __future__ import annotations

import argparse
import re

import orjson

from rmq.client.admin import MQAdmin
from rmq.client.allocate import AllocateMessageQueueAveragely
from rmq.client.exceptions import MQClientError
from rmq.client.instance import subscribe_queues
from rmq.common.codes import RequestCode
from rmq.common.message import perm_to_string
from rmq.common.protocol.headers_admin import CreateTopicRequestHeader
from rmq.common.protocol.headers_namesrv import GetKVConfigRequestHeader, GetKVConfigResponseHeader
from rmq.common.route import QueueData, TopicRouteData
from rmq.common.topics import MASTER_ID
from rmq.namesrv.kv_config import NAMESPACE_ORDER_TOPIC_CONFIG
from rmq.tools.admin_base import CommandTable, Output, broker_target

TOPIC_COMMANDS = CommandTable()
TOPIC_PERMS = (2, 4, 6)
ORDER_CONF = re.compile(r"[^:;\s]+:\d+(;[^:;\s]+:\d+)*;?")


def topic_config_text(topic: str, q: QueueData, perm: int) -> str:
    """``TopicConfig.toString`` of what updateTopicPerm sends."""
    return (f"TopicConfig [topicName={topic}, readQueueNums={q.readQueueNums}, "
            f"writeQueueNums={q.writeQueueNums}, perm={perm_to_string(perm)}, "
            f"topicFilterType=SINGLE_TAG, topicSysFlag={q.topicSysFlag}, order=false]")


def _perm(text: str) -> int:
    try:
        perm = int(text.strip())
    except ValueError:
        perm = -1
    if perm not in TOPIC_PERMS:
        raise argparse.ArgumentTypeError(f"perm must be 2 (W), 4 (R) or 6 (RW), not {text!r}")
    return perm


async def _set_perm(admin: MQAdmin, addr: str, topic: str, q: QueueData, perm: int) -> None:
    """UPDATE_AND_CREATE_TOPIC with the broker's queue counts and flags, new perm."""
    await admin.api.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, CreateTopicRequestHeader(
        topic=topic, defaultTopic="TBW102", readQueueNums=q.readQueueNums,
        writeQueueNums=q.writeQueueNums, perm=perm, topicFilterType="SINGLE_TAG",
        topicSysFlag=q.topicSysFlag, order=False))


def _queue_data(route: TopicRouteData, broker_name: str) -> QueueData | None:
    return next((q for q in route.queueDatas if q.brokerName == broker_name), None)


@TOPIC_COMMANDS.command("updateTopicPerm", "Update topic perm", lambda p: (
    broker_target(p),
    p.add_argument("-t", "--topic", required=True, help="topic name"),
    p.add_argument("-p", "--perm", required=True, type=_perm,
                   help="set topic's permission(2|4|6), intro[2:W; 4:R; 6:RW]")))
async def update_topic_perm(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    """Each broker keeps its own queue counts and flags (mqadmin copies the
    first broker's to all of them)."""
    topic, perm = ns.topic.strip(), ns.perm
    route = await admin.topic_route(topic)
    if not route.queueDatas:
        raise MQClientError(-1, f"topic {topic} has no queues in its route")
    if ns.brokerAddr:
        addr = ns.brokerAddr.strip()
        name = next((bd.brokerName for bd in route.brokerDatas
                     if bd.brokerAddrs.get(MASTER_ID) == addr), None)
        q = _queue_data(route, name) if name is not None else None
        if q is None:
            raise MQClientError(-1, "updateTopicPerm error broker not exit or broker is not master!.")
        if q.perm == perm:
            return Output([], "new perm equals to the old one!")
        await _set_perm(admin, addr, topic, q, perm)
        row = {"broker": addr, "topic": topic, "oldPerm": q.perm, "perm": perm}
        return Output([row], f"update topic perm from {q.perm} to {perm} in {addr} success.\n"
                             f"{topic_config_text(topic, q, perm)}.")
    info = await admin.cluster_info()
    rows, lines = [], []
    for addr in await admin.master_addrs(ns.clusterName.strip()):
        name = next((n for n, bd in info.brokerAddrTable.items()
                     if bd.brokerAddrs.get(MASTER_ID) == addr), "")
        q = _queue_data(route, name) or route.queueDatas[0]
        await _set_perm(admin, addr, topic, q, perm)
        rows.append({"broker": addr, "topic": topic, "oldPerm": q.perm, "perm": perm})
        lines.append(f"update topic perm from {q.perm} to {perm} in {addr} success.")
    return Output(rows, "\n".join(lines))


@TOPIC_COMMANDS.command("topicClusterList", "get cluster info for topic", lambda p: (
    p.add_argument("-t", "--topic", required=True, help="topic name")))
async def topic_cluster_list(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    """Every cluster holding one of the topic's brokers (mqadmin looks at the
    first broker of the route only)."""
    route = await admin.topic_route(ns.topic.strip())
    info = await admin.cluster_info()
    names = {bd.brokerName for bd in route.brokerDatas}
    clusters = sorted(c for c, brokers in info.clusterAddrTable.items() if names & set(brokers))
    return Output(clusters, "\n".join(clusters))


def _order_conf_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-v", "--orderConf", help="set order conf [eg. brokerName1:num;brokerName2:num]")
    p.add_argument("-m", "--method", required=True, choices=("put", "get", "delete"),
                   help="option type [eg. put|get|delete")


@TOPIC_COMMANDS.command("updateOrderConf", "Create or update or delete order conf",
                        _order_conf_arg)
async def update_order_conf(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    """The ``ORDER_TOPIC_CONFIG`` KV item of a topic on the name servers: the
    brokers (and queue counts) an ordered topic's producers write to."""
    topic = ns.topic.strip()
    if ns.method == "get":
        resp = await admin.api.call(None, RequestCode.GET_KV_CONFIG, GetKVConfigRequestHeader(
            namespace=NAMESPACE_ORDER_TOPIC_CONFIG, key=topic))
        conf = resp.decode_header(GetKVConfigResponseHeader).value
        return Output({"topic": topic, "orderConf": conf},
                      f"get orderConf success. topic=[{topic}], orderConf=[{conf}] ")
    if ns.method == "put":
        conf = (ns.orderConf or "").strip()
        if not conf:
            raise MQClientError(-1, "please set orderConf with option -v.")
        if not ORDER_CONF.fullmatch(conf):
            raise MQClientError(-1, f"bad orderConf {conf!r}: use brokerName1:num;brokerName2:num")
        await admin.update_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic, conf)
        return Output({"topic": topic, "orderConf": conf},
                      f"update orderConf success. topic=[{topic}], orderConf=[{conf}]")
    await admin.delete_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
    return Output({"topic": topic, "deleted": True}, f"delete orderConf success. topic=[{topic}]")


@TOPIC_COMMANDS.command("allocateMQ", "Allocate MQ", lambda p: (
    p.add_argument("-t", "--topic", required=True, help="topic name"),
    p.add_argument("-i", "--ipList", required=True, help="ipList")))
async def allocate_mq(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    """How AllocateMessageQueueAveragely shares the topic's readable queues among
    consumers with these client ids, as ``RebalanceResult`` JSON."""
    topic = ns.topic.strip()
    ips = ns.ipList.strip().split(",")
    if not all(ips):
        raise MQClientError(-1, f"bad ipList {ns.ipList!r}: use ip1,ip2,...")
    mqs = subscribe_queues(topic, await admin.topic_route(topic))
    strategy = AllocateMessageQueueAveragely()
    result = {"result": {ip: [mq.to_json_obj() for mq in strategy.allocate("aa", ip, mqs, ips)]
                         for ip in ips}}
    return Output(result, orjson.dumps(result).decode())

