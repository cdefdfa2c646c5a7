"""ScheduleMessageService: delivery of delayed messages (STORE_FORMAT.md 12).

The commit log parks a message with ``DELAY=n`` in ``SCHEDULE_TOPIC_XXXX``
queue n-1, its consume-queue tagsCode being the delivery time.  One asyncio
task per level walks that queue in order from the level's saved offset: an
entry that is due is re-stored under its real topic and queue (``DELAY``
removed from the map, ``WAIT=false``; the stored properties string keeps the
4.9.8 quirk of being generated before ``DELAY`` is dropped), then the level's
offset moves on.  Offsets persist in ``config/delayOffset.json`` every
``flushDelayOffsetInterval`` and at shutdown, so deliveries survive restarts
(a crash may deliver the last few again: at least once).  Masters only.

A level's task sleeps until its head entry is due, or until a message arrives
in its queue when the queue is exhausted (arrival notification, with a 1 s
re-check), instead of polling every 100 ms as Java does.

With ``enableScheduleAsyncDeliver`` (4.9.8's asynchronous delivery) a level
does not wait for each re-store (under SYNC_FLUSH or SYNC_MASTER, its flush or
replication) before the next: up to ``scheduleAsyncDeliverMaxPendingLimit``
puts are in flight, and a second task per level moves the level's offset on
in queue order as they complete.  A failed put is tried again with a growing
pause (100 ms more each time, at most 60 s); once the head has failed more
than ``scheduleAsyncDeliverMaxResendNum2Blocked`` times, no new delivery of the
level starts until it gets through.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from rmq.common import fastjson
from rmq.common import message as mc
from rmq.common.config_manager import ConfigManager, parse_json, pretty_dumps
from rmq.common.topics import SCHEDULE_CONSUMER_GROUP, SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from rmq.store.config import BrokerRole, FlushDiskType
from rmq.store.message import MessageExtBrokerInner
from rmq.store.message_codec import decode_message, message_properties_to_string
from rmq.store.results import PutMessageStatus

log = logging.getLogger("store")

FIRST_DELAY_S = 1.0
RETRY_AFTER_FAILURE_S = 0.1
IDLE_RECHECK_S = 1.0


@dataclass(slots=True)
class _InFlight:
    """One asynchronous re-store of a level (``PutResultProcess``)."""

    offset: int  # the entry's offset in the level's queue
    phy: int
    size: int
    task: asyncio.Future
    resends: int = 0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def delay_offset_path(store_root: str) -> str:
    return os.path.join(store_root, "config", "delayOffset.json")


class ScheduleMessageService(ConfigManager):
    """Delay levels of one broker; built by the send processor, started and
    stopped through ``controller.services``."""

    def __init__(self, controller: Any) -> None:
        self.c = controller
        self.store_config = controller.store_config
        self.offset_table: dict[int, int] = {}
        self.delay_table = self.store_config.delay_level_table()
        self.max_level = max(self.delay_table) if self.delay_table else 0
        self._events: dict[int, asyncio.Event] = {}
        self._in_flight: dict[int, deque[_InFlight]] = {}  # async delivery, per level
        self._read_pos: dict[int, int] = {}  # async delivery: the next entry to start
        self._tasks: list[asyncio.Task] = []
        self._started = False
        controller.add_arrival_listener(self.on_message_arriving, self.on_message_runs,
                                        topics=frozenset((SCHEDULE_TOPIC,)))

    # ---- persistence ----------------------------------------------------------
    def config_file_path(self) -> str:
        return delay_offset_path(self.store_config.storePathRootDir)

    def encode(self, pretty: bool = False) -> str:
        obj = {"offsetTable": dict(sorted(self.offset_table.items()))}
        return pretty_dumps(obj) if pretty else fastjson.dumps(obj).decode("utf-8")

    def decode(self, text: str) -> None:
        table = parse_json(text).get("offsetTable") or {}
        self.offset_table = {int(k): int(v) for k, v in table.items()}

    # ---- life cycle -------------------------------------------------------------
    async def start(self) -> None:
        """Load offsets and start one task per level (nothing on a slave)."""
        if self._started:
            return
        self._started = True
        try:
            self.load()
        except Exception:  # a broken file must not stop the broker; start from 0
            log.exception("load %s failed, delay levels restart from offset 0",
                          self.config_file_path())
        if self.store_config.brokerRole is BrokerRole.SLAVE:
            return
        loop = asyncio.get_running_loop()
        for level in sorted(self.delay_table):
            self.offset_table.setdefault(level, 0)
            self._events[level] = asyncio.Event()
            self._tasks.append(loop.create_task(self._deliver_level(level),
                                                name=f"schedule-level-{level}"))
            if self.store_config.enableScheduleAsyncDeliver:
                self._in_flight[level] = deque()
                self._tasks.append(loop.create_task(self._handle_put_results(level),
                                                    name=f"schedule-results-{level}"))
        self._tasks.append(loop.create_task(self._persist_periodically(), name="delayOffset"))

    async def shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for pending in self._in_flight.values():  # the offsets stay before them: delivered again
            for p in pending:
                p.task.cancel()
            pending.clear()
        self._read_pos.clear()
        if self._started:
            self.persist()
        self._started = False

    async def _persist_periodically(self) -> None:
        await asyncio.sleep(10)
        while True:
            try:
                self.persist()
            except Exception:
                log.exception("persist %s failed", self.config_file_path())
            await asyncio.sleep(self.store_config.flushDelayOffsetInterval / 1000)

    def on_message_arriving(self, topic: str, queue_id: int, *_args: Any) -> None:
        if topic == SCHEDULE_TOPIC:
            event = self._events.get(queue_id + 1)
            if event is not None:
                event.set()

    def on_message_runs(self, runs: list[tuple]) -> None:
        """``on_message_arriving`` for a read's runs (``RunQueue.summary``)."""
        for run in runs:
            if run[0] == SCHEDULE_TOPIC:
                self.on_message_arriving(run[0], run[1])

    # ---- delivery -----------------------------------------------------------------
    async def _deliver_level(self, level: int) -> None:
        await asyncio.sleep(FIRST_DELAY_S if level == 1 else 0)
        event = self._events[level]
        while True:
            try:
                wait_s = await self._deliver_due(level)
            except Exception:
                log.exception("delivery of delay level %d failed", level)
                wait_s = RETRY_AFTER_FAILURE_S
            if wait_s is None:  # queue exhausted: wait for an arrival
                event.clear()
                if not self._has_more(level):
                    try:
                        await asyncio.wait_for(event.wait(), IDLE_RECHECK_S)
                    except TimeoutError:
                        pass
            else:
                await asyncio.sleep(wait_s)

    def running_stats(self) -> dict[str, str]:
        """``scheduleMessageOffset_<level>``: "delivered offset,max offset" of
        each level's queue (GET_BROKER_RUNTIME_INFO on a master)."""
        store = self.c.message_store
        return {f"scheduleMessageOffset_{level}":
                f"{offset},{store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)}"
                for level, offset in sorted(self.offset_table.items())}

    def _has_more(self, level: int) -> bool:
        store = self.c.message_store
        return self._position(level) < store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)

    def _position(self, level: int) -> int:
        """The next entry to deliver: the saved offset, or past the puts in flight."""
        return self._read_pos.get(level, self.offset_table.get(level, 0))

    def _set_position(self, level: int, offset: int) -> None:
        if level in self._in_flight:
            self._read_pos[level] = offset
        else:
            self.offset_table[level] = offset

    async def _deliver_due(self, level: int) -> float | None:
        """Deliver every due entry of the level; the seconds to wait for the
        next one, or None when the queue has no more entries."""
        store = self.c.message_store
        cq = store._existing_cq(SCHEDULE_TOPIC, level - 1)
        if cq is None:
            return None
        offset = max(self._position(level), cq.get_min_offset_in_queue())
        level_ms = self.delay_table[level]
        in_flight = self._in_flight.get(level)
        while True:
            entry = cq.read_entry(offset)
            if entry is None:
                self._set_position(level, offset)
                return None
            phy, size, deliver_ts = self._deliver_time(cq, level, entry)
            now = _now_ms()
            if deliver_ts > now + level_ms:  # clock moved back: deliver now
                deliver_ts = now
            if deliver_ts > now:
                self._set_position(level, offset)
                return (deliver_ts - now) / 1000
            if in_flight is not None:
                if not self._start_async(level, in_flight, offset, phy, size):
                    self._set_position(level, offset)
                    return RETRY_AFTER_FAILURE_S
            elif not await self._deliver_one(phy, size):
                self.offset_table[level] = offset
                return RETRY_AFTER_FAILURE_S
            offset += 1
            self._set_position(level, offset)

    def _deliver_time(self, cq, level: int, entry: tuple[int, int, int]) -> tuple[int, int, int]:
        """An entry's delivery time: its tags code, read from its ext unit with
        enableConsumeQueueExt; from the record's store time and the level when
        that unit cannot be read (as 4.9.8)."""
        phy, size, tags = entry
        code = cq.resolve_tags(tags)
        if code is None:
            log.error("[BUG] can't find consume queue extend file content!addr=%d, level=%d", tags,
                      level)
            store_ts = self.c.message_store.commit_log.pickup_store_timestamp(phy, size)
            code = store_ts + self.delay_table[level]
        return phy, size, code

    def _start_async(self, level: int, in_flight: deque[_InFlight], offset: int, phy: int,
                     size: int) -> bool:
        """Start one asynchronous re-store; False under flow control or while
        the level is blocked by a head that keeps failing."""
        cfg = self.store_config
        if len(in_flight) > cfg.scheduleAsyncDeliverMaxPendingLimit:
            log.warning("Asynchronous deliver triggers flow control, currentPendingNum=%d, maxPendingLimit=%d",
                        len(in_flight), cfg.scheduleAsyncDeliverMaxPendingLimit)
            return False
        if in_flight and in_flight[0].resends > cfg.scheduleAsyncDeliverMaxResendNum2Blocked:
            log.warning("Asynchronous deliver block: level %d, offset %d failed %d times", level,
                        in_flight[0].offset, in_flight[0].resends)
            return False
        task = asyncio.get_running_loop().create_task(self._deliver_one(phy, size))
        in_flight.append(_InFlight(offset, phy, size, task))
        return True

    async def _handle_put_results(self, level: int) -> None:
        """``HandlePutResultTask``: the level's offset follows the completed
        puts in queue order; a failed one is tried again, a little later each time."""
        in_flight = self._in_flight[level]
        while True:
            if not in_flight:
                await asyncio.sleep(0.01)
                continue
            head = in_flight[0]
            try:
                ok = await asyncio.shield(head.task)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("asynchronous delivery of level %d offset %d failed", level, head.offset)
                ok = False
            if ok:
                in_flight.popleft()
                self.offset_table[level] = head.offset + 1
                continue
            await asyncio.sleep(min(head.resends * 0.1, 60.0))
            head.resends += 1
            log.info("Resend message, level %d offset %d, resend %d", level, head.offset, head.resends)
            head.task = asyncio.get_running_loop().create_task(self._deliver_one(head.phy, head.size))

    async def _deliver_one(self, phy: int, size: int) -> bool:
        """Re-store one parked message under its real topic; True when done
        (also when the message is gone or must be discarded)."""
        store = self.c.message_store
        mv = store.select_one_message_by_offset(phy, size)
        if mv is None:
            log.error("schedule message at %d is gone, skipped", phy)
            return True
        try:
            old = decode_message(mv)
        except ValueError:
            log.error("schedule message at %d is corrupt, skipped", phy)
            return True
        finally:
            mv.release()
        msg = self.time_up(old)
        if msg.topic == TRANS_HALF_TOPIC:
            log.error("[BUG] the real topic of schedule msg is %s, discard the msg", msg.topic)
            return True
        if self.store_config.flushDiskType is FlushDiskType.SYNC_FLUSH or \
                self.store_config.brokerRole is BrokerRole.SYNC_MASTER:
            result = await store.async_put_message(msg)
        else:
            result = store.put_message(msg)
        if result is not None and result.status is PutMessageStatus.PUT_OK:
            stats = getattr(self.c, "stats", None)
            if stats is not None:  # QUEUE_GET_* of the delay level's queue, as 4.9.8
                stats.inc_queue_get(SCHEDULE_CONSUMER_GROUP, SCHEDULE_TOPIC, old.queue_id,
                                    result.append_result.msg_num, result.append_result.wrote_bytes)
            return True
        log.error("ScheduleMessageService, a message time up, but reput it failed, topic: %s "
                  "msgId %s", msg.topic, old.msg_id)
        return False

    @staticmethod
    def time_up(old) -> MessageExtBrokerInner:
        """``messageTimeup``: the parked message back under its real topic."""
        props = dict(old.properties)
        text = message_properties_to_string(props)  # before DELAY goes (4.9.8 quirk)
        props[mc.PROPERTY_WAIT_STORE_MSG_OK] = "false"
        props.pop(mc.PROPERTY_DELAY_TIME_LEVEL, None)
        topic = props.get(mc.PROPERTY_REAL_TOPIC, old.topic)
        try:
            queue_id = int(props.get(mc.PROPERTY_REAL_QUEUE_ID, "0"))
        except ValueError:
            queue_id = 0
        tags = props.get(mc.PROPERTY_TAGS)
        return MessageExtBrokerInner(
            topic, queue_id, old.flag, old.body, props, text,
            mc.tags_string_to_code(tags) if tags else 0, old.sys_flag, old.born_timestamp,
            old.born_host, old.store_host, 0, old.reconsume_times)
