"""The records of POP consumption as RocketMQ 5.3.3 writes them.

* ``PopCheckPoint`` (a "ck"): one per queue a pop read, the offsets it handed
  out and when they come back; JSON with 5.3.3's short names, stored as a
  message tagged ``ck`` in the revive topic ``rmq_sys_REVIVE_LOG_<cluster>``.
* ``AckMsg`` / ``BatchAckMsg`` (tags ``ack`` / ``bAck``): offsets acknowledged
  for a checkpoint, matched to it by :func:`merge_key`.
* the "extra info" (receipt handle) a client sends back with an ACK or a
  CHANGE_MESSAGE_INVISIBLETIME: ``"ckOffset popTime invisibleTime reviveQid
  retryFlag brokerName queueId offset"`` (``ExtraInfoUtil``).
* retry topic names v1 ``%RETRY%group_topic`` and v2 ``%RETRY%group+topic``
  (``KeyBuilder``) and the response header texts (startOffsetInfo, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from rmq._fast import compiled
from rmq.common import fastjson
from rmq.common import topics as T
from rmq.common.topics import pop_retry_topic_v1 as retry_topic_v1
from rmq.common.topics import pop_retry_topic_v2 as retry_topic_v2

REVIVE_TOPIC_PREFIX = T.SYSTEM_TOPIC_PREFIX + "REVIVE_LOG_"
REVIVE_GROUP = T.CID_RMQ_SYS_PREFIX + "REVIVE_GROUP"
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
ORDER_REVIVE_QUEUE = 999  # KeyBuilder.POP_ORDER_REVIVE_QUEUE
PROPERTY_POP_CK = "POP_CK"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"

NORMAL, RETRY_V1, RETRY_V2 = "0", "1", "2"


def revive_topic(cluster: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster


def retry_flag(topic: str) -> str:
    """``ExtraInfoUtil.getRetry``: 0 normal, 1 retry v1, 2 retry v2."""
    if not topic.startswith(T.RETRY_GROUP_TOPIC_PREFIX):
        return NORMAL
    return RETRY_V2 if "+" in topic else RETRY_V1


def real_topic(topic: str, group: str, flag: str) -> str:
    """``ExtraInfoUtil.getRealTopic``: the topic a handle's message was read from."""
    if flag == RETRY_V1:
        return retry_topic_v1(topic, group)
    if flag == RETRY_V2:
        return retry_topic_v2(topic, group)
    return topic


def normal_topic(topic: str, group: str) -> str:
    """``KeyBuilder.parseNormalTopic``: the topic a pop retry topic retries."""
    for sep in ("+", "_"):
        prefix = f"{T.RETRY_GROUP_TOPIC_PREFIX}{group}{sep}"
        if topic.startswith(prefix):
            return topic[len(prefix):]
    return topic


# ---- extra info (the receipt handle) -----------------------------------------------
@dataclass(slots=True)
class ExtraInfo:
    ck_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    offset: int

    def text(self) -> str:
        return (f"{self.ck_offset} {self.pop_time} {self.invisible_time} {self.revive_qid} "
                f"{self.retry} {self.broker_name} {self.queue_id} {self.offset}")

    @classmethod
    def parse(cls, text: str | None) -> ExtraInfo:
        """Raises ValueError naming what is wrong."""
        if not text:
            raise ValueError("extraInfo is empty")
        parts = text.split(" ")
        if len(parts) < 8:
            raise ValueError(f"extraInfo has {len(parts)} fields, 8 needed: {text}")
        try:
            return cls(int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3]), parts[4],
                       parts[5], int(parts[6]), int(parts[7]))
        except ValueError:
            raise ValueError(f"extraInfo is not numeric where it must be: {text}") from None


# ---- checkpoint and acks ------------------------------------------------------------
def merge_key(topic: str, group: str, queue_id: int, start_offset: int, pop_time: int,
              broker_name: str | None) -> str:
    """What ties acks to their checkpoint (PopReviveService, 5.3.3)."""
    return f"{topic}{group}{queue_id}{start_offset}{pop_time}{broker_name}"


@dataclass(slots=True)
class PopCheckPoint:
    topic: str  # the topic read (a retry topic for redeliveries)
    cid: str
    queue_id: int
    start_offset: int
    pop_time: int
    invisible_time: int
    offset_diffs: list[int] = field(default_factory=list)
    broker_name: str | None = None
    revive_offset: int = 0
    bit_map: int = 0
    reput_times: str | None = None

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def num(self) -> int:
        return len(self.offset_diffs)

    def offsets(self) -> list[int]:
        return [self.start_offset + d for d in self.offset_diffs]

    def index_of(self, offset: int) -> int:
        try:
            return self.offset_diffs.index(offset - self.start_offset)
        except ValueError:
            return -1

    def key(self) -> str:
        return merge_key(self.topic, self.cid, self.queue_id, self.start_offset, self.pop_time,
                         self.broker_name)

    def to_json_obj(self) -> dict[str, Any]:
        """fastjson's order of 5.3.3's JSONField names (getReviveTime included)."""
        obj: dict[str, Any] = {"bm": self.bit_map}
        if self.broker_name is not None:
            obj["bn"] = self.broker_name
        obj.update({"c": self.cid, "d": list(self.offset_diffs), "it": self.invisible_time,
                    "n": self.num, "pt": self.pop_time, "q": self.queue_id,
                    "reviveTime": self.revive_time, "ro": self.revive_offset})
        if self.reput_times is not None:
            obj["rp"] = self.reput_times
        obj.update({"so": self.start_offset, "t": self.topic})
        return obj

    def encode(self) -> bytes:
        """``to_json_obj`` as JSON (``ck_body``)."""
        return ck_body(self.bit_map, self.broker_name, self.cid, self.offset_diffs,
                       self.invisible_time, self.pop_time, self.queue_id, self.revive_offset,
                       self.reput_times, self.start_offset, self.topic)

    @classmethod
    def decode(cls, data: bytes) -> PopCheckPoint:
        o = fastjson.loads(data)
        if not isinstance(o, dict):
            raise ValueError("checkpoint is not a JSON object")
        diffs = o.get("d")
        so = int(o["so"])
        if diffs is None:  # an old ck: n consecutive offsets
            diffs = list(range(int(o.get("n", 0))))
        rp = o.get("rp")
        return cls(str(o["t"]), str(o["c"]), int(o["q"]), so, int(o["pt"]), int(o["it"]),
                   [int(d) for d in diffs], o.get("bn"), int(o.get("ro", 0)),
                   int(o.get("bm", 0)), None if rp is None else str(rp))


@dataclass(slots=True)
class AckMsg:
    topic: str
    group: str
    queue_id: int
    start_offset: int
    pop_time: int
    broker_name: str | None
    offsets: list[int]

    def key(self) -> str:
        return merge_key(self.topic, self.group, self.queue_id, self.start_offset, self.pop_time,
                         self.broker_name)

    def encode(self) -> tuple[bytes, str]:
        """The body and tag: ``AckMsg`` for one offset, ``BatchAckMsg`` for more."""
        offsets = self.offsets
        return (ack_body(offsets, self.broker_name, self.group, self.pop_time, self.queue_id,
                         self.start_offset, self.topic),
                ACK_TAG if len(offsets) == 1 else BATCH_ACK_TAG)

    @classmethod
    def decode(cls, data: bytes) -> AckMsg:
        o = fastjson.loads(data)
        if not isinstance(o, dict):
            raise ValueError("ack is not a JSON object")
        offsets = o.get("aol")
        if offsets is None:
            offsets = [o.get("ao", o.get("ackOffset"))]
        return cls(str(o.get("t", o.get("topic"))), str(o.get("c", o.get("consumerGroup"))),
                   int(o.get("q", o.get("queueId", 0))),
                   int(o.get("so", o.get("startOffset", 0))),
                   int(o.get("pt", o.get("popTime", 0))), o.get("bn", o.get("brokerName")),
                   [int(x) for x in offsets])


def _ck_body(bit_map: int, broker_name: str | None, cid: str, diffs: list[int],
             invisible_time: int, pop_time: int, queue_id: int, revive_offset: int,
             reput_times: str | None, start_offset: int, topic: str) -> bytes:
    """A checkpoint's JSON: ``PopCheckPoint.to_json_obj`` as orjson writes it
    (names and numbers: what fastjson writes), rendered field by field: a pop
    writes one per queue read, and building the map and dumping it costs
    three times as much.  Compiled twin: ``rmq._fast.pop_records``."""
    dumps = orjson.dumps
    bn = b"" if broker_name is None else b'"bn":%b,' % dumps(broker_name)
    rp = b"" if reput_times is None else b'"rp":%b,' % dumps(reput_times)
    return (b'{"bm":%d,%b"c":%b,"d":%b,"it":%d,"n":%d,"pt":%d,"q":%d,"reviveTime":%d,'
            b'"ro":%d,%b"so":%d,"t":%b}' % (
                bit_map, bn, dumps(cid), dumps(diffs), invisible_time, len(diffs), pop_time,
                queue_id, pop_time + invisible_time, revive_offset, rp, start_offset,
                dumps(topic)))


def _ack_body(offsets: list[int], broker_name: str | None, group: str, pop_time: int,
              queue_id: int, start_offset: int, topic: str) -> bytes:
    """An ack record's JSON as orjson writes 5.3.3's map (``ao`` for one
    offset, ``aol`` for any other number).  Compiled twin:
    ``rmq._fast.pop_records``."""
    obj: dict[str, Any] = {}
    if len(offsets) == 1:
        obj["ao"] = offsets[0]
    else:
        obj["aol"] = list(offsets)
    if broker_name is not None:
        obj["bn"] = broker_name
    obj.update({"c": group, "pt": pop_time, "q": queue_id, "so": start_offset, "t": topic})
    return orjson.dumps(obj)


ck_body = _ck_body
ack_body = _ack_body
_c = compiled("pop_records")
if _c is not None:
    ck_body = _c.ck_body
    ack_body = _c.ack_body


# ---- response header texts -----------------------------------------------------------
def append_info(parts: list[str], topic: str, queue_key: Any, value: Any) -> None:
    """One ``retry queue value`` entry of startOffsetInfo / msgOffsetInfo /
    orderCountInfo (entries are joined with ``;``)."""
    parts.append(f"{retry_flag(topic)} {queue_key} {value}")


def order_offset_key(queue_id: int, offset: int) -> str:
    """``ExtraInfoUtil.getQueueOffsetKeyValueKey``."""
    return f"qo{queue_id}%{offset}"
