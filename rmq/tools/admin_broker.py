"""``rmq-admin`` broker commands of mqadmin 4.9.8 not in ``rmq.tools.admin``:
store maintenance (``cleanExpiredCQ``, ``deleteExpiredCommitLog``,
``cleanUnusedTopic``), the producers a broker knows (``producer``) and send
round trips (``sendMsgStatus``, ``checkMsgSendRT``, ``clusterRT``).

The send commands print each line as it is measured, as mqadmin does;
``clusterRT`` runs until stopped unless ``--rounds`` says how many rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from datetime import datetime, timedelta, timezone
from decimal import ROUND_HALF_UP, Decimal

import orjson

from rmq.client.admin import MQAdmin
from rmq.client.api import loads
from rmq.client.exceptions import MQClientError
from rmq.client.message import Message
from rmq.common.codes import RequestCode
from rmq.remoting.exceptions import RemotingError
from rmq.tools.admin_base import (
    CommandTable,
    Output,
    emit,
    java_bool,
    send_result_dict,
    send_result_text,
    tool_producer,
)

BROKER_COMMANDS = CommandTable()
RT_TIME_ZONE = timezone(timedelta(hours=8))  # clusterRT -p stamps its lines in GMT+8
# mqadmin's printf layouts (its header and rows differ in widths)
CHECK_RT_ROW = "%-32s  %-4s  %-20s    %s"
CLUSTER_RT_HEADER = "%-24s  %-24s  %-4s  %-8s  %-8s"
CLUSTER_RT_ROW = "%-24s  %-24s  %-8s  %-16s  %-16s"


def _positive(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, not {text!r}")
    return value


# --- store maintenance -------------------------------------------------------------
def _maintenance_target(p: argparse.ArgumentParser, cluster_help: str) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("-b", "--brokerAddr", help="Broker address")
    g.add_argument("-c", "--cluster", help=cluster_help)


async def _every_broker(admin: MQAdmin, ns: argparse.Namespace) -> list[str]:
    """-b; else every broker (masters and slaves) of -c; else of every cluster
    (``retrieveAllAddrByCluster``)."""
    if ns.brokerAddr:
        return [ns.brokerAddr.strip()]
    info = await admin.cluster_info()
    if ns.cluster:
        names = info.clusterAddrTable.get(ns.cluster.strip())
        if names is None:
            raise MQClientError(-1, f"cluster {ns.cluster.strip()} not found")
    else:
        names = [n for ns_ in info.clusterAddrTable.values() for n in ns_]
    return sorted({addr for name in names if name in info.brokerAddrTable
                   for addr in info.brokerAddrTable[name].brokerAddrs.values()})


async def _maintain(admin: MQAdmin, ns: argparse.Namespace, code: int) -> Output:
    """Send ``code`` to each target broker; mqadmin's one word, success or false."""
    addrs = await _every_broker(admin, ns)
    for addr in addrs:
        await admin.api.call(addr, code)
    if not addrs:
        return Output({"brokers": [], "result": False}, "false", "no broker to ask")
    return Output({"brokers": addrs, "result": True}, "success")


@BROKER_COMMANDS.command("cleanExpiredCQ", "Clean expired ConsumeQueue on broker.",
                         lambda p: _maintenance_target(p, "clustername"))
async def clean_expired_cq(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    """Consume queues whose every entry points at deleted commit log data go."""
    return await _maintain(admin, ns, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)


@BROKER_COMMANDS.command("deleteExpiredCommitLog", "Delete expired CommitLog files",
                         lambda p: _maintenance_target(p, "clustername"))
async def delete_expired_commit_log(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    """The broker's clean service deletes expired commit log files on its next
    rounds whatever the hour (``executeDeleteFilesManually``)."""
    return await _maintain(admin, ns, RequestCode.DELETE_EXPIRED_COMMITLOG)


@BROKER_COMMANDS.command("cleanUnusedTopic", "Clean unused topic on broker.",
                         lambda p: _maintenance_target(p, "cluster name"))
async def clean_unused_topic(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    """Consume queues of topics the broker no longer has a config for go."""
    return await _maintain(admin, ns, RequestCode.CLEAN_UNUSED_TOPIC)


# --- producers -------------------------------------------------------------------
@BROKER_COMMANDS.command("producer", "Query producer's instances, connection, status, etc.",
                         lambda p: p.add_argument("-b", "--broker", required=True,
                                                  help="broker address"))
async def producer(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    resp = await admin.api.call(ns.broker.strip(), RequestCode.GET_ALL_PRODUCER_INFO)
    data = loads(resp.body).get("data") or {}
    lines = []
    for group, instances in data.items():
        if not instances:
            lines.append(f"producer group ({group}) instances are empty")
        for p in instances or []:
            lines.append(
                f"producer group ({group}) instance : clientId={p.get('clientId')},"
                f"remoteIP={p.get('remoteIP')}, language={p.get('language')}, "
                f"version={p.get('version')}, lastUpdateTimestamp={p.get('lastUpdateTimestamp')}")
    return Output(data, "\n".join(lines))


# --- send round trips -------------------------------------------------------------
def _body(size: int, unit: str) -> bytes:
    """``size`` bytes made of ``unit`` (mqadmin's filler text)."""
    return (unit * (size // len(unit) + 1)).encode()[:size]


def _ms_since(start: float) -> int:
    return int((time.monotonic() - start) * 1000)


@BROKER_COMMANDS.command("sendMsgStatus", "send msg to broker.", lambda p: (
    p.add_argument("-b", "--brokerName", required=True, help="Broker Name"),
    p.add_argument("-s", "--messageSize", type=_positive, default=128,
                   help="Message Size, Default: 128"),
    p.add_argument("-c", "--count", type=_positive, default=50,
                   help="send message count, Default: 50")))
async def send_msg_status(admin: MQAdmin, ns: argparse.Namespace) -> None:
    """Sends to the topic named after the broker (every broker has one), after
    one small warm-up message; one line per send.  An unknown broker name is
    refused (with autoCreateTopicEnable mqadmin would create that topic)."""
    name = ns.brokerName.strip()
    if name not in (await admin.cluster_info()).brokerAddrTable:
        raise MQClientError(-1, f"broker {name} not found in the cluster info")
    # StringBuilder appends whole 11-character units until it reaches the size
    body = b"hello jodie" * ((ns.messageSize + 10) // 11)
    async with tool_producer(admin, "PID_SMSC") as p:
        await p.send(Message(name, b"hello jodie" * 2))
        for _ in range(ns.count):
            start = time.monotonic()
            r = await p.send(Message(name, body))
            rt = _ms_since(start)
            emit(orjson.dumps({"rt": rt, "sendResult": send_result_dict(r)}).decode()
                 if ns.json else f"rt={rt}ms, SendResult={send_result_text(r)}")


def _amount_and_size(p: argparse.ArgumentParser) -> None:
    p.add_argument("-a", "--amount", type=_positive, default=100,
                   help="message amount | default 100")
    p.add_argument("-s", "--size", type=_positive, default=128,
                   help="message size | default 128 Byte")


@BROKER_COMMANDS.command("checkMsgSendRT", "check message send response time", lambda p: (
    p.add_argument("-t", "--topic", required=True, help="topic name"), _amount_and_size(p)))
async def check_msg_send_rt(admin: MQAdmin, ns: argparse.Namespace) -> None:
    """Message i goes to queue i mod n; the first send (connection set-up) is
    left out of the average, as mqadmin does.  A failed send is a row with
    false, not the end of the run."""
    topic = ns.topic.strip()
    msg = Message(topic, _body(ns.size, "a"))
    fmt = CHECK_RT_ROW
    chosen: list = [None]

    def by_index(mqs, _msg, i):
        chosen[0] = mqs[i % len(mqs)]
        return chosen[0]

    async with tool_producer(admin, f"RT_{int(time.time() * 1000)}") as p:
        if not ns.json:
            emit(fmt % ("#Broker Name", "#QID", "#Send Result", "#RT"))
        elapsed = 0
        for i in range(ns.amount):
            start = time.monotonic()
            try:
                await p.send(msg, selector=by_index, arg=i)
                ok = True
            except (MQClientError, RemotingError):
                ok = False
            rt = _ms_since(start)
            elapsed += rt if i else 0
            mq = chosen[0]
            broker, qid = (mq.broker_name, mq.queue_id) if mq else ("", 0)
            emit(orjson.dumps({"brokerName": broker, "queueId": qid, "sendResult": ok,
                               "rt": rt}).decode() if ns.json
                 else fmt % (broker, qid, java_bool(ok), rt))
        avg = f"{elapsed / (ns.amount - 1):.2f}" if ns.amount > 1 else "NaN"
        emit(orjson.dumps({"avgRT": avg}).decode() if ns.json else f"Avg RT: {avg}")


def _cluster_rt_args(p: argparse.ArgumentParser) -> None:
    _amount_and_size(p)
    p.add_argument("-c", "--cluster", help="cluster name | default display all cluster")
    p.add_argument("-p", "--printLog", default="false", help="print as tlog | default false")
    p.add_argument("-m", "--machineRoom", default="noname",
                   help="machine room name | default noname")
    p.add_argument("-i", "--interval", type=_positive, default=10,
                   help="print interval | default 10 seconds")
    p.add_argument("--rounds", type=int, default=0,
                   help="stop after this many rounds (rmq; default 0: run until stopped)")


async def _broker_rt(p, name: str, body: bytes, amount: int) -> tuple[float, int, int]:
    """Average RT (first send left out), successes and failures of ``amount``
    sends to the topic named after the broker."""
    elapsed = ok = failed = 0
    for i in range(amount):
        start = time.monotonic()
        try:
            await p.send(Message(name, body))
            ok += 1
        except (MQClientError, RemotingError):
            failed += 1
        elapsed += _ms_since(start) if i else 0
    return (elapsed / (amount - 1) if amount > 1 else float("nan")), ok, failed


@BROKER_COMMANDS.command("clusterRT", "List All clusters Message Send RT", _cluster_rt_args)
async def cluster_rt(admin: MQAdmin, ns: argparse.Namespace) -> None:
    """Every ``--interval`` seconds, ``--amount`` sends to each broker of the
    cluster(s): average RT and counts per broker, or with ``-p true`` one
    ``time|room|cluster|broker|rt`` line each."""
    tlog = ns.printLog.strip().lower() == "true"
    info = await admin.cluster_info()
    clusters = [ns.cluster.strip()] if ns.cluster else sorted(info.clusterAddrTable)
    for cluster in clusters:
        if cluster not in info.clusterAddrTable:
            raise MQClientError(-1, f"cluster [{cluster}] not exist")
    body = _body(ns.size, "a")
    async with tool_producer(admin, f"RT_{int(time.time() * 1000)}") as p:
        if not tlog and not ns.json:
            emit(CLUSTER_RT_HEADER % (
                "#Cluster Name", "#Broker Name", "#RT", "#successCount", "#failCount"))
        done = 0
        while True:
            for cluster in clusters:
                for name in sorted(info.clusterAddrTable[cluster]):
                    rt, ok, failed = await _broker_rt(p, name, body, ns.amount)
                    emit(_rt_line(ns, cluster, name, rt, ok, failed, tlog))
            done += 1
            if ns.rounds and done >= ns.rounds:
                return
            await asyncio.sleep(ns.interval)


def _rt_line(ns: argparse.Namespace, cluster: str, broker: str, rt: float, ok: int,
             failed: int, tlog: bool) -> str:
    rt_text = f"{rt:.2f}" if rt == rt else "NaN"
    if ns.json:
        return orjson.dumps({"cluster": cluster, "brokerName": broker, "rt": rt_text,
                             "successCount": ok, "failCount": failed}).decode()
    if tlog:
        now = datetime.now(RT_TIME_ZONE).strftime("%Y-%m-%d %H:%M:%S")
        rounded = Decimal(rt).quantize(Decimal(1), ROUND_HALF_UP) if rt == rt else "NaN"
        return f"{now}|{ns.machineRoom.strip()}|{cluster}|{broker}|{rounded}"
    return CLUSTER_RT_ROW % (cluster, broker, rt_text, ok, failed)

