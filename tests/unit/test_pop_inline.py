"""The small methods a compiled pop and its ack read without calling them
(``RequestQueue.runs_at_once``, ``get_min_offset_in_queue`` of the store
and its consume queue, ``PopPolling.notify``, ``BrokerStats.inc_get``)
answer and leave the same as the methods themselves, and objects of other
types are asked through the methods."""

from __future__ import annotations

import asyncio

import pytest

from rmq._fast import compiled_or_none
from rmq.broker.fast_failure import RequestQueue
from rmq.broker.pop_polling import PopPolling
from rmq.broker.processor import pop as _pop  # noqa: F401 - binds the compiled pop_queue
from rmq.broker.stats import BrokerStats
from rmq.store import DefaultMessageStore, MessageExtBrokerInner, MessageStoreConfig

_Q = compiled_or_none("pop_queue")
_L = compiled_or_none("pop_lane")
# the compiled modules' own reads: run by the compiled pass only
pytestmark = pytest.mark.compiled_only


@pytest.fixture(autouse=True)
def _bound():
    from rmq.broker import pop_lane

    pop_lane.make_codec()  # binds the compiled lane's take (and RequestQueue)


class _Queue(RequestQueue):
    """Another kind of queue: asked through its method."""

    def runs_at_once(self) -> bool:
        return False


@pytest.mark.parametrize("waiting,busy,active", [
    (False, 0, None), (True, 0, None), (False, 1, None), (False, 0, False), (False, 0, True)])
def test_runs_at_once_reads_as_the_method(waiting, busy, active):
    q = RequestQueue("pull", 10, workers=1,
                     before_run_active=None if active is None else (lambda: active))
    q.busy = busy
    if waiting:
        q._waiting[1] = object()
    assert _L.runs_at_once(q) == q.runs_at_once()
    assert _L.runs_at_once(_Queue("pull", 10)) is False


def _store(tmp_path) -> DefaultMessageStore:
    store = DefaultMessageStore(MessageStoreConfig(
        storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=64 * 1024,
        mappedFileSizeConsumeQueue=20 * 4), ("10.0.0.2", 10911))
    assert store.load()
    store.start()
    return store


@pytest.mark.timeout(60)
def test_min_offset_in_queue_reads_as_the_method(tmp_path):
    store = _store(tmp_path)
    try:
        for i in range(10):
            store.put_message(MessageExtBrokerInner(
                "T", 1, 0, b"m%d" % i, {}, "", 0, 0, 1, ("10.0.0.1", 5000), ("10.0.0.2", 10911)))
        while store.reput_from_offset < store.commit_log.get_max_offset():
            store.do_reput()
        cq = store.consume_queue_table["T"][1]
        for low in (0, 20 * 3, 20 * 7 + 5):
            cq.min_logic_offset = low
            for topic, qid in (("T", 1), ("T", 0), ("U", 1)):
                assert _Q.min_offset_in_queue(store, topic, qid) == \
                    store.get_min_offset_in_queue(topic, qid)
        assert _Q.min_offset_in_queue(store, "T", 1) == 7

        class Other:
            def get_min_offset_in_queue(self, topic, qid):
                return 42

        assert _Q.min_offset_in_queue(Other(), "T", 1) == 42
    finally:
        store.shutdown()


async def test_notify_polling_wakes_as_the_method():
    p = PopPolling(8)
    fut = asyncio.get_running_loop().create_future()
    p.waiters["T"] = {fut}
    _Q.notify_polling(p, "U")
    assert not fut.done()
    _Q.notify_polling(p, "T")
    assert fut.done() and fut.result() is True
    told = []

    class Other:
        def notify(self, topic):
            told.append(topic)

    _Q.notify_polling(Other(), "V")
    assert told == ["V"]


@pytest.mark.parametrize("queue_id", [0, 3])
def test_count_get_counts_as_inc_get(queue_id):
    a, b = BrokerStats("c"), BrokerStats("c")
    for nums, size in ((3, 100), (5, 7), (1, 0)):
        _Q.count_get(a, "g", "T", queue_id, nums, size)
        b.inc_get("g", "T", queue_id, nums, size, 0, False)
    assert a.get_total == b.get_total == 9
    assert a._get_pending == b._get_pending
    told = []

    class Other(BrokerStats):
        def inc_get(self, *args):
            told.append(args)

    _Q.count_get(Other("c"), "g", "T", queue_id, 2, 9)
    assert told == [("g", "T", queue_id, 2, 9, 0, False)]
