"""POP consumption from the client side (RocketMQ 5.x remoting).

``PopClient`` pops messages from one broker, acks them and changes their
invisible time, building each message's receipt handle (the ``POP_CK``
property, ``"ckOffset popTime invisibleTime reviveQid retryFlag brokerName
queueId offset"``) from the pop answer as the 5.x Java client does
(MQClientAPIImpl.processPopResponse).  ``PopPushConsumer`` is a push consumer
in POP mode: it pops in a loop, hands each message to a listener and acks
what the listener consumed; a message it did not consume comes back after its
invisible time with its reconsume times counted by the broker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from rmq.client.codec import decode_messages
from rmq.client.message import MessageExt
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import RemotingClient, RemotingCommand

log = logging.getLogger("rmq.client")

POP_CK = "POP_CK"
FIRST_POP_TIME = "1ST_POP_TIME"
ORDER_REVIVE_QUEUE = 999


def retry_flag(topic: str) -> str:
    if not topic.startswith("%RETRY%"):
        return "0"
    return "2" if "+" in topic else "1"


def real_topic(topic: str, group: str, flag: str) -> str:
    if flag == "1":
        return f"%RETRY%{group}_{topic}"
    if flag == "2":
        return f"%RETRY%{group}+{topic}"
    return topic


def _info_map(text: str | None) -> dict[str, list[str]]:
    """``retry qid value;...`` -> {"retry@qid": [value, ...]}."""
    out: dict[str, list[str]] = {}
    for part in (text or "").split(";"):
        fields = part.split(" ")
        if len(fields) == 3:
            out[f"{fields[0]}@{fields[1]}"] = fields[2].split(",")
    return out


@dataclass(slots=True)
class PopResult:
    code: int
    remark: str | None = None
    messages: list[MessageExt] = field(default_factory=list)
    pop_time: int = 0
    invisible_time: int = 0
    revive_qid: int = 0
    rest_num: int = 0


def handle_of(msg: MessageExt) -> str:
    return msg.properties[POP_CK]


def parse_pop_response(r: RemotingCommand, broker_name: str) -> PopResult:
    """The messages of a POP_MESSAGE answer, each with its POP_CK handle."""
    if r.code != ResponseCode.SUCCESS:
        return PopResult(r.code, r.remark)
    ext = r.ext_fields or {}
    pop_time, invisible = int(ext["popTime"]), int(ext["invisibleTime"])
    revive_qid = int(ext["reviveQid"])
    starts = _info_map(ext.get("startOffsetInfo"))
    offsets = _info_map(ext.get("msgOffsetInfo"))
    orders = _info_map(ext.get("orderCountInfo"))
    used: dict[str, int] = {}
    msgs = decode_messages(bytes(r.body or b""), broker_name)
    for m in msgs:
        if POP_CK not in m.properties:
            flag = retry_flag(m.topic)
            key = f"{flag}@{m.queue_id}"
            start = starts.get(key, [str(m.queue_offset)])[0]
            i = used.get(key, 0)
            used[key] = i + 1
            listed = offsets.get(key)
            offset = listed[i] if listed and i < len(listed) else str(m.queue_offset)
            m.properties[POP_CK] = (f"{start} {pop_time} {invisible} {revive_qid} {flag} "
                                    f"{broker_name} {m.queue_id} {offset}")
            count = orders.get(f"{flag}@qo{m.queue_id}%{offset}")
            if count and int(count[0]) > 0:
                m.reconsume_times = int(count[0])
        m.properties.setdefault(FIRST_POP_TIME, str(pop_time))
    return PopResult(r.code, r.remark, msgs, pop_time, invisible, revive_qid,
                     int(ext.get("restNum", "0")))


class PopClient:
    """POP_MESSAGE / ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME / BATCH_ACK to one broker."""

    def __init__(self, addr: str, broker_name: str, client: RemotingClient | None = None) -> None:
        self.addr = addr
        self.broker_name = broker_name
        self.client = client or RemotingClient()
        self._own = client is None

    async def close(self) -> None:
        if self._own:
            await self.client.close()

    async def _call(self, code: int, ext: dict[str, str], body: bytes | None = None,
                    timeout_ms: int = 5000) -> RemotingCommand:
        ext = {**ext, "bname": self.broker_name}
        return await self.client.invoke(self.addr, RemotingCommand.create_request(code, ext, body),
                                        timeout_ms)

    async def pop(self, group: str, topic: str, *, queue_id: int = -1, max_nums: int = 32,
                  invisible_ms: int = 60000, poll_ms: int = 0, exp: str = "*",
                  exp_type: str = "TAG", order: bool = False, init_mode: int = 0) -> PopResult:
        ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id),
               "maxMsgNums": str(max_nums), "invisibleTime": str(invisible_ms),
               "pollTime": str(poll_ms), "bornTime": str(int(time.time() * 1000)),
               "initMode": str(init_mode), "expType": exp_type, "exp": exp,
               "order": "true" if order else "false"}
        r = await self._call(RequestCode.POP_MESSAGE, ext, timeout_ms=poll_ms + 5000)
        return parse_pop_response(r, self.broker_name)

    @staticmethod
    def _handle_fields(group: str, topic: str, handle: str) -> dict[str, str]:
        f = handle.split(" ")
        return {"consumerGroup": group, "topic": real_topic(topic, group, f[4]),
                "queueId": f[6], "offset": f[7], "extraInfo": handle}

    async def ack(self, group: str, topic: str, handle: str) -> RemotingCommand:
        """ACK_MESSAGE; ``topic`` is the message's (original) topic."""
        return await self._call(RequestCode.ACK_MESSAGE, self._handle_fields(group, topic, handle))

    async def change_invisible(self, group: str, topic: str, handle: str,
                               invisible_ms: int) -> tuple[RemotingCommand, str | None]:
        """CHANGE_MESSAGE_INVISIBLETIME; answers the new handle."""
        ext = self._handle_fields(group, topic, handle)
        ext["invisibleTime"] = str(invisible_ms)
        r = await self._call(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, ext)
        if r.code != ResponseCode.SUCCESS:
            return r, None
        f = handle.split(" ")
        e = r.ext_fields or {}
        new = (f"{f[7]} {e['popTime']} {e['invisibleTime']} {e['reviveQid']} {f[4]} "
               f"{f[5]} {f[6]} {f[7]}")
        return r, new


Listener = Callable[[MessageExt], Awaitable[bool] | bool]


class PopPushConsumer:
    """A push consumer in POP mode (the broker balances: no client rebalance)."""

    def __init__(self, pop: PopClient, group: str, topic: str, listener: Listener, *,
                 invisible_ms: int = 60000, poll_ms: int = 2000, batch: int = 16,
                 exp: str = "*", order: bool = False) -> None:
        self.pop = pop
        self.group, self.topic = group, topic
        self.listener = listener
        self.invisible_ms, self.poll_ms, self.batch = invisible_ms, poll_ms, batch
        self.exp, self.order = exp, order
        self._task: asyncio.Task | None = None
        self.consumed = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                r = await self.pop.pop(self.group, self.topic, max_nums=self.batch,
                                       invisible_ms=self.invisible_ms, poll_ms=self.poll_ms,
                                       exp=self.exp, order=self.order)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the broker away: retry shortly
                log.warning("pop failed: %s", exc)
                await asyncio.sleep(1)
                continue
            for m in r.messages:
                ok = self.listener(m)
                if asyncio.iscoroutine(ok):
                    ok = await ok
                if ok:
                    await self.pop.ack(self.group, self.topic, handle_of(m))
                    self.consumed += 1
                elif self.order:
                    break  # the rest of an orderly batch waits for this one
