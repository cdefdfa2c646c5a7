"""A running rmq (or RocketMQ 4.9) cluster as the data source sees it: the
queues of topics, their offsets, pulls of one queue range, offset commits.

Built on :mod:`rmq.client` (an ``MQClientInstance`` that is never started:
no heartbeats, no rebalancing, nothing registered with the brokers) and
driven with :func:`run` from Spark's synchronous calls, one event loop per
call, so a Python worker keeps no loop or connection between calls.

Offsets are consume-queue offsets (the ``queueOffset`` column): a queue's
messages are ``[min, max)``, ``max`` being the next offset it will store.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

from rmq.client.config import ClientConfig
from rmq.client.exceptions import MQBrokerError, MQClientError
from rmq.client.instance import subscribe_queues
from rmq.client.message import MessageExt, MessageQueue, PullStatus
from rmq.client.pull_consumer import LitePullConsumer
from rmq.common.codes import ResponseCode
from rmq.common.exceptions import RemotingError

log = logging.getLogger("rmq.spark")
T = TypeVar("T")
# what a failed request raises when a broker or name server is down or restarting
TRANSIENT = (MQClientError, RemotingError, OSError, asyncio.TimeoutError)
_ids = itertools.count()


class DataLossError(RuntimeError):
    """Messages the read was planned to return are gone (deleted by retention,
    or a broker came back with less than it had); raised unless
    ``failOnDataLoss=false``."""


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine on a fresh event loop (Spark calls are synchronous)."""
    return asyncio.run(coro)


def pulled(namesrv: str, group: str, request_timeout_ms: int, mq: MessageQueue, lo: int, hi: int,
           batch: int, fail_on_data_loss: bool, retry_timeout_ms: int) -> Iterator[list[MessageExt]]:
    """:meth:`Cluster.pull_range` as a plain iterator (a Spark task's ``read``
    is a generator): one private event loop, closed with the connections."""
    loop = asyncio.new_event_loop()

    async def open_cluster() -> Cluster:
        return Cluster(namesrv, group, request_timeout_ms)

    cluster = loop.run_until_complete(open_cluster())
    pulls = cluster.pull_range(mq, lo, hi, batch, fail_on_data_loss, retry_timeout_ms)
    try:
        while True:
            try:
                msgs = loop.run_until_complete(pulls.__anext__())
            except StopAsyncIteration:
                return
            yield msgs
    finally:
        loop.run_until_complete(pulls.aclose())
        loop.run_until_complete(cluster.instance.shutdown())
        loop.close()


class Cluster:
    """The client side of one call: ``async with Cluster(namesrv, group) as c``."""

    def __init__(self, namesrv: str, group: str, request_timeout_ms: int = 10_000) -> None:
        config = ClientConfig(namesrv_addr=namesrv, instance_name=f"spark-{os.getpid()}-{next(_ids)}",
                              mq_client_api_timeout=request_timeout_ms)
        self.consumer = LitePullConsumer(group, client_config=config, auto_commit=False)
        self.instance = self.consumer.instance
        self.group = group
        self.namesrv = namesrv

    async def __aenter__(self) -> Cluster:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.instance.shutdown()

    async def queues(self, topic: str, strict: bool = False) -> list[MessageQueue]:
        """The readable queues the name server routes for ``topic`` now ([] when
        it knows none: the topic does not exist, or no broker of it is up).
        ``strict``: a name server that does not answer is an error, not []."""
        route = await self.instance.update_route(topic)
        if route is not None:
            return subscribe_queues(topic, route)
        if strict:
            try:
                await self.instance.api.get_topic_route(topic)
            except MQBrokerError as e:
                if e.code != ResponseCode.TOPIC_NOT_EXIST:
                    raise RuntimeError(f"rmq: the name server refused the route of {topic}: {e}") from e
            except TRANSIENT as e:
                raise RuntimeError(f"rmq: no name server of {self.namesrv} answers: {e}") from e
        return []

    async def _offset(self, mq: MessageQueue, name: str) -> int:
        addr = await self.instance.find_broker_addr_or_fetch(mq)
        return await getattr(self.instance.api, name)(addr, mq)

    async def offsets(self, mqs: list[MessageQueue], which: str,
                      timestamp_ms: int | None = None) -> dict[MessageQueue, int]:
        """``min``, ``max`` or (with ``timestamp_ms``) ``search`` offsets of
        ``mqs``; a queue whose broker does not answer is left out."""
        async def one(mq: MessageQueue) -> int | None:
            try:
                if which == "search":
                    addr = await self.instance.find_broker_addr_or_fetch(mq)
                    return await self.instance.api.search_offset(addr, mq, timestamp_ms)
                return await self._offset(mq, f"get_{which}_offset")
            except TRANSIENT as e:
                log.info("%s offset of %s not available: %s", which, mq, e)
                return None

        got = await asyncio.gather(*(one(mq) for mq in mqs))
        return {mq: off for mq, off in zip(mqs, got, strict=True) if off is not None}

    async def commit(self, offsets: dict[MessageQueue, int]) -> None:
        """UPDATE_CONSUMER_OFFSET of the group for each queue (what
        ``rmq-admin consumerProgress`` reads); a broker that is down is skipped."""
        for mq, off in offsets.items():
            try:
                addr = await self.instance.find_broker_addr_or_fetch(mq)
                await self.instance.api.update_consumer_offset(addr, self.group, mq, off, False)
            except TRANSIENT as e:
                log.warning("committing %s=%d for %s failed: %s", mq, off, self.group, e)

    async def pull_range(self, mq: MessageQueue, lo: int, hi: int, batch: int,
                         fail_on_data_loss: bool, retry_timeout_ms: int) -> AsyncIterator[list[MessageExt]]:
        """The messages of ``mq`` with offsets in ``[lo, hi)``, pull by pull.

        A broker that does not answer (restarting, failing over) is retried
        with a growing pause for ``retry_timeout_ms``; offsets that are no
        longer there raise :class:`DataLossError` (or are skipped)."""
        offset = lo
        waiting_since: float | None = None
        pause = 0.05
        while offset < hi:
            try:
                r = await self.consumer.pull(mq, offset, min(batch, hi - offset))
            except TRANSIENT as e:
                waiting_since = waiting_since or time.monotonic()
                if (time.monotonic() - waiting_since) * 1000 >= retry_timeout_ms:
                    raise RuntimeError(f"rmq: pulling {_name(mq)} at offset {offset} failed for "
                                       f"{retry_timeout_ms} ms: {e}") from e
                await asyncio.sleep(pause)
                pause = min(pause * 2, 2.0)
                await self.instance.update_route(mq.topic)
                continue
            if r.status is PullStatus.FOUND:
                waiting_since, pause = None, 0.05
                msgs = [m for m in r.messages if offset <= m.queue_offset < hi]
                if msgs:
                    yield msgs
                offset = max(offset + 1, r.next_begin_offset)
            elif r.status is PullStatus.NO_MATCHED_MSG:
                offset = r.next_begin_offset
            elif r.next_begin_offset > offset:  # the queue's first messages are gone
                _lost(mq, offset, min(r.next_begin_offset, hi), fail_on_data_loss)
                offset = r.next_begin_offset
            else:  # the queue ends before hi: wait for a catching-up broker, then give up
                waiting_since = waiting_since or time.monotonic()
                if (time.monotonic() - waiting_since) * 1000 >= retry_timeout_ms:
                    _lost(mq, offset, hi, fail_on_data_loss)
                    return
                await asyncio.sleep(pause)
                pause = min(pause * 2, 2.0)


def _name(mq: MessageQueue) -> str:
    return f"{mq.topic}@{mq.broker_name}#{mq.queue_id}"


def _lost(mq: MessageQueue, lo: int, hi: int, fail: bool) -> None:
    text = f"rmq: offsets [{lo}, {hi}) of {_name(mq)} are no longer on the broker"
    if fail:
        raise DataLossError(text + " (set failOnDataLoss=false to skip them)")
    log.warning("%s: skipped", text)
