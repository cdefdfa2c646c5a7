"""``rmq-admin`` message commands of mqadmin 4.9.8 not (fully) in
``rmq.tools.admin``: ``queryMsgById`` with its resend (``-s``) and
consume-directly (``-g`` + ``-d``) modes, ``printMsgByQueue`` and ``queryCq``
(a consume queue's entries as the broker stores them)."""

from __future__ import annotations

import argparse
import codecs
from collections import Counter

from rmq.client.admin import MQAdmin
from rmq.client.api import loads
from rmq.client.exceptions import MQClientError
from rmq.client.message import Message, MessageExt, MessageQueue, PullStatus
from rmq.client.pull_consumer import LitePullConsumer
from rmq.common.codes import RequestCode
from rmq.common.message_id import decode_message_id
from rmq.common.protocol.headers_admin import (
    ConsumeMessageDirectlyResultRequestHeader,
    QueryConsumeQueueRequestHeader,
)
from rmq.common.topics import MASTER_ID
from rmq.tools.admin_base import (
    CommandTable,
    Output,
    format_message,
    java_bool,
    java_str,
    message_dict,
    parse_bool,
    parse_time,
    pretty_json,
    send_result_dict,
    send_result_text,
    tool_producer,
)

MESSAGE_COMMANDS = CommandTable()
SEPARATOR = "======================================"
UNIQ_KEY = "UNIQ_KEY"


# --- queryMsgById -----------------------------------------------------------------
def _query_by_id_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", required=True, help="Message Id (several: id1,id2)")
    p.add_argument("-g", "--consumerGroup", help="consumer group name")
    p.add_argument("-d", "--clientId", help="The consumer's client id")
    p.add_argument("-s", "--sendMessage", help="resend message")
    p.add_argument("-u", "--unitName", help="unit name")


def direct_result_text(r: dict) -> str:
    """``ConsumeMessageDirectlyResult.toString``."""
    return (f"ConsumeMessageDirectlyResult [order={java_bool(bool(r.get('order')))}, "
            f"autoCommit={java_bool(bool(r.get('autoCommit', True)))}, "
            f"consumeResult={java_str(r.get('consumeResult'))}, remark={java_str(r.get('remark'))}, "
            f"spentTimeMills={r.get('spentTimeMills', 0)}]")


async def consume_directly(admin: MQAdmin, group: str, client_id: str, msg_id: str) -> dict:
    """CONSUME_MESSAGE_DIRECTLY to the broker that stores the message, which
    hands it to that consumer's listener (``consumeMessageDirectly``)."""
    (ip, port), _ = decode_message_id(msg_id)
    resp = await admin.api.call(
        f"{ip}:{port}", RequestCode.CONSUME_MESSAGE_DIRECTLY,
        ConsumeMessageDirectlyResultRequestHeader(consumerGroup=group, clientId=client_id,
                                                  msgId=msg_id),
        timeout_ms=admin.api.timeout_ms * 3)
    return loads(resp.body)


async def _resend(admin: MQAdmin, ids: list[str], unit_name: str | None) -> Output:
    """Each message again, as it was (topic, body, properties, UNIQ_KEY)."""
    lines, data = [], []
    async with tool_producer(admin, "ReSendMsgById", unit_name) as producer:
        for msg_id in ids:
            m = await admin.view_message(msg_id)
            lines.append(f"prepare resend msg. originalMsgId={msg_id}")
            r = await producer.send(Message(m.topic, m.body, flag=m.flag, properties=m.properties))
            lines.append(send_result_text(r))
            data.append({"originalMsgId": msg_id, "sendResult": send_result_dict(r)})
    return Output(data, "\n".join(lines))


@MESSAGE_COMMANDS.command("queryMsgById", "Query Message by Id", _query_by_id_args)
async def query_msg_by_id(admin: MQAdmin, ns: argparse.Namespace):
    """By offset message id(s): print them; with ``-g`` and ``-d`` have that
    consumer consume each again; with ``-s true`` send each again."""
    ids = [i.strip() for i in ns.msgId.split(",") if i.strip()]
    if not ids:
        raise MQClientError(-1, "no message id given")
    if ns.consumerGroup and ns.clientId:
        results = [await consume_directly(admin, ns.consumerGroup.strip(), ns.clientId.strip(), i)
                   for i in ids]
        return Output(results, "\n".join(direct_result_text(r) for r in results))
    if ns.sendMessage is not None:
        if not parse_bool(ns.sendMessage):
            return Output([], "")
        return await _resend(admin, ids, ns.unitName.strip() if ns.unitName else None)
    msgs = [await admin.view_message(i) for i in ids]
    if len(msgs) == 1:
        return msgs[0]
    return Output([message_dict(m) for m in msgs], "\n\n".join(format_message(m) for m in msgs))


# --- printMsgByQueue ------------------------------------------------------------------
def message_ext_text(m: MessageExt) -> str:
    """``MessageExt.toString`` (with ``Message.toString`` inside: the body as
    Java prints a byte array)."""
    props = ", ".join(f"{k}={v}" for k, v in m.properties.items())
    body = ", ".join(str(b - 256 if b > 127 else b) for b in m.body)
    return (f"MessageExt [brokerName={m.broker_name}, queueId={m.queue_id}, "
            f"storeSize={m.store_size}, queueOffset={m.queue_offset}, sysFlag={m.sys_flag}, "
            f"bornTimestamp={m.born_timestamp}, bornHost=/{m.born_host}, "
            f"storeTimestamp={m.store_timestamp}, storeHost=/{m.store_host}, "
            f"msgId={m.offset_msg_id}, commitLogOffset={m.commit_log_offset}, "
            f"bodyCRC={m.body_crc}, reconsumeTimes={m.reconsume_times}, "
            f"preparedTransactionOffset={m.prepared_transaction_offset}, "
            f"toString()=Message{{topic='{m.topic}', flag={m.flag}, properties={{{props}}}, "
            f"body=[{body}], transactionId='null'}}]")


def _print_by_queue_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-a", "--brokerName", required=True, help="broker name")
    p.add_argument("-i", "--queueId", required=True, type=int, help="queue id")
    p.add_argument("-c", "--charsetName", default="UTF-8", help="CharsetName(eg: UTF-8,GBK)")
    p.add_argument("-s", "--subExpression", default="*", help="Subscribe Expression(eg: TagA || TagB)")
    p.add_argument("-b", "--beginTimestamp",
                   help="Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
    p.add_argument("-e", "--endTimestamp",
                   help="End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
    p.add_argument("-p", "--printMsg", type=parse_bool, default=False,
                   help="print msg. eg: true | false(default)")
    p.add_argument("-d", "--printBody", type=parse_bool, default=False,
                   help="print body. eg: true | false(default)")
    p.add_argument("-f", "--calculate", type=parse_bool, default=False,
                   help="calculate by tag. eg: true | false(default)")


async def read_queue(admin: MQAdmin, mq: MessageQueue, begin: str | None, end: str | None,
                     expression: str, limit: int | None = None) -> list[MessageExt]:
    """From the offset at ``begin`` (or the queue's start) up to the one at
    ``end`` (or its end), 32 at a time, until a pull finds nothing more
    (mqadmin prints the whole last batch, past ``end``) or ``limit`` messages
    are read (the dashboard's bound)."""
    consumer = LitePullConsumer("TOOLS_CONSUMER", client_config=admin.config)
    try:
        await consumer.fetch_queues(mq.topic)
        addr = await consumer.instance.find_broker_addr_or_fetch(mq)
        low = await (admin.api.search_offset(addr, mq, parse_time(begin, 0)) if begin
                     else admin.api.get_min_offset(addr, mq))
        high = await (admin.api.search_offset(addr, mq, parse_time(end, 0)) if end
                      else admin.api.get_max_offset(addr, mq))
        out: list[MessageExt] = []
        offset = low
        while offset < high:
            res = await consumer.pull(mq, offset, min(32, high - offset), expression)
            if res.status is not PullStatus.FOUND:
                break
            out.extend(m for m in res.messages if m.queue_offset < high)
            offset = res.next_begin_offset
            if limit is not None and len(out) >= limit:
                del out[limit:]
                break
        return out
    finally:
        await consumer.instance.remoting.close()


@MESSAGE_COMMANDS.command("printMsgByQueue", "Print Message Detail", _print_by_queue_args)
async def print_msg_by_queue(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    try:
        charset = codecs.lookup(ns.charsetName.strip()).name
    except LookupError:
        raise MQClientError(-1, f"unknown charset {ns.charsetName!r}") from None
    mq = MessageQueue(ns.topic.strip(), ns.brokerName.strip(), ns.queueId)
    msgs = await read_queue(admin, mq, ns.beginTimestamp, ns.endTimestamp,
                             ns.subExpression.strip())
    lines, data = [], {}
    if ns.printMsg:
        for m in msgs:
            body = m.body.decode(charset, "replace") if ns.printBody else "NOT PRINT BODY"
            lines.append(f"MSGID: {m.msg_id} {message_ext_text(m)} BODY: {body}")
        data["messages"] = [message_dict(m, ns.printBody) for m in msgs]
    if ns.calculate:
        tags = Counter(m.tags for m in msgs if m.tags and m.tags.strip())
        counted = sorted(tags.items(), key=lambda kv: -kv[1])
        lines += [f"Tag: {tag:<30} Count: {n}" for tag, n in counted]
        data["tags"] = dict(counted)
    return Output(data, "\n".join(lines))


# --- queryCq ------------------------------------------------------------------------
def consume_queue_data_text(d: dict) -> str:
    """``ConsumeQueueData.toString`` (Java prints a missing string as null)."""
    def text(key: str) -> str:
        return java_str(d.get(key))

    return (f"ConsumeQueueData{{physicOffset={text('physicOffset')}, "
            f"physicSize={text('physicSize')}, tagsCode={text('tagsCode')}, "
            f"extendDataJson='{text('extendDataJson')}', bitMap='{text('bitMap')}', "
            f"eval={java_bool(bool(d.get('eval')))}, msg='{text('msg')}'}}")


@MESSAGE_COMMANDS.command("queryCq", "Query cq command.", lambda p: (
    p.add_argument("-t", "--topic", required=True, help="topic name"),
    p.add_argument("-q", "--queue", required=True, type=int, help="queue num, ie. 1"),
    p.add_argument("-i", "--index", required=True, type=int, help="start queue index."),
    p.add_argument("-c", "--count", type=int, default=10, help="how many."),
    p.add_argument("-b", "--broker", help="broker addr."),
    p.add_argument("-g", "--consumer", help="consumer group.")))
async def query_cq(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    """``count`` entries of a consume queue from ``index`` (physical offset, size,
    tags code), with the group's subscription and filter when ``-g`` names one."""
    topic = ns.topic.strip()
    addr = ns.broker.strip() if ns.broker else None
    if not addr:
        route = await admin.topic_route(topic)
        addr = next((bd.brokerAddrs.get(MASTER_ID) for bd in route.brokerDatas
                     if bd.brokerAddrs.get(MASTER_ID)), None)
        if addr is None:
            raise MQClientError(-1, "No topic route data!")
    resp = await admin.api.call(addr, RequestCode.QUERY_CONSUME_QUEUE, QueryConsumeQueueRequestHeader(
        topic=topic, queueId=ns.queue, index=ns.index, count=ns.count,
        consumerGroup=ns.consumer.strip() if ns.consumer else None))
    if not resp.body:
        raise MQClientError(-1, resp.remark or "the broker sent no consume queue data")
    body = loads(resp.body)
    out = []
    if body.get("subscriptionData") is not None:
        out += ["Subscription data: ", pretty_json(body["subscriptionData"]), SEPARATOR]
    if body.get("filterData") is not None:
        out += ["Filter data: ", str(body["filterData"]), SEPARATOR]
    out += ["Queue data: ", f"max: {body.get('maxQueueIndex')}, min: {body.get('minQueueIndex')}",
            SEPARATOR]
    for i, d in enumerate(body.get("queueData") or [], ns.index):
        out += [f"idx: {i}", consume_queue_data_text(d), SEPARATOR]
    return Output(body, "\n".join(out))
