"""``PushConsumer`` (``DefaultMQPushConsumer``): long-polling pulls per owned
queue, flow control, concurrent or orderly listeners, retries through
CONSUMER_SEND_MSG_BACK, periodic offset commits.

Listeners may be plain functions (called inline on the event loop: the fast
path, keep them short) or coroutine functions (run as tasks, at most
``consume_concurrently_max`` at once).  They receive ``(messages, context)``
and return a ``ConsumeStatus`` (or ``ConsumeOrderlyStatus`` when orderly).
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rmq.client import headers as h
from rmq.client.allocate import AllocateStrategy
from rmq.client.config import ClientConfig, ConsumerConfig
from rmq.client.consumer_base import ConsumerBase
from rmq.client.exceptions import MQBrokerError
from rmq.client.instance import MQClientInstance
from rmq.client.message import MessageExt, MessageQueue, PullStatus
from rmq.client.process_queue import ProcessQueue
from rmq.client.producer import Producer
from rmq.client.trace import AsyncTraceDispatcher, trace_producer_settings, traced_listener
from rmq.common.codes import ResponseCode
from rmq.common.java import CURRENT_VERSION_DESC
from rmq.common.message import PROPERTY_RETRY_TOPIC
from rmq.common.topics import retry_topic

log = logging.getLogger("rmq.client")
PULL_DELAY_ON_ERROR = 3.0
# pull answers of a broker that does not know the group (it restarted): heartbeat at once
_GROUP_UNKNOWN = (ResponseCode.SUBSCRIPTION_NOT_EXIST, ResponseCode.SUBSCRIPTION_NOT_LATEST)
LOCK_STALE_SECONDS = 30.0


class ConsumeStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass(slots=True)
class ConsumeContext:
    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0  # 0: broker decides (3 + reconsume times)
    suspend_millis: int = -1  # orderly: -1 = the consumer's default


Listener = Callable[[list[MessageExt], ConsumeContext], object]


class PushConsumer(ConsumerBase):
    """Subscribe, register a listener, ``await start()``; ``await shutdown()``
    commits offsets and leaves the group."""

    def __init__(self, group: str, namesrv_addr: str | None = None,
                 listener: Listener | None = None, orderly: bool = False,
                 config: ConsumerConfig | None = None, client_config: ClientConfig | None = None,
                 instance: MQClientInstance | None = None,
                 allocate: AllocateStrategy | None = None) -> None:
        super().__init__(group, namesrv_addr, config, client_config, instance, allocate)
        self.listener = listener
        self.orderly = orderly
        self.pqs: dict[MessageQueue, ProcessQueue] = {}
        self._pull_tasks: dict[MessageQueue, asyncio.Task] = {}
        self._consume_tasks: set[asyncio.Task] = set()
        self._sem: asyncio.Semaphore | None = None
        self._lock_task: asyncio.Task | None = None
        self._running = False
        self._rebalance_lock = asyncio.Lock()
        self.stats = {"ok": 0, "failed": 0, "pulls": 0}
        self._retry_topic = retry_topic(group)
        self.tracer: AsyncTraceDispatcher | None = None

    def register_listener(self, listener: Listener, orderly: bool = False) -> None:
        self.listener = listener
        self.orderly = orderly

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.shutdown()

    async def start(self) -> None:
        if self.listener is None:
            raise ValueError("register a listener before start()")
        if not self.subscriptions:
            raise ValueError("subscribe to at least one topic before start()")
        if self.config.enable_msg_trace and self.tracer is None:
            await self._start_trace()
        self._is_async = inspect.iscoroutinefunction(self.listener)
        self._sem = asyncio.Semaphore(self.config.consume_concurrently_max)
        self._running = True
        await self._start_base()
        if self.orderly and self.clustering:
            self._lock_task = asyncio.get_running_loop().create_task(self._lock_service())
        await self.do_rebalance()

    async def _start_trace(self) -> None:
        """SubBefore / SubAfter records around every listener call."""
        name, pcfg, ccfg = trace_producer_settings(self.group, "CONSUMER", self.instance.config)
        self.tracer = AsyncTraceDispatcher(Producer(name, config=pcfg, client_config=ccfg),
                                           self.config.customized_trace_topic)
        await self.tracer.start()
        ok = (ConsumeOrderlyStatus.SUCCESS,) if self.orderly \
            else (ConsumeStatus.CONSUME_SUCCESS,)
        self.listener = traced_listener(self.listener, self.tracer, self.group, ok,
                                        self.config.consume_timeout * 60_000)

    async def shutdown(self) -> None:
        """Stop pulling, let running listeners finish (bounded), commit offsets
        synchronously, unlock orderly queues, unregister and close."""
        self._running = False
        if self._lock_task is not None:
            self._lock_task.cancel()
        for t in list(self._pull_tasks.values()):
            t.cancel()
        await asyncio.gather(*self._pull_tasks.values(), return_exceptions=True)
        if self._consume_tasks:
            await asyncio.wait(list(self._consume_tasks), timeout=10)
        await self.persist_offsets(oneway=False)
        if self.orderly and self.clustering:
            await self._unlock(list(self.pqs), oneway=False)
        for pq in self.pqs.values():
            pq.dropped = True
        if self.tracer is not None:
            await self.tracer.shutdown()
            self.tracer = None
        self.instance.consumers.pop(self.group, None)
        if self._own_instance:
            await self.instance.shutdown()
        else:
            await self.instance.unregister_all()

    def owned_queues(self) -> list[MessageQueue]:
        return list(self.pqs)

    # --- rebalance ------------------------------------------------------------
    async def do_rebalance(self) -> None:
        if not self._running:
            return
        async with self._rebalance_lock:
            for topic in list(self.subscriptions):
                try:
                    mine = await self.allocated_queues(topic)
                except Exception as e:
                    log.info("rebalance of %s/%s skipped: %s", self.group, topic, e)
                    continue
                if mine is not None:
                    await self._update_process_queues(topic, set(mine))

    async def _update_process_queues(self, topic: str, mine: set[MessageQueue]) -> None:
        gone = [mq for mq in self.pqs if mq.topic == topic and mq not in mine]
        for mq in gone:
            await self._drop(mq)
        if gone and self.orderly and self.clustering:
            await self._unlock(gone, oneway=True)
        new = sorted(mq for mq in mine if mq not in self.pqs)
        if new and self.orderly and self.clustering:
            locked = await self._lock(new)
            new = [mq for mq in new if mq in locked]
        for mq in new:
            offset = await self.compute_pull_from_where(mq)
            if offset < 0:
                continue
            pq = ProcessQueue()
            if self.orderly and self.clustering:
                pq.locked, pq.last_lock_ts = True, time.monotonic()
            self.pqs[mq] = pq
            self.offset_store.update(mq, offset)
            self._pull_tasks[mq] = asyncio.get_running_loop().create_task(
                self._pull_loop(mq, pq, offset))
            log.info("%s now consumes %s from offset %d", self.group, mq, offset)

    async def _drop(self, mq: MessageQueue) -> None:
        pq = self.pqs.pop(mq, None)
        if pq is None:
            return
        pq.dropped = True
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
        await self.offset_store.persist(mq)
        self.offset_store.remove(mq)

    # --- orderly locks --------------------------------------------------------------
    async def _lock(self, mqs: list[MessageQueue]) -> set[MessageQueue]:
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        locked: set[MessageQueue] = set()
        for name, group_mqs in by_broker.items():
            addr = self.instance.find_broker_addr(name, only_this=True)
            if addr is None:
                continue
            try:
                locked |= await self.instance.api.lock_batch(addr, self.group,
                                                             self.instance.client_id, group_mqs)
            except Exception as e:
                log.info("lock of %s on %s failed: %s", group_mqs, name, e)
        return locked

    async def _unlock(self, mqs: list[MessageQueue], oneway: bool) -> None:
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for name, group_mqs in by_broker.items():
            addr = self.instance.find_broker_addr(name, only_this=True)
            if addr is None:
                continue
            try:
                await self.instance.api.unlock_batch(addr, self.group, self.instance.client_id,
                                                     group_mqs, oneway)
            except Exception as e:
                log.info("unlock of %s failed: %s", group_mqs, e)

    async def _lock_service(self) -> None:
        """Renew broker locks of owned queues every ``lock_interval``."""
        while True:
            await asyncio.sleep(self.config.lock_interval / 1000)
            mqs = list(self.pqs)
            if not mqs:
                continue
            locked = await self._lock(mqs)
            now = time.monotonic()
            for mq in mqs:
                pq = self.pqs.get(mq)
                if pq is not None:
                    pq.locked = mq in locked
                    if pq.locked:
                        pq.last_lock_ts = now

    # --- pulling ---------------------------------------------------------------
    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        cfg = self.config
        sub = self.subscriptions[mq.topic]
        api = self.instance.api
        suspend = cfg.broker_suspend_max_time_millis
        timeout = cfg.consumer_timeout_millis_when_suspend
        size_limit = cfg.pull_threshold_size_for_queue * 1024 * 1024
        broker_id = 0
        while self._running and not pq.dropped:
            if pq.count >= cfg.pull_threshold_for_queue or pq.msg_size >= size_limit:
                await asyncio.sleep(0.05)  # flow control: the listener is behind
                continue
            if self.orderly and self.clustering and not pq.locked:
                await asyncio.sleep(PULL_DELAY_ON_ERROR)
                continue
            addr = self.instance.find_broker_addr(mq.broker_name, broker_id)
            if addr is None:
                await self.instance.update_route(mq.topic)
                await asyncio.sleep(PULL_DELAY_ON_ERROR)
                continue
            sys_flag = h.PULL_FLAG_SUSPEND
            commit = 0
            if self.clustering and broker_id == 0:
                commit = self.offset_store.table.get(mq, 0)
                if commit > 0:
                    sys_flag |= h.PULL_FLAG_COMMIT_OFFSET
            subscription = None
            if cfg.post_subscription_when_pull:
                sys_flag |= h.PULL_FLAG_SUBSCRIPTION
                subscription = sub.sub_string
            ext = h.pull_header(self.group, mq.topic, mq.queue_id, offset, cfg.pull_batch_size,
                                sys_flag, commit, suspend, subscription, sub.sub_version,
                                sub.expression_type, mq.broker_name)
            try:
                result = await api.pull(addr, ext, timeout, mq.broker_name)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if self._running and not pq.dropped:
                    log.info("pull %s from %s failed: %s", mq, addr, e)
                    if isinstance(e, MQBrokerError) and e.code in _GROUP_UNKNOWN:
                        self.instance.heartbeat_soon()  # a restarted broker: register again
                    await asyncio.sleep(PULL_DELAY_ON_ERROR)
                continue
            self.stats["pulls"] += 1
            pq.last_pull_ts = time.monotonic()
            broker_id = result.suggest_which_broker_id
            if pq.dropped:
                return
            status = result.status
            if status is PullStatus.FOUND:
                offset = result.next_begin_offset
                msgs = result.messages
                if sub.tags_set:
                    msgs = [m for m in msgs if sub.matches_tag(m.properties.get("TAGS"))]
                if msgs:
                    pq.put(msgs)
                    await self._dispatch(msgs, mq, pq)
                elif not pq.count:
                    self.offset_store.update(mq, offset, True)
            elif status is PullStatus.OFFSET_ILLEGAL:
                log.warning("offset %d of %s illegal, moving to %d", offset, mq,
                            result.next_begin_offset)
                self.offset_store.update(mq, result.next_begin_offset)
                offset = result.next_begin_offset
                pq.msgs.clear()
                pq.msg_size = 0
                await self.offset_store.persist(mq)
            else:
                offset = result.next_begin_offset
                if not pq.count:
                    self.offset_store.update(mq, offset, True)
            if cfg.pull_interval:
                await asyncio.sleep(cfg.pull_interval / 1000)

    # --- consuming --------------------------------------------------------------
    def _restore_retry_topic(self, msgs: list[MessageExt]) -> None:
        """Messages of the group's retry topic get their original topic back.  A
        batch comes from one queue, so one look at its first message tells."""
        rt = self._retry_topic
        if not msgs or msgs[0].topic != rt:
            return
        for m in msgs:
            if m.topic == rt:
                original = m.properties.get(PROPERTY_RETRY_TOPIC)
                if original:
                    m.topic = original

    async def _dispatch(self, msgs: list[MessageExt], mq: MessageQueue, pq: ProcessQueue) -> None:
        if self.orderly:
            if not pq.consuming:
                pq.consuming = True
                self._spawn(self._consume_orderly(mq, pq))
            return
        n = self.config.consume_message_batch_max_size
        if self._is_async:
            for i in range(0, len(msgs), n):
                await self._sem.acquire()
                self._spawn(self._consume_concurrently(msgs[i:i + n], mq, pq, True))
            return
        await self._consume_inline(msgs, mq, pq, n)

    async def _consume_inline(self, msgs: list[MessageExt], mq: MessageQueue, pq: ProcessQueue,
                              n: int) -> None:
        """A plain-function listener runs on the loop over the whole pulled batch,
        ``n`` messages per call, with no task or coroutine per call; consumed
        messages leave the process queue and move the offset once per batch.
        Failed chunks (rare) then take the send-back path."""
        self._restore_retry_topic(msgs)
        listener, success = self.listener, ConsumeStatus.CONSUME_SUCCESS
        failed: list[tuple[list[MessageExt], object, ConsumeContext]] = []
        for i in range(0, len(msgs), n):
            chunk = msgs[i:i + n] if n < len(msgs) else msgs
            ctx = ConsumeContext(mq)
            try:
                status = listener(chunk, ctx)
                if status is not success and inspect.isawaitable(status):
                    status = await status
            except Exception as e:
                log.warning("listener of %s raised %r: messages will be retried", self.group, e)
                status = None
            if status is not success:
                failed.append((chunk, status, ctx))
        if pq.dropped:
            return
        done = msgs
        if failed:
            failed_ids = {id(m) for chunk, _s, _c in failed for m in chunk}
            done = [m for m in msgs if id(m) not in failed_ids]
        self.stats["ok"] += len(done)
        offset = pq.remove(done)
        if offset >= 0:
            self.offset_store.update(mq, offset, True)
        for chunk, status, ctx in failed:
            if pq.dropped:
                return
            await self._consumed(chunk, status, ctx, mq, pq)

    def _spawn(self, coro: Awaitable) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._consume_tasks.add(task)
        task.add_done_callback(self._consume_tasks.discard)

    async def _call_listener(self, msgs: list[MessageExt], ctx: ConsumeContext):
        try:
            status = self.listener(msgs, ctx)
            if inspect.isawaitable(status):
                status = await status
        except Exception as e:
            log.warning("listener of %s raised %r: messages will be retried", self.group, e)
            status = None
        return status

    async def _consume_concurrently(self, msgs: list[MessageExt], mq: MessageQueue,
                                    pq: ProcessQueue, release: bool) -> None:
        try:
            self._restore_retry_topic(msgs)
            ctx = ConsumeContext(mq)
            status = await self._call_listener(msgs, ctx)
            if not pq.dropped:
                await self._consumed(msgs, status, ctx, mq, pq)
        finally:
            if release:
                self._sem.release()

    async def _consumed(self, msgs: list[MessageExt], status, ctx: ConsumeContext,
                        mq: MessageQueue, pq: ProcessQueue) -> None:
        """After the listener: count, send failures back for retry (or keep them
        to consume again in 5 s when the send-back fails), commit the offset."""
        failed: list[MessageExt] = []
        if status is ConsumeStatus.CONSUME_SUCCESS:
            self.stats["ok"] += len(msgs)
        else:
            self.stats["failed"] += len(msgs)
            if self.clustering:
                for m in msgs:
                    if not await self._send_back(m, ctx.delay_level_when_next_consume):
                        failed.append(m)
            else:
                log.warning("broadcast consume of %d messages failed: dropped", len(msgs))
        done = [m for m in msgs if m not in failed] if failed else msgs
        offset = pq.remove(done)
        if offset >= 0 and not pq.dropped:
            self.offset_store.update(mq, offset, True)
        if failed:
            for m in failed:
                m.reconsume_times += 1
            asyncio.get_running_loop().call_later(
                5.0, lambda: self._spawn(self._consume_concurrently(failed, mq, pq, False)))

    async def _send_back(self, msg: MessageExt, delay_level: int) -> bool:
        addr = self.instance.find_broker_addr(msg.broker_name)
        if addr is None:
            return False
        mrt = self.config.max_reconsume_times
        try:
            await self.instance.api.send_back(addr, msg, self.group, delay_level,
                                              mrt if mrt >= 0 else 16)
            return True
        except Exception as e:
            log.warning("send back of %s failed: %s", msg.msg_id, e)
            return False

    async def _consume_orderly(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """One batch at a time per queue, in offset order, only while locked."""
        cfg = self.config
        max_times = cfg.max_reconsume_times if cfg.max_reconsume_times >= 0 else (1 << 31) - 1
        try:
            while self._running and not pq.dropped and pq.msgs:
                if self.clustering and (not pq.locked or
                                        time.monotonic() - pq.last_lock_ts > LOCK_STALE_SECONDS):
                    await asyncio.sleep(0.1)
                    continue
                msgs = pq.take(cfg.consume_message_batch_max_size)
                self._restore_retry_topic(msgs)
                ctx = ConsumeContext(mq)
                status = await self._call_listener(msgs, ctx)
                if pq.dropped:
                    return
                if status is ConsumeOrderlyStatus.SUCCESS:
                    self.stats["ok"] += len(msgs)
                    offset = pq.commit()
                else:
                    self.stats["failed"] += len(msgs)
                    if all(m.reconsume_times >= max_times for m in msgs) and self.clustering:
                        for m in msgs:  # give up: DLQ through the broker
                            await self._send_back(m, -1)
                        offset = pq.commit()
                    else:
                        for m in msgs:
                            m.reconsume_times += 1
                        pq.rollback()
                        wait = ctx.suspend_millis if ctx.suspend_millis >= 0 else \
                            cfg.suspend_current_queue_time_millis
                        await asyncio.sleep(wait / 1000)
                        continue
                if offset >= 0:
                    self.offset_store.update(mq, offset)
        finally:
            pq.consuming = False

    # --- broker requests ---------------------------------------------------------
    async def reset_offset(self, topic: str, table: dict[MessageQueue, int]) -> None:
        for mq, offset in table.items():
            if mq.topic != topic:
                continue
            await self._drop(mq)
            self.offset_store.update(mq, offset)
            await self.offset_store.persist(mq)
        self.instance.rebalance_immediately()

    def running_info(self) -> dict:
        props = {
            "PROP_CONSUME_TYPE": self.consume_type.name,
            "PROP_CONSUMEORDERLY": str(self.orderly).lower(),
            "PROP_THREADPOOL_CORE_SIZE": str(self.config.consume_concurrently_max),
            "PROP_NAMESERVER_ADDR": self.instance.config.namesrv_addr,
            "PROP_CLIENT_VERSION": CURRENT_VERSION_DESC,
            "PROP_CONSUMER_START_TIMESTAMP": str(self.start_ts),
            "messageModel": self.config.message_model.name,
            "consumeFromWhere": self.config.consume_from_where.name,
            "consumerGroup": self.group,
        }
        return {
            "properties": props,
            "subscriptionSet": [s.to_json_obj() for s in self.subscriptions.values()],
            "mqTable": {mq.key(): pq.info(self.offset_store.table.get(mq, -1))
                        for mq, pq in self.pqs.items()},
            "statusTable": {},
        }

    async def consume_directly(self, msg: MessageExt, broker_name: str) -> dict:
        begin = time.monotonic()
        ctx = ConsumeContext(MessageQueue(msg.topic, broker_name, msg.queue_id))
        status = await self._call_listener([msg], ctx)
        if status in (ConsumeStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS):
            result = "CR_SUCCESS"
        elif status is None:
            result = "CR_THROW_EXCEPTION"
        else:
            result = "CR_LATER"
        out = {"autoCommit": True, "consumeResult": result, "order": self.orderly,
               "spentTimeMills": int((time.monotonic() - begin) * 1000)}
        if result != "CR_SUCCESS":
            out["remark"] = f"listener returned {status}"
        return out

