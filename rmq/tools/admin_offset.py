"""``rmq-admin`` offset commands of mqadmin 4.9.8 not in ``rmq.tools.admin``:
``cloneGroupOffset`` and ``skipAccumulatedMessage`` (``tools/command/offset``),
and the offline reset both ``skipAccumulatedMessage`` and ``resetOffsetByTime``
fall back to when no consumer of the group is online
(``resetOffsetByTimestampOld``: the tool writes the offsets itself)."""

from __future__ import annotations

import argparse

from rmq.client.admin import MQAdmin, mq_table
from rmq.client.api import loads
from rmq.client.exceptions import MQBrokerError, MQClientError
from rmq.client.message import MessageQueue
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.protocol.headers_admin import GetConsumeStatsRequestHeader
from rmq.common.topics import MASTER_ID
from rmq.tools.admin_base import CommandTable, Output, parse_bool

OFFSET_COMMANDS = CommandTable()
ONLINE_HEADER = "%-40s  %-40s  %-40s"
ONLINE_ROW = "%-40s  %-40d  %-40d"
ROLLBACK_HEADER = "%-20s  %-20s  %-20s  %-20s  %-20s  %-20s"
ROLLBACK_ROW = "%-20s  %-20d  %-20d  %-20d  %-20d  %-20d"
ROLLBACK_COLUMNS = ("brokerName", "queueId", "brokerOffset", "consumerOffset",
                    "timestampOffset", "rollbackOffset")


async def _broker_addrs(admin: MQAdmin, topic: str) -> dict[str, str]:
    """brokerName -> the address to ask (the master, else a slave: selectBrokerAddr)."""
    route = await admin.topic_route(topic)
    return {bd.brokerName: bd.brokerAddrs.get(MASTER_ID) or next(iter(bd.brokerAddrs.values()))
            for bd in route.brokerDatas if bd.brokerAddrs}


async def reset_offset_offline(admin: MQAdmin, group: str, topic: str, timestamp: int,
                               force: bool) -> list[dict]:
    """Each queue of ``topic`` on each broker goes to the offset at ``timestamp``
    (-1: the end), written by the tool with UPDATE_CONSUMER_OFFSET; without
    ``force`` only when that moves it back.  Queues the group never consumed
    start from the queue's minimum."""
    brokers = await _broker_addrs(admin, topic)
    consumed: dict[MessageQueue, dict] = {}
    for addr in brokers.values():
        resp = await admin.api.call(addr, RequestCode.GET_CONSUME_STATS,
                                    GetConsumeStatsRequestHeader(consumerGroup=group))
        consumed.update((mq, st) for mq, st in mq_table(loads(resp.body).get("offsetTable"))
                        if mq.topic == topic)
    for row in await admin.topic_status(topic):
        mq = MessageQueue(topic, row["brokerName"], row["queueId"])
        if not any(m.broker_name == mq.broker_name for m in consumed):
            consumed.setdefault(mq, {"brokerOffset": row["maxOffset"],
                                     "consumerOffset": row["minOffset"]})
    rows = []
    for mq, st in sorted(consumed.items()):
        addr = brokers.get(mq.broker_name)
        if addr is None:
            continue
        target = (await admin.api.get_max_offset(addr, mq) if timestamp == -1 else
                  await admin.api.search_offset(addr, mq, timestamp))
        current = int(st.get("consumerOffset", 0))
        rollback = current
        if force or target <= current:
            await admin.api.update_consumer_offset(addr, group, mq, target, oneway=False)
            rollback = target
        rows.append({"brokerName": mq.broker_name, "queueId": mq.queue_id,
                     "brokerOffset": int(st.get("brokerOffset", 0)), "consumerOffset": current,
                     "timestampOffset": target, "rollbackOffset": rollback})
    return rows


def rollback_table(rows: list[dict]) -> str:
    lines = [ROLLBACK_HEADER % tuple(f"#{c}" for c in ROLLBACK_COLUMNS)]
    lines += [ROLLBACK_ROW % (r["brokerName"][:32], *(r[c] for c in ROLLBACK_COLUMNS[1:]))
              for r in rows]
    return "\n".join(lines)


async def reset_offset(admin: MQAdmin, group: str, topic: str, timestamp: int,
                       force: bool) -> tuple[list[dict], bool]:
    """The broker resets and tells the online consumers (``resetOffsetByTimestamp``);
    with none online the tool resets offline.  Returns the rows and whether the
    offline reset was used."""
    try:
        return await admin.reset_offset_by_time(group, topic, timestamp, force), False
    except MQBrokerError as e:
        if e.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
    return await reset_offset_offline(admin, group, topic, timestamp, force), True


def online_table(rows: list[dict]) -> str:
    lines = [ONLINE_HEADER % ("#brokerName", "#queueId", "#offset")]
    lines += [ONLINE_ROW % (r["brokerName"][:32], r["queueId"], r["offset"]) for r in rows]
    return "\n".join(lines)


@OFFSET_COMMANDS.command(
    "skipAccumulatedMessage", "Skip all messages that are accumulated (not consumed) currently",
    lambda p: (
        p.add_argument("-g", "--group", required=True, help="set the consumer group"),
        p.add_argument("-t", "--topic", required=True, help="set the topic"),
        p.add_argument("-f", "--force", type=parse_bool, default=True,
                       help="set the force rollback by timestamp switch[true|false]")))
async def skip_accumulated_message(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    rows, offline = await reset_offset(admin, ns.group.strip(), ns.topic.strip(), -1, ns.force)
    return Output(rows, rollback_table(rows) if offline else online_table(rows))


@OFFSET_COMMANDS.command("cloneGroupOffset", "clone offset from other group.", lambda p: (
    p.add_argument("-s", "--srcGroup", required=True, help="set source consumer group"),
    p.add_argument("-d", "--destGroup", required=True, help="set destination consumer group"),
    p.add_argument("-t", "--topic", required=True, help="set the topic"),
    p.add_argument("-o", "--offline", help="the group or the topic is offline (not used)")))
async def clone_group_offset(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    """The source group's committed offsets of the topic become the destination
    group's (UPDATE_CONSUMER_OFFSET per queue; mqadmin also copies the source's
    other topics, through the brokers of this one)."""
    src, dest, topic = ns.srcGroup.strip(), ns.destGroup.strip(), ns.topic.strip()
    stats = [(mq, st) for mq, st in await admin.consume_stats(src) if mq.topic == topic]
    if not stats:
        raise MQClientError(ResponseCode.CONSUMER_NOT_ONLINE,
                            f"group {src} has no offsets of topic {topic} to clone")
    brokers = await _broker_addrs(admin, topic)
    rows = []
    for mq, st in stats:
        offset = int(st.get("consumerOffset", -1))
        addr = brokers.get(mq.broker_name)
        if offset >= 0 and addr is not None:
            await admin.api.update_consumer_offset(addr, dest, mq, offset, oneway=False)
            rows.append({"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": offset})
    return Output(rows, f"clone group offset success. srcGroup[{src}], destGroup=[{dest}], "
                        f"topic[{topic}]")
