"""TimerMessageStore: timer messages with any delivery time (RocketMQ 5.3.3's
``TimerMessageStore``), files as 5.3.3 keeps them (``layout.py``).

Flow.  The put hook (``hook.py``) parks a timer message in
``rmq_sys_wheel_timer`` queue 0 with TIMER_OUT_MS = its slot.  One asyncio
task of the broker's loop then, over and over:

* enqueues the queue's new entries (woken by their arrival): a message whose
  slot is already delivered is delivered at once (TIMER_ENQUEUE_MS =
  Long.MAX_VALUE, as 5.3.3); any other gets a unit in the timer log, chained
  into its wheel slot (a slot beyond ``timerRollWindowSlot`` gets a "roll"
  unit that re-parks the message when it comes up);
* delivers the slots in order.  A slot's round starts as long before the
  slot's end as its deliveries take (``_lead_ms``), and stores each timer at
  its own due time (``exact_due_ms``: TIMER_DELIVER_MS, or the parked copy's
  store time + TIMER_DELAY_MS/SEC), never after the slot's end, which is when
  5.3.3 delivers it.  So a timer is never early and at most one precision
  late; while a round waits, new timers keep coming into the wheel.

Delivery re-stores the parked message under REAL_TOPIC / REAL_QID with
TIMER_ENQUEUE_MS / TIMER_DEQUEUE_MS (the stored property string keeps
REAL_TOPIC/REAL_QID, generated before they leave the map, as 5.3.3 does).

Exactly once across a kill (5.3.3 rewinds to a checkpoint flushed once a
second and delivers that second again).  Every position lives in mapped files
and is written the moment it changes, so a killed process leaves all of them
in the page cache: the wheel, the log, the checkpoint's read time and queue
offset.  What can still be cut in two is one round (one slot's delivery, or
one enqueue round with at-once deliveries): before a round the checkpoint
gets a marker (the slot, the commit log's end offset C0) and it is cleared
after the round's position is written.  Found active at start, the commit log
from C0 to its end is read and every record the timer stored there (it has
TIMER_DEQUEUE_MS) is counted by (UNIQ_KEY, TIMER_OUT_MS, bornTimestamp, body
CRC); the interrupted round is done again and skips as many matching timers
as were counted.  The enqueue position is the larger of the checkpoint's and
the last unit in the timer log + 1, so no unit is appended twice either.  A
failed put leaves the marker as a kill does and is handled the same way.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import Counter
from typing import Any

from rmq.common import message as mc
from rmq.common import timer as tm
from rmq.common.config_manager import write_file_safely
from rmq.store.message import MessageExtBrokerInner
from rmq.store.message_codec import message_properties_to_string
from rmq.store.results import PutMessageStatus
from rmq.store.single_put import put_single
from rmq.store.timer import layout as L
from rmq.store.timer import revise
from rmq.store.timer.checkpoint import TimerCheckpoint
from rmq.store.timer.hook import TimerPutHook, parse_java_long
from rmq.store.timer.metrics import TimerMetrics
from rmq.store.timer.parked import Parked, read_parked
from rmq.store.timer.timer_log import TimerLog
from rmq.store.timer.wheel import IGNORE, TimerWheel

log = logging.getLogger("store")

ENQUEUE_BATCH = 1024  # queue entries per enqueue round
YIELD_EVERY = 512  # deliveries between two yields to the loop
RETRY_AFTER_FAILURE_S = 0.1
_NO_RETRY = (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
             PutMessageStatus.WHEEL_TIMER_NOT_ENABLE, PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL)
ENQUEUE_ROUND = -1  # marker read time of an enqueue round


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def timer_log_path(root: str) -> str:
    return os.path.join(root, "timerlog")


def timer_wheel_path(root: str) -> str:
    return os.path.join(root, "timerwheel")


def timer_check_path(root: str) -> str:
    return os.path.join(root, "config", "timercheck")


def timer_metrics_path(root: str) -> str:
    return os.path.join(root, "config", "timermetrics")


def identity(msg: Any) -> tuple:
    """What tells one timer's delivery from another's in the commit log."""
    p = msg.properties
    return (p.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), p.get(tm.PROPERTY_TIMER_OUT_MS),
            msg.born_timestamp, msg.body_crc)


class TimerMessageStore:
    """The timer wheel of one broker, on top of its DefaultMessageStore."""

    TOPIC = L.TIMER_TOPIC

    def __init__(self, store: Any, config: Any) -> None:
        self.store = store
        self.config = config
        root = config.storePathRootDir
        self.precision = config.timer_precision_ms()
        self.wheel = TimerWheel(timer_wheel_path(root), self.precision)
        self.log = TimerLog(timer_log_path(root), config.mappedFileSizeTimerLog)
        self.cp = TimerCheckpoint(timer_check_path(root))
        self.metrics = TimerMetrics(timer_metrics_path(root))
        window = config.timerRollWindowSlot
        limit = L.SLOTS_TOTAL - L.TIMER_BLANK_SLOTS
        self.roll_window_slots = limit if window > limit or window < 2 else window
        self.queue_offset = 0
        self.read_ms = 0  # first slot whose delivery has not started
        self.skip: Counter = Counter()
        self._last_unit_pos = -1
        self._skip_round: int | None = None  # the round the skip counts belong to
        self._wake = asyncio.Event()
        self._in_enqueue = False
        self._task: asyncio.Task | None = None
        self._flush_task: asyncio.Task | None = None
        self._started = False
        # counters for metrics (monotonic, per real topic)
        self.enqueue_totals: Counter = Counter()
        self.dequeue_totals: Counter = Counter()
        self._tps_mark = (time.monotonic(), 0, 0)
        self._revised = False  # the counts were rebuilt from the log at load
        store.put_message_hooks.append(TimerPutHook(config, self.wheel))

    # ---- load / recover -------------------------------------------------------------
    def load(self) -> bool:
        ok = self.log.load()
        try:
            self.metrics.load()
        except Exception:
            log.exception("load %s failed", self.metrics.config_file_path())
        self.recover()
        if not getattr(self.store, "last_exit_ok", True):
            self.revise_metrics()
        return ok

    def revise_metrics(self) -> None:
        """After an abnormal exit: the pending timers per topic counted again
        from the log (``revise.py``); the timers of a delivery round cut short
        are counted here and uncounted as their redelivery is skipped."""
        def topic_of(offset_py: int, size_py: int) -> str | None:
            msg = read_parked(self.store, offset_py, size_py, with_body=False)
            return None if msg is None else msg.properties.get(mc.PROPERTY_REAL_TOPIC)

        before = {t: c for t, (c, _ts) in self.metrics.timing_count.items()}
        counts = revise.recount(revise.pending_units(self.log.mfq.mapped_files, self.read_ms),
                                before, topic_of)
        self._revised = True
        now = now_ms()
        for topic in set(before) | set(counts):
            entry = self.metrics.timing_count.setdefault(topic, [0, now])
            entry[0] = counts.get(topic, 0)
        if counts != {t: c for t, c in before.items() if c}:
            log.info("timer metrics revised after an abnormal exit: %s -> %s", before,
                     dict(counts))

    def recover(self) -> None:
        """Rebuild the wheel's tail from the log, find the enqueue position and
        the first undelivered slot, and arm the skip counts of an interrupted round."""
        files = self.log.mfq.mapped_files
        begin = self.cp.last_timer_log_flush_pos - (self.log.file_size if files else 0)
        end = self._recover_and_revise(max(begin, 0))
        last = self._last_unit_queue_offset()
        self.queue_offset = max(self.cp.last_timer_queue_offset, last + 1 if last is not None else 0)
        cq = self.store._existing_cq(L.TIMER_TOPIC, 0)
        if cq is not None:
            self.queue_offset = min(max(self.queue_offset, cq.get_min_offset_in_queue()),
                                    cq.get_max_offset_in_queue())
        floor = now_ms() // self.precision * self.precision - \
            (L.SLOTS_TOTAL - L.TIMER_BLANK_SLOTS) * self.precision
        fresh = self.cp.last_read_time_ms == 0  # a new store starts at the clock
        self.read_ms = now_ms() // self.precision * self.precision if fresh else \
            max(self.cp.last_read_time_ms, floor)
        self.cp.set_read_time(self.read_ms)
        self.cp.set_queue_offset(self.queue_offset)
        marker = self.cp.marker()
        if marker.active:
            self.skip = self._delivered_since(marker.phy_offset)
            self._skip_round = marker.read_time_ms
            log.info("timer round %d was cut short: %d deliveries since %d are skipped",
                     marker.read_time_ms, sum(self.skip.values()), marker.phy_offset)
        log.info("Timer recover ok currReadTimerMs:%d currQueueOffset:%d processOffset:%d",
                 self.read_ms, self.queue_offset, end)

    def _recover_and_revise(self, begin: int) -> int:
        """Walk the log's units from the file holding ``begin`` to the first
        invalid one, pointing their slots at them; the log ends there."""
        files = self.log.mfq.mapped_files
        self._last_unit_pos = -1
        if not files:
            return 0
        idx = len(files) - 1
        while idx > 0 and files[idx].file_from_offset > begin:
            idx -= 1
        end = files[idx].file_from_offset
        for mf in files[idx:]:
            pos, stop = 0, False
            view = mf.view
            while pos + L.UNIT_SIZE <= mf.file_size:
                size = int.from_bytes(view[pos:pos + 4], "big", signed=True)
                magic = int.from_bytes(view[pos + 12:pos + 16], "big", signed=True)
                if magic == L.BLANK_MAGIC_CODE:
                    break
                if size != L.UNIT_SIZE or not L.is_magic_ok(magic) or magic == 0:
                    stop = True
                    break
                u = L.unpack_unit(view, pos)
                self.wheel.revise_slot(u.delayed_time_ms, IGNORE, mf.file_from_offset + pos, True)
                self._last_unit_pos = mf.file_from_offset + pos
                pos += L.UNIT_SIZE
            end = mf.file_from_offset + pos
            if stop:
                break
        self.log.mfq.truncate_dirty_files(end)
        return end

    def _last_unit_queue_offset(self) -> int | None:
        """Queue offset of the parked message behind the log's last unit."""
        if self._last_unit_pos < 0:
            return None
        u = self.log.read_unit(self._last_unit_pos)
        if u is None or u.size != L.UNIT_SIZE:
            return None
        msg = read_parked(self.store, u.offset_py, u.size_py, with_body=False)
        if msg is None or msg.topic != L.TIMER_TOPIC:
            return None
        return msg.queue_offset

    def _delivered_since(self, phy: int) -> Counter:
        """Identities of the timer deliveries stored from ``phy`` on."""
        store = self.store
        file_size = self.config.mappedFileSizeCommitLog
        end = store.get_max_phy_offset()
        seen: Counter = Counter()
        off = max(phy, store.get_min_phy_offset())
        while off < end:
            msg = read_parked(store, off, None, with_body=False)
            if msg is None or msg.store_size <= 0:  # the blank ending a file
                off = (off // file_size + 1) * file_size
                continue
            if tm.PROPERTY_TIMER_DEQUEUE_MS in msg.properties:
                seen[identity(msg)] += 1
            off += msg.store_size
        return seen

    # ---- life cycle ---------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name="timer-wheel")
        self._flush_task = loop.create_task(self._flush_periodically(), name="timer-flush")

    async def shutdown(self) -> None:
        for task in (self._task, self._flush_task):
            if task is not None:
                task.cancel()
        await asyncio.gather(*(t for t in (self._task, self._flush_task) if t is not None),
                             return_exceptions=True)
        self._task = self._flush_task = None
        if self._started:
            self.flush()
        self._started = False

    def close(self) -> None:
        """Unmap everything (after shutdown)."""
        self.flush()
        self.log.shutdown()
        self.wheel.close()
        self.cp.close()

    def flush(self) -> None:
        self.log.flush()
        self.wheel.flush()
        self.cp.last_timer_log_flush_pos = self.log.mfq.flushed_where
        self.cp.next_version()
        self.cp.flush()
        try:
            write_file_safely(self.metrics.encode(), self.metrics.config_file_path())
        except OSError:
            log.exception("persist %s failed", self.metrics.config_file_path())

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.config.timerFlushIntervalMs / 1000)
            try:
                metrics = self.metrics.encode()  # on the loop, which changes the counts
                await asyncio.get_running_loop().run_in_executor(None, self._flush_files, metrics)
                self.cp.last_timer_log_flush_pos = self.log.mfq.flushed_where
                self.cp.next_version()
                self.cp.write()
            except Exception:
                log.exception("timer flush failed")

    def _flush_files(self, metrics: str) -> None:
        """The syncs and the metrics file, off the loop."""
        self.log.flush()
        self.wheel.flush()
        self.cp.mm.flush()
        try:
            write_file_safely(metrics, self.metrics.config_file_path())
        except OSError as exc:
            log.error("persist file %s exception: %s", self.metrics.config_file_path(), exc)

    def on_message_arriving(self, topic: str, *_args: Any) -> None:
        if topic == L.TIMER_TOPIC:
            self._wake.set()

    def on_message_runs(self, runs: list[tuple]) -> None:
        """``on_message_arriving`` for a read's runs (``RunQueue.summary``)."""
        for run in runs:
            if run[0] == L.TIMER_TOPIC:
                self._wake.set()

    # ---- the task -----------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            try:
                self._wake.clear()
                busy = False
                if not self.config.timerStopEnqueue:
                    self._in_enqueue = True
                    try:
                        busy = await self._enqueue_round() >= ENQUEUE_BATCH
                    finally:
                        self._in_enqueue = False
                if not self.config.timerStopDequeue:
                    await self._deliver_due()
                if busy:
                    await asyncio.sleep(0)
                    continue
                wait = (self._next_start_ms() - now_ms()) / 1000
                if wait > 0:
                    try:
                        await asyncio.wait_for(self._wake.wait(), min(wait, 1.0))
                    except TimeoutError:
                        pass
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("timer wheel round failed")
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)

    def _begin_round(self, read_time_ms: int) -> None:
        m = self.cp.marker()
        if m.active and (m.read_time_ms == read_time_ms or read_time_ms == ENQUEUE_ROUND):
            return  # the same round again, or an enqueue inside a slot's round: keep its C0
        self.cp.set_marker(L.Marker(True, read_time_ms, self.store.get_max_phy_offset()))

    def _end_round(self, read_time_ms: int) -> None:
        m = self.cp.marker()
        if not (read_time_ms == ENQUEUE_ROUND and m.active and m.read_time_ms != ENQUEUE_ROUND):
            self.cp.set_marker(L.Marker(False, -1, -1))  # (a slot's marker stays for its round)
        if self._skip_round == read_time_ms:
            self.skip.clear()
            self._skip_round = None

    def _skip_counted(self, msg: Any) -> bool:
        """True (and one count used) when this timer was delivered before a cut."""
        if not self.skip:
            return False
        key = identity(msg)
        if self.skip[key] > 0:
            self.skip[key] -= 1
            return True
        return False

    # ---- enqueue ------------------------------------------------------------------------
    async def _enqueue_round(self) -> int:
        """Take up to ENQUEUE_BATCH new entries of the timer queue; how many."""
        cq = self.store._existing_cq(L.TIMER_TOPIC, 0)
        if cq is None:
            return 0
        off = max(self.queue_offset, cq.get_min_offset_in_queue())
        n = 0
        marked = False
        while n < ENQUEUE_BATCH:
            entry = cq.read_entry(off)
            if entry is None:
                break
            phy, size, _tags = entry
            msg = read_parked(self.store, phy, size, with_body=False)
            if msg is not None:
                due = parse_java_long(msg.properties.get(tm.PROPERTY_TIMER_OUT_MS))
                if due is None:
                    log.warning("timer message at %d has no TIMER_OUT_MS, skipped", phy)
                elif due < self.read_ms:  # its slot is gone: deliver now
                    if not marked:
                        self._begin_round(ENQUEUE_ROUND)
                        marked = True
                    full = read_parked(self.store, phy, size)
                    if full is not None and (exact := self.exact_due_ms(full, due)) > now_ms():
                        await self._until(exact)  # its slot's round started before it is due
                    if not self._skip_counted(msg) and \
                            self._put(full, tm.JAVA_LONG_MAX, False) is None:
                        self._end_round(ENQUEUE_ROUND)  # the entry is taken again later
                        return n
                elif not self._do_enqueue(phy, size, due, msg):
                    break  # no room for its unit or its slot: the entry is taken again later
            off += 1
            n += 1
            self.queue_offset = off
            self.cp.set_queue_offset(off)
        if marked or (self._skip_round == ENQUEUE_ROUND and n > 0):
            self._end_round(ENQUEUE_ROUND)
        return n

    def _do_enqueue(self, phy: int, size: int, due: int, msg: Any) -> bool:
        p = self.precision
        write = now_ms() // p * p
        window = self.roll_window_slots
        magic = L.MAGIC_DEFAULT
        if due - write >= window * p:
            magic |= L.MAGIC_ROLL
            if due - write - window * p < window // 3 * p:
                due = write + (window // 2) * p
            else:
                due = write + window * p
        delete = tm.PROPERTY_TIMER_DEL_UNIQKEY in msg.properties
        if delete:
            magic |= L.MAGIC_DELETE
        real_topic = msg.properties.get(mc.PROPERTY_REAL_TOPIC)
        if not self.wheel.reserve_slot(due):  # (before the unit: never one without its slot)
            return False
        slot = self.wheel.get_slot(due)
        unit = L.pack_unit(L.Unit(L.UNIT_SIZE, slot.last_pos, magic, write, due - write, phy, size,
                                  L.java_string_hash(real_topic), 0))
        pos = self.log.append(unit)
        if pos < 0:
            return False
        self.wheel.put_slot(due, pos if slot.first_pos == -1 else slot.first_pos, pos,
                            slot.num - 1 if delete else slot.num + 1, slot.magic)
        self.metrics.add(real_topic, -1 if delete else 1)
        self.enqueue_totals[real_topic or ""] += 1
        return True

    # ---- dequeue ------------------------------------------------------------------------
    def _lead_ms(self, slot: L.Slot) -> int:
        """How long before its end a slot's round starts: about the time
        its deliveries take (each waits for its own due time), at most the slot."""
        return min(self.precision, 2 + max(slot.num, 0) // 10)

    def _next_start_ms(self) -> int:
        """When the next round can start (the first undelivered slot's)."""
        s = self.read_ms
        slot = self.wheel.get_slot(s)
        end = s + self.precision
        return end if slot.time_ms == -1 else end - self._lead_ms(slot)

    def exact_due_ms(self, m: Parked, s: int) -> int:
        """When a timer of slot ``s`` may be stored under its real topic: its
        TIMER_DELIVER_MS, or its parked copy's store time plus TIMER_DELAY_MS /
        TIMER_DELAY_SEC (the broker's clock read when it was parked, never
        earlier), at most the slot's end (5.3.3's delivery time)."""
        end = s + self.precision
        p = m.properties
        due = parse_java_long(p.get(tm.PROPERTY_TIMER_DELIVER_MS))
        if due is None:
            delay = parse_java_long(p.get(tm.PROPERTY_TIMER_DELAY_MS))
            if delay is None:
                sec = parse_java_long(p.get(tm.PROPERTY_TIMER_DELAY_SEC))
                delay = sec * 1000 if sec is not None else None
            # a rolled copy was stored later: only its slot's end is safe
            rolled = tm.PROPERTY_TIMER_ROLL_TIMES in p
            due = m.store_timestamp + delay if delay is not None and not rolled else end
        return min(due, end)

    async def _until(self, due: int) -> None:
        """Wait until the clock reaches ``due`` (ms), taking new timers into
        the wheel meanwhile (a round waiting inside a slot must not hold up
        the enqueue of timers due soon after)."""
        while (left := due - now_ms()) > 0:
            if self._in_enqueue:
                await asyncio.sleep(left / 1000)
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), left / 1000)
            except TimeoutError:
                continue
            self._wake.clear()
            self._in_enqueue = True
            try:
                await self._enqueue_round()
            finally:
                self._in_enqueue = False

    async def _deliver_due(self) -> None:
        empty = 0
        while self._next_start_ms() <= now_ms():
            s = self.read_ms
            slot = self.wheel.get_slot(s)
            if slot.time_ms == -1:
                self.read_ms = s + self.precision
                if self._skip_round == s:
                    self._end_round(s)
                empty += 1
                if empty % 4096 == 0:  # a long catch-up after downtime: let the loop breathe
                    self.cp.set_read_time(self.read_ms)
                    await asyncio.sleep(0)
                continue
            self.cp.set_read_time(self.read_ms)
            if not await self._deliver_slot(s, slot):
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)
                return
        self.cp.set_read_time(self.read_ms)

    def _slot_units(self, slot: L.Slot) -> list[L.Unit]:
        """The slot's units, oldest first (the chain runs backwards)."""
        units: list[L.Unit] = []
        pos = slot.last_pos
        while pos != -1:
            u = self.log.read_unit(pos)
            if u is None or u.size != L.UNIT_SIZE:
                break
            units.append(u)
            if u.prev_pos >= pos:  # a chain only runs backwards
                break
            pos = u.prev_pos
        units.reverse()
        return units

    async def _deliver_slot(self, s: int, slot: L.Slot) -> bool:
        """Deliver slot ``s``; False when a put failed (tried again later)."""
        self._begin_round(s)
        self.read_ms = s + self.precision  # timers parked for s from now on go at once
        units = self._slot_units(slot)
        deleted: set[str] = set()
        normal: list[tuple[L.Unit, Any]] = []
        for u in units:
            msg = read_parked(self.store, u.offset_py, u.size_py)
            if msg is None:
                continue
            if L.is_delete(u.magic) and not L.is_roll(u.magic):
                key = msg.properties.get(tm.PROPERTY_TIMER_DEL_UNIQKEY)
                if key:
                    deleted.add(key)
            else:
                normal.append((u, msg))
        if any(not L.is_roll(u.magic) for u, _m in normal):
            normal.sort(key=lambda um: s if L.is_roll(um[0].magic) else self.exact_due_ms(um[1], s))
        done = 0
        for u, msg in normal:
            if not L.is_roll(u.magic):
                due = self.exact_due_ms(msg, s)
                if due > now_ms():
                    await self._until(due)
            props = msg.properties
            uniq = props.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if uniq and deleted and tm.build_delete_key(props.get(mc.PROPERTY_REAL_TOPIC, ""), uniq) in deleted:
                self.metrics.add(props.get(mc.PROPERTY_REAL_TOPIC), -1)
                continue
            if self._skip_counted(msg):
                if self._revised:  # counted again by revise_metrics: delivered before
                    self.metrics.add(props.get(mc.PROPERTY_REAL_TOPIC), -1)
                continue
            if self._put(msg, u.write_time_ms, L.is_roll(u.magic)) is None:
                self.read_ms = s
                self.skip = self._delivered_since(self.cp.marker().phy_offset)
                self._skip_round = s
                return False
            done += 1
            if done % YIELD_EVERY == 0:
                await asyncio.sleep(0)
        self.cp.set_read_time(s + self.precision)
        self._end_round(s)
        return True

    def _put(self, msg: Parked | None, enqueue_ms: int, roll: bool) -> PutMessageStatus | None:
        """Store the timer's message (its real topic, or the timer topic again
        when rolled); the status, None when the put must be tried again."""
        if msg is None:  # gone from the commit log: nothing to deliver
            return PutMessageStatus.MESSAGE_ILLEGAL
        topic, queue_id, props, text = self.convert(msg, enqueue_ms, roll)
        status = self._store_delivery(msg, topic, queue_id, props, text)
        real_topic = msg.properties.get(mc.PROPERTY_REAL_TOPIC)
        if status is PutMessageStatus.PUT_OK:
            if enqueue_ms != tm.JAVA_LONG_MAX:
                self.metrics.add(real_topic, -1)
            if not roll:
                self.dequeue_totals[topic] += 1
            return status
        if status in _NO_RETRY or self.config.timerSkipUnknownError:
            log.warning("Skipping message due to unrecoverable error %s, topic %s", status.name, topic)
            return status
        log.error("timer delivery of %s failed: %s", topic, status.name)
        return None

    def _store_delivery(self, m: Parked, topic: str, queue_id: int, props: dict[str, str],
                        text: str) -> PutMessageStatus:
        """The store's single-put fast path when it takes the message (an
        ordinary one, for a queue that exists), else the general put."""
        tags = props.get(mc.PROPERTY_TAGS)
        tags_code = mc.tags_string_to_code(tags) if tags else 0
        store = self.store
        if m.sys_flag & mc.TRANSACTION_ROLLBACK_TYPE == mc.TRANSACTION_NOT_TYPE and \
                mc.PROPERTY_INNER_MULTI_DISPATCH not in props and topic.isascii():
            r = put_single(store, topic, topic.encode(), queue_id, m.flag, m.body,
                           props.get(mc.PROPERTY_KEYS),
                           props.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), text, tags_code,
                           m.sys_flag, m.born_timestamp, m.born_host_field, m.reconsume_times)
            if r is not None:
                return PutMessageStatus.PUT_OK
        v6 = len(m.born_host_field) == 20
        born = (socket.inet_ntop(socket.AF_INET6 if v6 else socket.AF_INET,
                                 m.born_host_field[:-4]),
                int.from_bytes(m.born_host_field[-4:], "big"))
        inner = MessageExtBrokerInner(topic, queue_id, m.flag, m.body, props, text, tags_code,
                                      m.sys_flag, m.born_timestamp, born, store.store_host, 0,
                                      m.reconsume_times)
        result = store.put_message(inner)
        return result.status if result is not None else PutMessageStatus.UNKNOWN_ERROR

    @staticmethod
    def convert(msg: Any, enqueue_ms: int, roll: bool) -> tuple[str, int, dict[str, str], str]:
        """``convert`` + ``convertMessage`` of 5.3.3: (topic, queue id,
        property map, stored property string) of the delivery."""
        props = dict(msg.properties)
        if enqueue_ms != -1:
            props[tm.PROPERTY_TIMER_ENQUEUE_MS] = str(enqueue_ms)
        if roll:
            times = parse_java_long(props.get(tm.PROPERTY_TIMER_ROLL_TIMES)) or 0
            props[tm.PROPERTY_TIMER_ROLL_TIMES] = str(times + 1)
        props[tm.PROPERTY_TIMER_DEQUEUE_MS] = str(now_ms())
        text = message_properties_to_string(props)  # before REAL_* leave the map (5.3.3)
        if roll:
            topic, queue_id = msg.topic, msg.queue_id
        else:
            topic = props.pop(mc.PROPERTY_REAL_TOPIC, msg.topic)
            queue_id = parse_java_long(props.pop(mc.PROPERTY_REAL_QUEUE_ID, "0")) or 0
        props[mc.PROPERTY_WAIT_STORE_MSG_OK] = "false"
        return topic, queue_id, props, text

    # ---- figures --------------------------------------------------------------------------
    def backlog(self) -> int:
        """Queue entries not yet taken into the wheel."""
        cq = self.store._existing_cq(L.TIMER_TOPIC, 0)
        return 0 if cq is None else max(0, cq.get_max_offset_in_queue() - self.queue_offset)

    def dequeue_behind_ms(self) -> int:
        """How far the delivery is behind the clock (``getDequeueBehindMillis``)."""
        return max(0, now_ms() - (self.read_ms + self.precision))

    def congest_num(self, time_ms: int) -> int:
        return self.wheel.get_num(time_ms)

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO's timer keys (5.3.3): seconds delivery is
        behind, entries not yet in the wheel, timers pending in the wheel (from
        the per-topic counts), and the enqueue/dequeue rates since the last ask."""
        now = time.monotonic()
        enq, deq = sum(self.enqueue_totals.values()), sum(self.dequeue_totals.values())
        last_t, last_enq, last_deq = self._tps_mark
        span = max(now - last_t, 1e-3)
        self._tps_mark = (now, enq, deq)
        return {"timerReadBehind": str(self.dequeue_behind_ms() // 1000),
                "timerOffsetBehind": str(self.backlog()),
                "timerCongestNum": str(sum(c for c, _ts in self.metrics.timing_count.values())),
                "timerEnqueueTps": f"{(enq - last_enq) / span:.1f}",
                "timerDequeueTps": f"{(deq - last_deq) / span:.1f}"}

    def enqueue_latency_ms(self) -> int:
        """Age of the oldest parked message not yet in the wheel (0 when none)."""
        cq = self.store._existing_cq(L.TIMER_TOPIC, 0)
        entry = cq.read_entry(self.queue_offset) if cq is not None else None
        if entry is None:
            return 0
        msg = self.store.look_message_by_offset(entry[0])
        return max(0, now_ms() - msg.store_timestamp) if msg is not None else 0

    def dequeue_behind_messages(self, max_slots: int = 10_000) -> int:
        """Timers in slots already due but not delivered (at most ``max_slots`` looked at)."""
        total, t, end = 0, self.read_ms, now_ms() - self.precision
        while t <= end and max_slots > 0:
            total += max(0, self.wheel.get_num(t))
            t += self.precision
            max_slots -= 1
        return total
