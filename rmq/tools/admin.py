"""``rmq-admin``: RocketMQ's ``mqadmin`` with the same command names and flags.

The parser's description (``DESCRIPTION``) is the plain-text form of this for
``--help``; tables print times the way mqadmin does, JSON keeps milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

import orjson

from rmq.client.admin import MQAdmin
from rmq.client.exceptions import MQClientError
from rmq.client.message import Message, MessageExt, MessageQueue
from rmq.client.trace import trace_views
from rmq.common.message import perm_to_string
from rmq.common.topics import TRACE_TOPIC
from rmq.remoting.exceptions import RemotingError
from rmq.tools.admin_acl import ACL_COMMANDS, credential_options, tool_credentials
from rmq.tools.admin_base import (
    JSON_OPTIONS,
    Output,
    cell,
    format_message,
    format_table,
    message_dict,
    parse_time,
)
from rmq.tools.admin_base import broker_target as _target
from rmq.tools.admin_base import parse_bool as _bool
from rmq.tools.admin_base import target_addrs as _addrs
from rmq.tools.admin_broker import BROKER_COMMANDS
from rmq.tools.admin_consumer import CONSUMER_COMMANDS
from rmq.tools.admin_export import EXPORT_COMMANDS
from rmq.tools.admin_message import MESSAGE_COMMANDS
from rmq.tools.admin_namesrv import NAMESRV_COMMANDS
from rmq.tools.admin_offset import OFFSET_COMMANDS, reset_offset
from rmq.tools.admin_stats import STATS_COMMANDS
from rmq.tools.admin_topic import TOPIC_COMMANDS

DESCRIPTION = (
    "RocketMQ's mqadmin with the same command names and flags (-n name servers, -t topic, "
    "-g group, -b broker, -c cluster ...). Output is a readable table, or JSON with --json; "
    "any failure is one line on stderr and exit code 1. 'rmq-admin COMMAND -h' shows a "
    "command's options.")

# --- output -------------------------------------------------------------------------
MESSAGE_COLUMNS = ["msgId", "queueId", "queueOffset", "tags", "keys", "storeTimestamp"]


def message_list(msgs: list[MessageExt], body: bool) -> Output:
    """Messages as JSON objects, and as a table of the columns people scan for."""
    data = [message_dict(m, body) for m in msgs]
    columns = MESSAGE_COLUMNS + (["body"] if body else [])
    return Output(data, format_table(data, columns))


def sections(*parts: tuple[str, str]) -> str:
    """Titled blocks separated by blank lines."""
    return "\n\n".join(f"{title}\n{text}" for title, text in parts)


# --- commands --------------------------------------------------------------------------
Handler = Callable[[MQAdmin, argparse.Namespace], "asyncio.Future"]
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {}


def command(name: str, help_text: str, args: Callable[[argparse.ArgumentParser], None]):
    def deco(fn):
        COMMANDS[name] = (help_text, args, fn)
        return fn
    return deco


def _progress(done: int, total: int, what: str) -> None:
    if total > 1 and sys.stderr.isatty():
        print(f"\r{what}: {done}/{total}", end="" if done < total else "\n", file=sys.stderr)


@command("updateTopic", "create or update a topic", lambda p: (
    _target(p), p.add_argument("-t", "--topic", required=True),
    p.add_argument("-r", "--readQueueNums", type=int, default=8),
    p.add_argument("-w", "--writeQueueNums", type=int, default=8),
    p.add_argument("-p", "--perm", type=int, default=6),
    p.add_argument("-o", "--order", type=_bool, default=False),
    p.add_argument("-a", "--attributes", help="5.x attributes: +message.type=FIFO,+k=v,-k")))
async def update_topic(admin, ns):
    addrs = await _addrs(admin, ns)
    for i, addr in enumerate(addrs):
        await admin.create_topic(addr, ns.topic, ns.readQueueNums, ns.writeQueueNums, ns.perm,
                                 ns.order, ns.attributes)
        _progress(i + 1, len(addrs), "brokers")
    out = [{"broker": a, "topic": ns.topic, "readQueueNums": ns.readQueueNums,
            "writeQueueNums": ns.writeQueueNums, "perm": perm_to_string(ns.perm)} for a in addrs]
    if ns.attributes:
        for row in out:
            row["attributes"] = ns.attributes
    return out


@command("deleteTopic", "delete a topic from a cluster and the name servers", lambda p: (
    p.add_argument("-t", "--topic", required=True),
    p.add_argument("-c", "--clusterName", required=True)))
async def delete_topic(admin, ns):
    await admin.delete_topic(ns.topic, ns.clusterName)
    return {"deleted": ns.topic, "cluster": ns.clusterName}


@command("topicList", "list topics", lambda p: p.add_argument("-c", "--clusterName"))
async def topic_list(admin, ns):
    return [{"topic": t} for t in await admin.topic_list(ns.clusterName)]


@command("topicRoute", "show a topic's route", lambda p: p.add_argument("-t", "--topic", required=True))
async def topic_route(admin, ns):
    route = (await admin.topic_route(ns.topic)).to_json_obj()
    brokers = [{"brokerName": bd["brokerName"], "cluster": bd.get("cluster"), "brokerId": bid,
                "addr": addr} for bd in route["brokerDatas"]
               for bid, addr in sorted(bd["brokerAddrs"].items(), key=lambda kv: int(kv[0]))]
    queues = [dict(q, perm=perm_to_string(q["perm"])) for q in route["queueDatas"]]
    parts = [("brokers", format_table(brokers)), ("queues", format_table(queues))]
    if route.get("orderTopicConf"):
        parts.append(("orderTopicConf", route["orderTopicConf"]))
    return Output(route, sections(*parts))


@command("topicStatus", "min/max offset of every queue", lambda p: p.add_argument(
    "-t", "--topic", required=True))
async def topic_status(admin, ns):
    return await admin.topic_status(ns.topic)


@command("clusterList", "brokers of every cluster with their load", lambda p: None)
async def cluster_list(admin, ns):
    info = await admin.cluster_info()
    rows = []
    for cluster, names in sorted(info.clusterAddrTable.items()):
        for name in sorted(names):
            bd = info.brokerAddrTable.get(name)
            for bid, addr in sorted((bd.brokerAddrs if bd else {}).items()):
                try:
                    rt = await admin.broker_runtime_info(addr)
                except (MQClientError, RemotingError):
                    rt = {}
                rows.append({"Cluster": cluster, "BrokerName": name, "BID": bid, "Addr": addr,
                             "Version": rt.get("brokerVersionDesc", ""),
                             "InTPS": (rt.get("putTps", "0") or "0").split(" ")[0],
                             "OutTPS": (rt.get("getTransferedTps", "0") or "0").split(" ")[0],
                             "Timer(Progress)": timer_progress(rt),
                             "InTotalToday": rt.get("msgPutTotalTodayNow", ""),
                             "OutTotalToday": rt.get("msgGetTotalTodayNow", "")})
    return rows


def timer_progress(rt: dict) -> str:
    """5.3.3 clusterList's #Timer(Progress): read behind (s) - offset behind
    (messages not yet in the wheel) (timers pending in units of 10,000,
    enqueue tps, dequeue tps)."""
    def num(key: str, kind: type) -> float:
        try:
            return kind(rt.get(key) or 0)
        except ValueError:
            return kind(0)
    pending = num("timerCongestNum", int) / 10000.0
    return (f"{num('timerReadBehind', int):d}-{num('timerOffsetBehind', int):d}"
            f"({pending:.1f}w, {num('timerEnqueueTps', float):.1f}, "
            f"{num('timerDequeueTps', float):.1f})")


@command("brokerStatus", "runtime statistics of a broker", lambda p: _target(p))
async def broker_status(admin, ns):
    out = {}
    for addr in await _addrs(admin, ns):
        out[addr] = dict(sorted((await admin.broker_runtime_info(addr)).items()))
    return out if len(out) > 1 else next(iter(out.values()), {})


@command("getBrokerConfig", "a broker's settings", lambda p: _target(p))
async def get_broker_config(admin, ns):
    out = {}
    for addr in await _addrs(admin, ns):
        out[addr] = dict(sorted((await admin.broker_config(addr)).items()))
    return out if len(out) > 1 else next(iter(out.values()), {})


@command("updateBrokerConfig", "change a broker setting", lambda p: (
    _target(p), p.add_argument("-k", "--key", required=True),
    p.add_argument("-v", "--value", required=True)))
async def update_broker_config(admin, ns):
    addrs = await _addrs(admin, ns)
    for addr in addrs:
        await admin.update_broker_config(addr, {ns.key: ns.value})
    return [{"broker": a, ns.key: ns.value} for a in addrs]


@command("updateSubGroup", "create or update a subscription group", lambda p: (
    _target(p), p.add_argument("-g", "--groupName", required=True),
    p.add_argument("-s", "--consumeEnable", type=_bool, default=True),
    p.add_argument("-m", "--consumeFromMinEnable", type=_bool, default=False),
    p.add_argument("-d", "--consumeBroadcastEnable", type=_bool, default=False),
    p.add_argument("-q", "--retryQueueNums", type=int, default=1),
    p.add_argument("-r", "--retryMaxTimes", type=int, default=16),
    p.add_argument("-i", "--brokerId", type=int, default=0),
    p.add_argument("-w", "--whichBrokerWhenConsumeSlowly", type=int, default=1),
    p.add_argument("-a", "--notifyConsumerIdsChanged", type=_bool, default=True),
    p.add_argument("-o", "--consumeMessageOrderly", type=_bool, default=False),
    p.add_argument("--attributes", help="5.x group attributes: +k=v,...")))
async def update_sub_group(admin, ns):
    config = {"brokerId": ns.brokerId, "consumeBroadcastEnable": ns.consumeBroadcastEnable,
              "consumeEnable": ns.consumeEnable, "consumeFromMinEnable": ns.consumeFromMinEnable,
              "consumeMessageOrderly": ns.consumeMessageOrderly,
              "groupName": ns.groupName, "notifyConsumerIdsChangedEnable": ns.notifyConsumerIdsChanged,
              "retryMaxTimes": ns.retryMaxTimes, "retryQueueNums": ns.retryQueueNums,
              "whichBrokerWhenConsumeSlowly": ns.whichBrokerWhenConsumeSlowly}
    if ns.attributes:
        config["attributes"] = {kv[1:].partition("=")[0]: kv.partition("=")[2]
                                for kv in ns.attributes.split(",") if kv.startswith("+")}
    addrs = await _addrs(admin, ns)
    for addr in addrs:
        await admin.update_sub_group(addr, config)
    return [dict(config, broker=a) for a in addrs]


@command("setConsumeMode", "set a group's consume mode on a topic (PULL or POP)", lambda p: (
    _target(p), p.add_argument("-t", "--topicName", required=True),
    p.add_argument("-g", "--groupName", required=True),
    p.add_argument("-m", "--mode", required=True, choices=("PULL", "POP")),
    p.add_argument("-q", "--popShareQueueNum", type=int, default=0)))
async def set_consume_mode(admin, ns):
    addrs = await _addrs(admin, ns)
    for addr in addrs:
        await admin.set_consume_mode(addr, ns.topicName, ns.groupName, ns.mode,
                                     ns.popShareQueueNum)
    return [{"broker": a, "topic": ns.topicName, "group": ns.groupName, "mode": ns.mode,
             "popShareQueueNum": ns.popShareQueueNum} for a in addrs]


@command("deleteSubGroup", "delete a subscription group", lambda p: (
    _target(p), p.add_argument("-g", "--groupName", required=True),
    p.add_argument("-r", "--removeOffset", type=_bool, default=False)))
async def delete_sub_group(admin, ns):
    addrs = await _addrs(admin, ns)
    for addr in addrs:
        await admin.delete_sub_group(addr, ns.groupName, ns.removeOffset)
    return [{"broker": a, "deleted": ns.groupName} for a in addrs]


@command("consumerConnection", "clients of a consumer group", lambda p: p.add_argument(
    "-g", "--consumerGroup", required=True))
async def consumer_connection(admin, ns):
    conn = await admin.consumer_connection(ns.consumerGroup)
    subs = [{"topic": t, "subExpression": s.get("subString", "")}
            for t, s in sorted((conn.get("subscriptionTable") or {}).items())]
    summary = {k: conn.get(k, "") for k in ("consumeType", "messageModel", "consumeFromWhere")}
    return Output(conn, sections(
        ("connections", format_table(conn.get("connectionSet") or [],
                                     ["clientId", "clientAddr", "language", "version"])),
        ("subscriptions", format_table(subs)),
        ("settings", "\n".join(f"{k:<18}{v}" for k, v in summary.items()))))


@command("producerConnection", "clients of a producer group", lambda p: (
    p.add_argument("-g", "--producerGroup", required=True),
    p.add_argument("-t", "--topic", required=True)))
async def producer_connection(admin, ns):
    conn = await admin.producer_connection(ns.producerGroup, ns.topic)
    return Output(conn, format_table(conn["connectionSet"],
                                     ["clientId", "clientAddr", "language", "version"]))


@command("queryMsgByKey", "messages by key", lambda p: (
    p.add_argument("-t", "--topic", required=True), p.add_argument("-k", "--msgKey", required=True),
    p.add_argument("-b", "--beginTimestamp"), p.add_argument("-e", "--endTimestamp"),
    p.add_argument("-c", "--maxNum", type=int, default=64)))
async def query_msg_by_key(admin, ns):
    msgs = await admin.query_message(ns.topic, ns.msgKey, ns.maxNum,
                                     parse_time(ns.beginTimestamp, 0),
                                     parse_time(ns.endTimestamp, int(time.time() * 1000) + 60000))
    return message_list(msgs, body=False)


@command("queryMsgTraceById", "the trace records of a message (producers and consumer groups)", lambda p: (
    p.add_argument("-i", "--msgId", required=True),
    p.add_argument("-t", "--traceTopic", default=TRACE_TOPIC)))
async def query_msg_trace_by_id(admin, ns):
    msgs = await admin.query_message(ns.traceTopic, ns.msgId.strip(), 64, 0, int(time.time() * 1000))
    views = [v for m in msgs for v in trace_views(ns.msgId.strip(), m)]
    return Output(views, format_trace(views))


def format_trace(views: list[dict]) -> str:
    """mqadmin's layout: a block per Pub record, then one per consumer group
    with its SubAfter records (times in local time, to the second)."""
    line = "%-10s %-20s %-20s %-20s %-10s %-10s"

    def row(kind: str, v: dict) -> str:
        when = datetime.fromtimestamp(v["timeStamp"] / 1000).strftime("%Y-%m-%d %H:%M:%S")
        return line % (kind, v["groupName"], v["clientHost"], when, f"{v['costTime']}ms", v["status"])

    out: list[str] = []
    groups: dict[str, list[dict]] = {}
    for v in views:
        if v["msgType"] == "Pub":
            out += [line % ("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"),
                    row("Pub", v), ""]
        elif v["msgType"] == "SubAfter":
            groups.setdefault(v["groupName"], []).append(v)
    for group_views in groups.values():
        out.append(line % ("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"))
        out += [row("Sub", v) for v in group_views]
        out.append("")
    return "\n".join(out) if out else "(no trace records)"


@command("queryMsgByUniqueKey", "a message by its client id (UNIQ_KEY)", lambda p: (
    p.add_argument("-t", "--topic", required=True), p.add_argument("-i", "--msgId", required=True)))
async def query_msg_by_unique_key(admin, ns):
    msgs = await admin.query_message(ns.topic, ns.msgId, 32, 0, None, unique=True)
    if not msgs:
        raise MQClientError(22, f"no message with unique key {ns.msgId} in {ns.topic}")
    return msgs[0]


@command("queryMsgByOffset", "the message at a queue offset", lambda p: (
    p.add_argument("-t", "--topic", required=True), p.add_argument("-b", "--brokerName", required=True),
    p.add_argument("-i", "--queueId", type=int, required=True),
    p.add_argument("-o", "--offset", type=int, required=True)))
async def query_msg_by_offset(admin, ns):
    m = await admin.query_by_offset(ns.topic, ns.brokerName, ns.queueId, ns.offset)
    if m is None:
        raise MQClientError(19, f"no message at offset {ns.offset}")
    return m


async def _consume(admin: MQAdmin, topic: str, count: int, begin: int, end: int,
                   broker: str | None, queue: int | None, offset: int | None,
                   expression: str | None) -> list[MessageExt]:
    from rmq.client.pull_consumer import LitePullConsumer

    out: list[MessageExt] = []
    consumer = LitePullConsumer("TOOLS_CONSUMER", client_config=replace(admin.config))
    consumer.instance.config.client_ip = "127.0.0.1"
    try:
        mqs = [mq for mq in await consumer.fetch_queues(topic)
               if (broker is None or mq.broker_name == broker) and (queue is None or mq.queue_id == queue)]
        for i, mq in enumerate(mqs):
            addr = consumer.instance.find_broker_addr(mq.broker_name)
            start = offset if offset is not None else (
                await admin.api.search_offset(addr, mq, begin) if begin else
                await admin.api.get_min_offset(addr, mq))
            stop = await admin.api.get_max_offset(addr, mq)
            while start < stop and len(out) < count:
                res = await consumer.pull(mq, start, min(32, count - len(out)), expression)
                if not res.messages and res.next_begin_offset <= start:
                    break
                out.extend(m for m in res.messages if begin <= m.store_timestamp <= end)
                start = res.next_begin_offset
            _progress(i + 1, len(mqs), "queues")
    finally:
        await consumer.instance.remoting.close()
    return out[:count]


@command("printMsg", "print the messages of a topic", lambda p: (
    p.add_argument("-t", "--topic", required=True), p.add_argument("-s", "--subExpression", default="*"),
    p.add_argument("-b", "--beginTimestamp"), p.add_argument("-e", "--endTimestamp"),
    p.add_argument("-d", "--printBody", type=_bool, default=True),
    p.add_argument("-c", "--count", type=int, default=1000)))
async def print_msg(admin, ns):
    msgs = await _consume(admin, ns.topic, ns.count, parse_time(ns.beginTimestamp, 0),
                          parse_time(ns.endTimestamp, 1 << 62), None, None, None, ns.subExpression)
    return message_list(msgs, ns.printBody)


@command("consumeMessage", "read messages from a topic (no offsets committed)", lambda p: (
    p.add_argument("-t", "--topic", required=True), p.add_argument("-b", "--brokerName"),
    p.add_argument("-i", "--queueId", type=int), p.add_argument("-o", "--offset", type=int),
    p.add_argument("-g", "--consumerGroup", default="TOOLS_CONSUMER"),
    p.add_argument("-s", "--beginTimestamp"), p.add_argument("-e", "--endTimestamp"),
    p.add_argument("-c", "--messageNumber", type=int, default=128)))
async def consume_message(admin, ns):
    msgs = await _consume(admin, ns.topic, ns.messageNumber, parse_time(ns.beginTimestamp, 0),
                          parse_time(ns.endTimestamp, 1 << 62), ns.brokerName, ns.queueId,
                          ns.offset, None)
    return message_list(msgs, True)


@command("sendMessage", "send one message", lambda p: (
    p.add_argument("-t", "--topic", required=True), p.add_argument("-p", "--body", required=True),
    p.add_argument("-k", "--key"), p.add_argument("-c", "--tags"),
    p.add_argument("-b", "--broker"), p.add_argument("-i", "--qid", type=int)))
async def send_message(admin, ns):
    from rmq.client.producer import Producer

    producer = Producer(f"PID_ADMIN_{os.getpid()}", client_config=replace(admin.config))
    await producer.start()
    try:
        msg = Message(ns.topic, ns.body.encode("utf-8"), tags=ns.tags, keys=ns.key)
        mq = None
        if ns.broker is not None or ns.qid is not None:
            if ns.broker is None or ns.qid is None:
                raise MQClientError(-1, "-b and -i go together")
            mq = MessageQueue(ns.topic, ns.broker, ns.qid)
        r = await producer.send(msg, mq=mq)
    finally:
        await producer.shutdown()
    return {"Broker Name": r.message_queue.broker_name, "Queue Id": r.message_queue.queue_id,
            "Send Status": r.status.value, "MsgId": r.msg_id, "OffsetMsgId": r.offset_msg_id,
            "Queue Offset": r.queue_offset}


@command("resetOffsetByTime", "move a group's offsets to a point in time", lambda p: (
    p.add_argument("-g", "--group", required=True), p.add_argument("-t", "--topic", required=True),
    p.add_argument("-s", "--timestamp", required=True),
    p.add_argument("-f", "--force", type=_bool, default=True)))
async def reset_offset_by_time(admin, ns):
    """With no consumer of the group online the tool writes the offsets itself."""
    rows, _offline = await reset_offset(admin, ns.group, ns.topic, parse_time(ns.timestamp, 0),
                                        ns.force)
    return rows


@command("getNamesrvConfig", "settings of every name server", lambda p: None)
async def get_namesrv_config(admin, ns):
    return await admin.namesrv_config()


@command("updateKvConfig", "set a KV config item on every name server", lambda p: (
    p.add_argument("-s", "--namespace", required=True), p.add_argument("-k", "--key", required=True),
    p.add_argument("-v", "--value", required=True)))
async def update_kv_config(admin, ns):
    await admin.update_kv_config(ns.namespace, ns.key, ns.value)
    return {"namespace": ns.namespace, "key": ns.key, "value": ns.value}


@command("deleteKvConfig", "delete a KV config item on every name server", lambda p: (
    p.add_argument("-s", "--namespace", required=True), p.add_argument("-k", "--key", required=True)))
async def delete_kv_config(admin, ns):
    await admin.delete_kv_config(ns.namespace, ns.key)
    return {"namespace": ns.namespace, "deleted": ns.key}


@command("wipeWritePerm", "clear a broker's write permission on the name servers", lambda p: (
    p.add_argument("-b", "--brokerName", required=True)))
async def wipe_write_perm(admin, ns):
    counts = await admin.wipe_write_perm(ns.brokerName)
    return [{"namesrv": k, "wipeTopicCount": v} for k, v in counts.items()]


COMMANDS.update(ACL_COMMANDS)
for _table in (NAMESRV_COMMANDS, TOPIC_COMMANDS, BROKER_COMMANDS, OFFSET_COMMANDS,
               CONSUMER_COMMANDS, MESSAGE_COMMANDS, EXPORT_COMMANDS, STATS_COMMANDS):
    COMMANDS.update(_table)


# --- rendering ---------------------------------------------------------------------------
def to_jsonable(result):
    if isinstance(result, MessageExt):
        return message_dict(result)
    if isinstance(result, Output):
        return result.data
    return result


def render(result, as_json: bool) -> str:
    if as_json:
        return orjson.dumps(to_jsonable(result), option=JSON_OPTIONS | orjson.OPT_INDENT_2,
                            default=str).decode("utf-8")
    if isinstance(result, Output):
        return result.table
    if isinstance(result, MessageExt):
        return format_message(result)
    if isinstance(result, list):
        return format_table(result)
    if isinstance(result, dict):
        width = max((len(str(k)) for k in result), default=0)
        return "\n".join(f"{str(k):<{width}}  {cell(v, str(k))}" for k, v in result.items())
    return str(result)


class OneLineParser(argparse.ArgumentParser):
    """A bad argument is one line on stderr (exit 2), not the usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (-h for help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="rmq-admin", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", metavar="command")
    for name, (help_text, add_args, _fn) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        p.add_argument("-n", "--namesrvAddr", default=os.environ.get("NAMESRV_ADDR"),
                       help="name server address list, eg: 192.168.0.1:9876;192.168.0.2:9876")
        p.add_argument("--json", action="store_true", help="print JSON instead of a table")
        credential_options(p)
        add_args(p)
    return parser


async def run(ns: argparse.Namespace):
    credentials = tool_credentials(ns.signAccessKey, ns.signSecretKey)
    async with MQAdmin(ns.namesrvAddr, credentials=credentials) as admin:
        return await COMMANDS[ns.command][2](admin, ns)


def fail(command: str, text: str) -> int:
    """One line on stderr, exit status 1."""
    text = " ".join(line.strip() for line in text.splitlines() if line.strip())
    print(f"rmq-admin {command}: {text}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    if not ns.command:
        parser.print_help()
        return 1
    if not ns.namesrvAddr:
        print("rmq-admin: no name server address: use -n host:port or NAMESRV_ADDR", file=sys.stderr)
        return 1
    try:
        result = asyncio.run(run(ns))
    except (MQClientError, RemotingError, ValueError, OSError) as e:
        return fail(ns.command, str(e))
    except KeyboardInterrupt:  # commands that run until stopped
        return 130
    except Exception as e:  # an answer this tool did not expect: still one line
        return fail(ns.command, f"{type(e).__name__}: {e}")
    if result is not None:  # None: the command printed as it went
        print(render(result, ns.json))
    if isinstance(result, Output) and result.error:
        return fail(ns.command, result.error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
