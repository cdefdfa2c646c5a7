"""What a flush syncs (``MappedFileQueue.flush``, ``MappedFile.flush``): only
the pages from the flushed position to what is readable, only once
``least_pages`` of them are pending (flushConsumeQueueLeastPages,
flushCommitLogLeastPages; 0 = anything), and a queue with nothing written
since its last flush syncs nothing -- the consume-queue flusher asks every
queue of the store every round.  Both syncs (compiled and twin) are counted
through the module's ``sync_range``."""

from __future__ import annotations

import pytest

from rmq.store import mapped_file as mfm
from rmq.store.consume_queue import ConsumeQueue
from rmq.store.flush import FlushConsumeQueueService
from rmq.store.mapped_file import OS_PAGE_SIZE, MappedFileQueue

pytestmark = pytest.mark.timeout(60)

SIZE = 16 * OS_PAGE_SIZE


@pytest.fixture
def syncs(monkeypatch) -> list[tuple[int, int]]:
    """Every sync's ``(start, end)``, the real sync still made."""
    made: list[tuple[int, int]] = []
    real = mfm.sync_range

    def counted(mm, fd, start, end):
        made.append((start, end))
        real(mm, fd, start, end)

    monkeypatch.setattr(mfm, "sync_range", counted)
    return made


def _write(q: MappedFileQueue, n: int) -> None:
    mf = q.get_last_mapped_file(0, True)
    pos = mf.wrote_position
    if mf.window:  # (a consume queue's: written within its reserved blocks)
        assert mf.reserve_range(pos, pos + n, 0)
    mf.view[pos:pos + n] = b"\x01" * n
    mf.wrote_position = mf.committed_position = pos + n


def test_nothing_written_syncs_nothing(tmp_path, syncs, monkeypatch) -> None:
    q = MappedFileQueue(str(tmp_path), SIZE)
    assert q.flush(2) and q.flush(0)  # no file yet
    _write(q, 100)
    assert q.flush(0) is False and syncs == [(0, 100)]
    looked: list[int] = []
    real_find = q.find_mapped_file_by_offset
    monkeypatch.setattr(q, "find_mapped_file_by_offset",
                        lambda *a: looked.append(a[0]) or real_find(*a))
    for least in (2, 1, 0):
        assert q.flush(least) is True
    assert syncs == [(0, 100)]  # nothing new: no sync at all
    assert looked == [100]  # and with pages asked for, not even a file looked up


def test_least_pages_and_the_dirty_range(tmp_path, syncs) -> None:
    q = MappedFileQueue(str(tmp_path), SIZE)
    _write(q, OS_PAGE_SIZE + 20)  # one page boundary crossed: not yet two pages
    assert q.flush(2) is True and syncs == []
    _write(q, OS_PAGE_SIZE)  # two crossed
    assert q.flush(2) is False
    assert syncs == [(0, 2 * OS_PAGE_SIZE + 20)] and q.flushed_where == 2 * OS_PAGE_SIZE + 20
    _write(q, 2 * OS_PAGE_SIZE)
    assert q.flush(2) is False
    # from where the last flush stopped, not the whole mapping
    assert syncs[-1] == (2 * OS_PAGE_SIZE + 20, 4 * OS_PAGE_SIZE + 20)
    _write(q, 8)
    assert q.flush(2) is True and len(syncs) == 2  # below the least pages: kept for later
    assert q.flush(0) is False and syncs[-1] == (4 * OS_PAGE_SIZE + 20, 4 * OS_PAGE_SIZE + 28)


def test_a_full_file_is_flushed_whole_then_the_next(tmp_path, syncs) -> None:
    q = MappedFileQueue(str(tmp_path), SIZE)
    _write(q, SIZE - 10)
    assert q.flush(2) is False
    _write(q, 10)  # full: synced whatever its pages
    assert q.flush(4) is False and syncs[-1] == (SIZE - 10, SIZE)
    assert q.flushed_where == SIZE and q.flush(2) is True
    q.get_last_mapped_file(SIZE, True)  # the next file, empty
    assert q.flush(2) is True and len(syncs) == 2
    _write(q, 3 * OS_PAGE_SIZE)
    assert q.flush(2) is False and syncs[-1] == (0, 3 * OS_PAGE_SIZE)  # in the second file


class _Store:
    """What the consume-queue flusher asks of a store."""

    def __init__(self, queues: list[ConsumeQueue], config) -> None:
        self.queues = queues
        self.config = config
        self.checkpoint = type("Checkpoint", (), {"logics_msg_timestamp": 0, "flush": lambda s: None})()

    def all_consume_queues(self) -> list[ConsumeQueue]:
        return self.queues


def test_the_consume_queue_flusher_syncs_only_queues_with_pages(tmp_path, syncs) -> None:
    from rmq.store.config import MessageStoreConfig

    cfg = MessageStoreConfig()
    cfg.mappedFileSizeConsumeQueue = SIZE
    queues = [ConsumeQueue("T", qid, str(tmp_path), SIZE, None) for qid in range(64)]
    store = _Store(queues, cfg)
    service = FlushConsumeQueueService(store)
    service.do_flush(1)  # the first round is a thorough one
    syncs.clear()
    _write(queues[3].mfq, 3 * OS_PAGE_SIZE)
    _write(queues[5].mfq, 20)
    service.do_flush(1)
    assert syncs == [(0, 3 * OS_PAGE_SIZE)]  # one queue with pages; the others cost no sync
    cfg.flushConsumeQueueThoroughInterval = 0
    service.do_flush(1)  # thorough: what is left of queue 5, and nothing else
    assert syncs == [(0, 3 * OS_PAGE_SIZE), (0, 20)]


def _flusher(flushed: int, last_thorough: int):
    from types import SimpleNamespace

    from rmq.store.config import MessageStoreConfig
    from rmq.store.flush import FlushRealTimeService

    cfg = MessageStoreConfig()  # flushCommitLogLeastPages 4, thorough interval 10 s
    mfq = SimpleNamespace(flushed_where=flushed, mapped_file_size=1024 * 1024)
    service = FlushRealTimeService(SimpleNamespace(config=cfg, commit_log=SimpleNamespace(mfq=mfq)))
    service.last_flush_timestamp = last_thorough
    return service, cfg


def test_a_put_wakes_the_commit_log_flusher_only_for_a_round_that_flushes() -> None:
    now = 1_000_000
    service, cfg = _flusher(100, now)
    assert cfg.flushCommitLogLeastPages == 4
    service.wake_for(100 + 3 * OS_PAGE_SIZE, now)  # 3 pages: the round would flush nothing
    assert not service._wake.is_set()
    service.wake_for(4 * OS_PAGE_SIZE, now)  # the 4th page boundary crossed: it flushes
    assert service._wake.is_set()

    service, cfg = _flusher(1024 * 1024 - 100, now)
    service.wake_for(1024 * 1024 + 200, now)  # a full file's tail is flushed whatever its pages
    assert service._wake.is_set()

    service, cfg = _flusher(100, now)
    service.wake_for(120, now + cfg.flushCommitLogThoroughInterval)  # a thorough flush is due
    assert service._wake.is_set()

    service, cfg = _flusher(100, now)
    service._thorough_round = True  # the waiting round flushes anything
    service.wake_for(100, now)
    assert not service._wake.is_set()
    service.wake_for(101, now)
    assert service._wake.is_set()


def test_a_store_flushes_asynchronously_as_before(tmp_path) -> None:
    """ASYNC_FLUSH end to end: a few small puts stay in the page cache until
    the least pages are there or the thorough interval passes, then reach the
    disk; the flusher's position follows."""
    import time

    from rmq.store import DefaultMessageStore
    from rmq.store.config import MessageStoreConfig
    from rmq.store.message import MessageExtBrokerInner

    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=1024 * 1024,
                             mappedFileSizeConsumeQueue=20 * 64, maxHashSlotNum=64,
                             maxIndexNum=256, flushIntervalCommitLog=50)
    store = DefaultMessageStore(cfg, store_host=("127.0.0.1", 10911))
    assert store.load()
    store.start()
    try:
        def put(n: int) -> None:
            for _ in range(n):
                assert store.put_message(MessageExtBrokerInner(
                    topic="T", queue_id=0, body=b"x" * 1000, properties={}, properties_string="",
                    born_host=("127.0.0.1", 1), born_timestamp=int(time.time() * 1000))).is_ok()

        put(1)
        mfq = store.commit_log.mfq
        time.sleep(0.3)  # the first round was a thorough one; what it found is flushed
        first = mfq.flushed_where
        put(2)  # under 4 pages: left to the thorough interval
        time.sleep(0.3)
        assert mfq.flushed_where == first
        put(20)  # well over 4 pages: flushed at once
        deadline = time.monotonic() + 5
        while mfq.flushed_where < first + 4 * OS_PAGE_SIZE and time.monotonic() < deadline:
            time.sleep(0.01)
        assert mfq.flushed_where >= first + 4 * OS_PAGE_SIZE
    finally:
        store.shutdown()
