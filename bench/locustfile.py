"""Locust load test speaking RocketMQ through ``rmq.client``.

Two user classes: ``ProducerUser`` sends (one message, or a batch with
``--rmq-batch N``) and ``ConsumerUser`` pulls the topic's queues.  Every send
and pull is reported to locust's statistics with its own request type —
``SEND``, ``SEND_BATCH``, ``PULL`` — named after the topic, so the web UI and
``--headless --csv`` show requests/s, latencies and failures per type.

    .venv/bin/locust -f bench/locustfile.py --headless -u 64 -r 16 -t 60s \\
        --rmq-namesrv 127.0.0.1:9876 --rmq-topic BenchTopic --rmq-size 1024 --csv bench/out/locust

Options (each also read from the environment variable in brackets):
``--rmq-namesrv`` [RMQ_NAMESRV, default 127.0.0.1:9876], ``--rmq-topic``
[RMQ_TOPIC, BenchTopic], ``--rmq-size`` [RMQ_SIZE, 1024 bytes], ``--rmq-tags``
[RMQ_TAGS, comma-separated tags used in turn; empty = none], ``--rmq-batch``
[RMQ_BATCH, 1 = single sends], ``--rmq-group`` [RMQ_GROUP, consumer group],
``--rmq-pull-batch`` [RMQ_PULL_BATCH, 32], ``--rmq-from`` [RMQ_FROM: "last"
(default: only what is sent during the test) or "first"].  Pick one class by
naming it after the options (``... ProducerUser``); by default users are split
evenly between the two.

rmq.client runs on asyncio and locust on gevent: each locust process runs one
asyncio loop in a real OS thread (not a gevent greenlet), shared by all its
users.  A user hands a coroutine to that loop and waits on a gevent *async
watcher* that the loop thread fires when the coroutine is done: the watcher
is the hub's own cross-thread wake-up, and an active one keeps the hub from
deciding that every greenlet waits for ever (``LoopExit``), which is what a
plain ``AsyncResult`` set from another thread led to under load.  The
producer and consumer are shut down and the thread joined when the test stops.

The topic does not have to exist: when the name server has no route for it,
the first user creates it (``--rmq-queues`` queues, on every master of every
cluster) and waits for the route, as ``rmq-admin updateTopic`` would.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time

import gevent
import gevent.hub
from gevent.monkey import get_original
from locust import User, constant, events, task

# gevent patches threading (a Thread would be a greenlet): the loop needs a real OS thread
_start_new_thread = get_original("_thread", "start_new_thread")
_allocate_lock = get_original("_thread", "allocate_lock")
CALL_TIMEOUT = 30.0  # seconds a user waits for one send/pull before counting it failed


@events.init_command_line_parser.add_listener
def _options(parser) -> None:
    env = os.environ.get
    group = parser.add_argument_group("rmq")
    group.add_argument("--rmq-namesrv", default=env("RMQ_NAMESRV", "127.0.0.1:9876"),
                       help="name server address(es), host:port;host:port")
    group.add_argument("--rmq-topic", default=env("RMQ_TOPIC", "BenchTopic"))
    group.add_argument("--rmq-size", type=int, default=int(env("RMQ_SIZE", "1024")),
                       help="message body bytes")
    group.add_argument("--rmq-tags", default=env("RMQ_TAGS", ""),
                       help="comma-separated tags, used in turn (empty: no tag)")
    group.add_argument("--rmq-batch", type=int, default=int(env("RMQ_BATCH", "1")),
                       help="messages per send (>1: SEND_BATCH)")
    group.add_argument("--rmq-group", default=env("RMQ_GROUP", "locust_consumer"))
    group.add_argument("--rmq-pull-batch", type=int, default=int(env("RMQ_PULL_BATCH", "32")))
    group.add_argument("--rmq-from", choices=("last", "first"), default=env("RMQ_FROM", "last"),
                       help="consumers start at the queues' end (last) or beginning (first)")
    group.add_argument("--rmq-queues", type=int, default=int(env("RMQ_QUEUES", "8")),
                       help="queues per broker when the topic has to be created")


class AsyncBridge:
    """One asyncio loop in a real thread, shared by the users of this process."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stopped = None
        self.producer = None
        self.consumer = None
        self._init_lock = None

    def start(self) -> None:
        if self.loop is not None:
            return
        try:
            import uvloop

            loop = uvloop.new_event_loop()
        except ImportError:
            loop = asyncio.new_event_loop()
        self.loop = loop
        self.stopped = _allocate_lock()  # held while the loop thread runs
        self.stopped.acquire()
        _start_new_thread(self._run, ())

    def _run(self) -> None:
        try:
            asyncio.set_event_loop(self.loop)
            self.loop.run_forever()
        finally:
            self.stopped.release()

    def call(self, coro, timeout: float = CALL_TIMEOUT):
        """Run ``coro`` on the loop; block this greenlet (only) until it finishes.

        The loop thread creates the task; its done-callback fires an async
        watcher of this greenlet's hub (``send`` is the one thread-safe call
        of a gevent loop), which switches back to this greenlet.  The watcher
        is started before the task exists: libev drops a ``send`` made before
        ``start``.  No concurrent.futures objects, whose locks gevent has
        patched."""
        self.start()
        hub = gevent.get_hub()
        watcher = hub.loop.async_()
        waiter = gevent.hub.Waiter()
        watcher.start(waiter.switch, None)
        task_box: list[asyncio.Task] = []

        def finished(task: asyncio.Task) -> None:
            if not task.cancelled():
                task.exception()  # retrieved here; raised by the waiting greenlet
            watcher.send()

        def submit() -> None:
            task = self.loop.create_task(coro)
            task_box.append(task)
            task.add_done_callback(finished)

        try:
            self.loop.call_soon_threadsafe(submit)
            with gevent.Timeout(timeout, TimeoutError(f"no answer within {timeout:g} s")):
                waiter.get()
        except TimeoutError:
            if task_box:
                self.loop.call_soon_threadsafe(task_box[0].cancel)
            raise
        finally:
            watcher.stop()
            watcher.close()
        task = task_box[0]
        if task.cancelled():
            raise TimeoutError("cancelled")
        return task.result()

    async def _init(self, kind: str, opts):
        """The process-wide producer or consumer, created once on the loop
        (after the topic, which is created when it has no route)."""
        if self._init_lock is None:
            self._init_lock = asyncio.Lock()
        async with self._init_lock:
            if self.producer is None and self.consumer is None:
                await ensure_topic(opts.rmq_namesrv, opts.rmq_topic, opts.rmq_queues)
            if kind == "producer" and self.producer is None:
                from rmq.client import Producer, ProducerConfig

                producer = Producer("locust_producer", opts.rmq_namesrv,
                                    config=ProducerConfig(send_msg_timeout=10_000))
                await producer.start()
                self.producer = producer
            if kind == "consumer" and self.consumer is None:
                self.consumer = await ConsumerState.create(opts)
            return self.producer if kind == "producer" else self.consumer

    def get(self, kind: str, opts):
        return self.call(self._init(kind, opts))

    def stop(self) -> None:
        """Shut the producer/consumer down and stop the loop thread."""
        if self.loop is None:
            return

        async def close() -> None:
            for client in (self.producer, self.consumer):
                if client is not None:
                    try:
                        await asyncio.wait_for(client.shutdown(), 10)
                    except Exception:  # noqa: BLE001 - best effort at exit
                        pass
            self.producer = self.consumer = None

        try:
            self.call(close(), timeout=15)
        except Exception:  # noqa: BLE001 - the loop may already be gone
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.stopped.acquire(True, 5)  # the thread has left run_forever
        self.loop = None
        self._init_lock = None


async def ensure_topic(namesrv: str, topic: str, queues: int, timeout: float = 30.0) -> None:
    """Create ``topic`` on every master of every cluster unless the name
    server already routes it, then wait until it does."""
    from rmq.client.admin import MQAdmin
    from rmq.client.exceptions import MQClientError

    async with MQAdmin(namesrv) as admin:
        try:
            await admin.topic_route(topic)
            return
        except MQClientError:
            pass
        info = await admin.cluster_info()
        masters = [addr for cluster in sorted(info.clusterAddrTable)
                   for addr in await admin.master_addrs(cluster)]
        if not masters:
            raise MQClientError(-1, f"no broker is registered with {namesrv}")
        for addr in masters:
            await admin.create_topic(addr, topic, queues, queues)
        deadline = time.monotonic() + timeout
        while True:
            try:
                await admin.topic_route(topic)
                return
            except MQClientError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)


class ConsumerState:
    """A LitePullConsumer plus the next offset of every queue; a queue is pulled
    by one user at a time so offsets advance in order."""

    def __init__(self, consumer, queues, positions) -> None:
        self.consumer = consumer
        self.queues = queues
        self.positions = positions
        self.busy: set = set()
        self.turn = itertools.count()

    @classmethod
    async def create(cls, opts) -> ConsumerState:
        from rmq.client import LitePullConsumer

        consumer = LitePullConsumer(opts.rmq_group, opts.rmq_namesrv, auto_commit=False)
        await consumer.start()
        queues = await consumer.fetch_queues(opts.rmq_topic)
        consumer.assign(queues)
        positions = {}
        for mq in queues:
            if opts.rmq_from == "first":
                await consumer.seek_to_begin(mq)
            else:
                await consumer.seek_to_end(mq)
            positions[mq] = consumer.positions[mq]
        return cls(consumer, queues, positions)

    async def pull_next(self, batch: int):
        """Pull the next free queue; (pull result or None when all are busy, bytes)."""
        free = [mq for mq in self.queues if mq not in self.busy]
        if not free:
            return None, 0
        mq = free[next(self.turn) % len(free)]
        self.busy.add(mq)
        try:
            result = await self.consumer.pull(mq, self.positions[mq], batch)
        finally:
            self.busy.discard(mq)
        self.positions[mq] = result.next_begin_offset
        return result, sum(len(m.body) for m in result.messages)

    async def shutdown(self) -> None:
        await self.consumer.shutdown()


BRIDGE = AsyncBridge()


@events.test_stop.add_listener
def _on_test_stop(**_kw) -> None:
    BRIDGE.stop()


@events.quitting.add_listener
def _on_quitting(**_kw) -> None:
    BRIDGE.stop()


def _report(request_type: str, name: str, start: float, length: int,
            exc: BaseException | None) -> None:
    events.request.fire(request_type=request_type, name=name,
                        response_time=(time.perf_counter() - start) * 1000.0,
                        response_length=length, exception=exc, context={},
                        response=None, url=None)


class ProducerUser(User):
    """Sends ``--rmq-size`` byte messages (batches of ``--rmq-batch``) back to back."""

    wait_time = constant(0)

    def on_start(self) -> None:
        opts = self.environment.parsed_options
        self.topic = opts.rmq_topic
        self.batch = max(1, opts.rmq_batch)
        self.body = os.urandom(max(1, opts.rmq_size))
        tags = [t for t in opts.rmq_tags.split(",") if t]
        self.tags = itertools.cycle(tags) if tags else itertools.repeat(None)
        self.producer = BRIDGE.get("producer", opts)

    @task
    def send(self) -> None:
        from rmq.client import Message

        start = time.perf_counter()
        try:
            if self.batch > 1:
                msgs = [Message(self.topic, self.body, tags=next(self.tags))
                        for _ in range(self.batch)]
                BRIDGE.call(self.producer.send_batch(msgs))
                _report("SEND_BATCH", self.topic, start, self.batch * len(self.body), None)
            else:
                BRIDGE.call(self.producer.send(Message(self.topic, self.body,
                                                       tags=next(self.tags))))
                _report("SEND", self.topic, start, len(self.body), None)
        except Exception as exc:  # noqa: BLE001 - a failed send is a locust failure
            _report("SEND_BATCH" if self.batch > 1 else "SEND", self.topic, start, 0, exc)


class ConsumerUser(User):
    """Pulls the topic's queues (``--rmq-pull-batch`` messages per pull); an
    empty pull waits 50 ms before the next one instead of spinning."""

    wait_time = constant(0)

    def on_start(self) -> None:
        opts = self.environment.parsed_options
        self.topic = opts.rmq_topic
        self.batch = max(1, opts.rmq_pull_batch)
        self.state = BRIDGE.get("consumer", opts)

    @task
    def pull(self) -> None:
        start = time.perf_counter()
        try:
            result, nbytes = BRIDGE.call(self.state.pull_next(self.batch))
        except Exception as exc:  # noqa: BLE001 - a failed pull is a locust failure
            _report("PULL", self.topic, start, 0, exc)
            return
        if result is None:  # every queue is being pulled by another user
            gevent.sleep(0.01)
            return
        _report("PULL", self.topic, start, nbytes, None)
        if not result.messages:
            gevent.sleep(0.05)
