"""What every ``rmq-admin`` command module shares: the result type and its table
rendering, mqadmin's time and boolean arguments, broker targets (``-b`` / ``-c``)
and the registry each module fills with its commands.

Command modules import from here, never from ``rmq.tools.admin`` (which imports
them: ``python -m rmq.tools.admin`` runs that module as ``__main__``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime

import orjson

from rmq.client.admin import MQAdmin
from rmq.client.exceptions import MQClientError
from rmq.client.message import MessageExt, MessageQueue, SendResult
from rmq.client.producer import Producer

# columns holding epoch milliseconds: tables show them as mqadmin does (local time)
TIME_COLUMNS = frozenset({"bornTimestamp", "storeTimestamp", "lastTimestamp", "timestamp",
                          "bootTimestamp", "beginTimestamp", "endTimestamp"})
JSON_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS  # broker ids are int keys


def human_time(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString2``: yyyy-MM-dd HH:mm:ss,SSS in local time;
    N/A for none (0 or negative)."""
    if not isinstance(ms, int) or isinstance(ms, bool) or ms <= 0:
        return "N/A"
    t = datetime.fromtimestamp(ms / 1000)
    return f"{t:%Y-%m-%d %H:%M:%S},{ms % 1000:03d}"


def compact_time(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString``: yyyyMMddHHmmssSSS in local time."""
    t = datetime.fromtimestamp(ms / 1000)
    return f"{t:%Y%m%d%H%M%S}{ms % 1000:03d}"


@dataclass(slots=True)
class Output:
    """A result whose table form is not a plain rendering of its JSON form.

    ``error``: the command did part of its work (``table`` says which) and
    failed for the rest; rmq-admin prints the output, then this one line, and
    exits 1."""

    data: object
    table: str
    error: str | None = None


def cell(value, column: str = "") -> str:
    """Table text of a value: Java's lower-case booleans, compact JSON for containers,
    readable times in the time columns."""
    if column in TIME_COLUMNS and isinstance(value, int):
        return human_time(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return orjson.dumps(value, option=JSON_OPTIONS).decode()
    return str(value)


def format_table(rows: list[dict], columns: list[str] | None = None) -> str:
    """Left-aligned columns separated by two spaces, headed by the column names."""
    if not rows:
        return "(none)"
    columns = columns or list(rows[0])
    cells = [[cell(r.get(c, ""), c) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
              for row in cells]
    return "\n".join(lines)


def message_dict(m: MessageExt, body: bool = True) -> dict:
    d = {"topic": m.topic, "msgId": m.msg_id, "offsetMsgId": m.offset_msg_id,
         "brokerName": m.broker_name, "queueId": m.queue_id, "queueOffset": m.queue_offset,
         "commitLogOffset": m.commit_log_offset, "tags": m.tags or "", "keys": m.keys or "",
         "reconsumeTimes": m.reconsume_times, "bornHost": m.born_host, "storeHost": m.store_host,
         "bornTimestamp": m.born_timestamp, "storeTimestamp": m.store_timestamp,
         "sysFlag": m.sys_flag, "properties": m.properties}
    if body:
        d["body"] = m.body.decode("utf-8", "replace")
    return d


def format_message(m: MessageExt) -> str:
    d = message_dict(m)
    return "\n".join(f"{k + ':':<18}{cell(v, k)}" for k, v in d.items())


def pretty_json(obj) -> str:
    """fastjson's pretty form: tab indents, no space after the colon."""
    return json.dumps(obj, indent="\t", separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def time_ms() -> int:
    return int(time.time() * 1000)


def java_bool(value: bool) -> str:
    return "true" if value else "false"


def java_str(value) -> str:
    """How Java's string concatenation shows a value: null for none."""
    return "null" if value is None else java_bool(value) if isinstance(value, bool) else str(value)


def parse_time(text: str | None, default: int) -> int:
    """Milliseconds, ``now``, or mqadmin's ``yyyy-MM-dd#HH:mm:ss:SSS``."""
    if text is None:
        return default
    text = text.strip()
    if text == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return int(datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f").timestamp() * 1000)
    except ValueError:
        raise MQClientError(-1, f"bad time {text!r}: use ms, now or yyyy-MM-dd#HH:mm:ss:SSS") from None


def parse_bool(text: str) -> bool:
    """Java's ``Boolean.parseBoolean``: true (any case) is true, anything else false."""
    return text.strip().lower() == "true"


def broker_target(p: argparse.ArgumentParser, required: bool = True,
                  cluster_option: str = "--clusterName") -> None:
    """``-b`` broker address or ``-c`` cluster (every master of it), one of them."""
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("-b", "--brokerAddr", help="broker address ip:port")
    g.add_argument("-c", cluster_option, dest="clusterName", help="every master of this cluster")


async def target_addrs(admin: MQAdmin, ns: argparse.Namespace) -> list[str]:
    """The ``-b`` address, or every master of the ``-c`` cluster."""
    if ns.brokerAddr:
        return [ns.brokerAddr.strip()]
    return await admin.master_addrs(ns.clusterName.strip())


Handler = Callable[[MQAdmin, argparse.Namespace], object]
Entry = tuple[str, Callable[[argparse.ArgumentParser], None], Handler]


class CommandTable(dict[str, Entry]):
    """name -> (help, options, handler); ``rmq.tools.admin`` merges every module's."""

    def command(self, name: str, help_text: str,
                args: Callable[[argparse.ArgumentParser], None] = lambda p: None):
        def deco(fn):
            self[name] = (help_text, args, fn)
            return fn
        return deco


# --- Java toString forms mqadmin prints -------------------------------------------
def mq_text(mq: MessageQueue) -> str:
    """``MessageQueue.toString``."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


def send_result_text(r: SendResult) -> str:
    """``SendResult.toString``."""
    return (f"SendResult [sendStatus={r.status.value}, msgId={r.msg_id}, "
            f"offsetMsgId={r.offset_msg_id}, messageQueue={mq_text(r.message_queue)}, "
            f"queueOffset={r.queue_offset}]")


def send_result_dict(r: SendResult) -> dict:
    return {"sendStatus": r.status.value, "msgId": r.msg_id, "offsetMsgId": r.offset_msg_id,
            "messageQueue": r.message_queue.to_json_obj(), "queueOffset": r.queue_offset}


# --- clients the tools start ------------------------------------------------------
@asynccontextmanager
async def tool_producer(admin: MQAdmin, group: str,
                        unit_name: str | None = None) -> AsyncIterator[Producer]:
    """A producer on the tool's name servers and credentials, shut down after."""
    config = replace(admin.config, instance_name=f"{group}_{os.getpid()}_{time.time_ns()}",
                     unit_name=unit_name)
    producer = Producer(group, client_config=config)
    await producer.start()
    try:
        yield producer
    finally:
        await producer.shutdown()


def emit(line: str) -> None:
    """One line of a command that prints as it goes (a long or endless run)."""
    print(line, flush=True)
