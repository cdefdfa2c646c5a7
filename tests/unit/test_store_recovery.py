"""Recovery from damaged files, cleaning, disk-full, transient store pool,
HA hooks and the inspect tool's verdicts."""

from __future__ import annotations

import os
import resource
import shutil
import threading
import time

import pytest

from rmq.store import DefaultMessageStore, GetMessageStatus, PutMessageStatus
from rmq.store.inspect import inspect_store
from rmq.store.inspect import main as inspect_main
from tests.unit.test_store_basic import HOST, make_msg, small_config

FILE = 32 * 1024


def _fill(root, n=300, clean=True, **kw):
    s = DefaultMessageStore(small_config(root, **kw), HOST)
    assert s.load()
    s.start()
    results = [s.put_message(make_msg(i, qid=i % 2)) for i in range(n)]
    assert all(r.is_ok() for r in results)
    if clean:
        s.shutdown()
    return s, results


def _crash(s):
    """Leave the store as a killed process would: files as they are, abort kept."""
    s._shutdown = True
    for svc in (s.clean_service, s.stats, s.flush_service, s.flush_cq_service):
        svc.shutdown()
    s.commit_log.allocator.shutdown()
    s._release_lock()


def _reopen(root, **kw):
    s = DefaultMessageStore(small_config(root, **kw), HOST)
    assert s.load()
    s.start()
    return s


def _all_offsets(s, qid):
    out = []
    off = s.get_min_offset_in_queue("T", qid)
    for _ in range(10_000):  # bounded: a pull that does not advance fails the test
        g = s.get_message("g", "T", qid, off, 32)
        if g.status is not GetMessageStatus.FOUND:
            return out
        assert g.next_begin_offset > off
        out.extend(g.message_queue_offsets)
        off = g.next_begin_offset
        g.release()
    raise AssertionError("queue never ended")


def test_truncated_last_commitlog_file_refuses_load(tmp_path):
    _fill(tmp_path)
    last = sorted(os.listdir(tmp_path / "commitlog"))[-1]
    with open(tmp_path / "commitlog" / last, "r+b") as f:
        f.truncate(FILE - 100)
    s = DefaultMessageStore(small_config(tmp_path), HOST)
    assert s.load() is False  # wrong file length: 4.9.8 refuses to start
    assert inspect_main([str(tmp_path)]) == 1


def test_zero_filled_tail_is_cut_after_a_crash(tmp_path):
    s, results = _fill(tmp_path, clean=False)
    _crash(s)
    last_phy = results[-1].append_result.wrote_offset
    name = f"{last_phy - last_phy % FILE:020d}"
    with open(tmp_path / "commitlog" / name, "r+b") as f:
        f.seek(last_phy % FILE)
        f.write(bytes(FILE - last_phy % FILE))  # the last record never reached the disk
    s = _reopen(tmp_path)
    assert s.get_max_phy_offset() == last_phy
    assert len(_all_offsets(s, 0)) + len(_all_offsets(s, 1)) == 299
    r = s.put_message(make_msg(1000, qid=1))
    assert r.append_result.wrote_offset == last_phy and r.append_result.logics_offset == 149
    s.shutdown()
    assert inspect_store(str(tmp_path)).errors == []


def test_corrupt_crc_in_the_middle_stops_abnormal_recovery(tmp_path, caplog):
    s, results = _fill(tmp_path, clean=False)
    _crash(s)
    bad = results[150].append_result
    name = f"{bad.wrote_offset - bad.wrote_offset % FILE:020d}"
    with open(tmp_path / "commitlog" / name, "r+b") as f:
        f.seek(bad.wrote_offset % FILE + 100)  # inside the body
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    assert any("CRC error" in e for e in inspect_store(str(tmp_path)).errors)
    s = _reopen(tmp_path)
    assert f"CRC check failed at physical offset {bad.wrote_offset}" in caplog.text
    assert s.get_max_phy_offset() == bad.wrote_offset
    assert s.get_max_offset_in_queue("T", 0) == 75 and _all_offsets(s, 0) == list(range(75))
    s.shutdown()


def test_deleted_consume_queue_directory_is_rebuilt(tmp_path):
    _fill(tmp_path)
    shutil.rmtree(tmp_path / "consumequeue")
    s = _reopen(tmp_path)
    assert _all_offsets(s, 0) == list(range(150)) and _all_offsets(s, 1) == list(range(150))
    assert s.put_message(make_msg(5, qid=0)).append_result.logics_offset == 150
    s.shutdown()


def test_missing_checkpoint_after_a_crash(tmp_path):
    s, _ = _fill(tmp_path, clean=False)
    _crash(s)
    os.unlink(tmp_path / "checkpoint")
    s = _reopen(tmp_path)
    assert _all_offsets(s, 1) == list(range(150))
    assert s.query_message_by_unique_key("T", f"{201:032X}").queue_offset == 100
    s.shutdown()


def test_consume_queue_ahead_of_commitlog_is_truncated(tmp_path):
    s, results = _fill(tmp_path, clean=False)
    _crash(s)
    cut = results[200].append_result.wrote_offset
    for name in sorted(os.listdir(tmp_path / "commitlog")):
        start = int(name)
        path = tmp_path / "commitlog" / name
        if start > cut:
            os.unlink(path)
        elif start + FILE > cut:
            with open(path, "r+b") as f:
                f.seek(cut - start)
                f.write(bytes(start + FILE - cut))
    s = _reopen(tmp_path)
    assert s.get_max_offset_in_queue("T", 0) == 100 and s.get_max_offset_in_queue("T", 1) == 100
    assert s.get_message("g", "T", 0, 100, 1).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    s.shutdown()


def test_clean_expired_files_by_time_and_consume_queues_follow(tmp_path):
    s, _ = _fill(tmp_path, n=600, clean=False, fileReservedTime=0, deleteCommitLogFilesInterval=0,
                 deleteConsumeQueueFilesInterval=0)
    files_before = len(s.commit_log.mfq.mapped_files)
    assert files_before > 3
    s.execute_delete_files_manually()
    time.sleep(0.01)
    s.clean_resources_once()
    assert len(s.commit_log.mfq.mapped_files) == 1  # never the last one
    min_phy = s.get_min_phy_offset()
    assert min_phy == (files_before - 1) * FILE
    g = s.get_message("g", "T", 0, 0, 4)
    assert g.status is GetMessageStatus.OFFSET_TOO_SMALL and g.next_begin_offset == s.get_min_offset_in_queue("T", 0)
    g = s.get_message("g", "T", 0, g.next_begin_offset, 4)
    assert g.status is GetMessageStatus.FOUND
    g.release()
    left = sorted(os.listdir(tmp_path / "commitlog"))  # the last file and the pre-created next one
    assert left[0] == f"{min_phy:020d}" and len(left) <= 2
    assert len(os.listdir(tmp_path / "consumequeue" / "T" / "0")) < 6
    s.shutdown()
    assert inspect_store(str(tmp_path)).errors == []


def test_disk_full_ratio_refuses_writes_but_reads_continue(tmp_path):
    s, _ = _fill(tmp_path, n=10, clean=False)
    s.config.diskSpaceWarningLevelRatio = s.config.diskSpaceCleanForciblyRatio = 0.0
    s.clean_service.commit_log.is_space_to_delete()
    assert s.running_flags.is_disk_full()
    assert s.put_message(make_msg(1)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert s.get_message("g", "T", 0, 0, 32).status is GetMessageStatus.FOUND
    s.config.diskSpaceWarningLevelRatio = s.config.diskSpaceCleanForciblyRatio = 1.0
    s.config.diskMaxUsedSpaceRatio = 95
    s.clean_service.commit_log.is_space_to_delete()
    assert s.put_message(make_msg(1)).status is PutMessageStatus.PUT_OK
    s.shutdown()


def test_a_consume_queue_file_that_does_not_fit_refuses_the_put(tmp_path):
    """No room for a new consume-queue file (here: RLIMIT_FSIZE below its size,
    so its reservation fails with EFBIG as a full disk fails it with ENOSPC):
    the put is refused before anything is written, so no acknowledged message
    waits for a file; once there is room the put goes through."""
    s, _ = _fill(tmp_path, n=10, clean=False)
    end = s.get_max_phy_offset()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, hard))
    try:
        r = s.put_message(make_msg(100, topic="U"))
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert "consume queue file of U-0" in r.remark
        assert s.get_max_phy_offset() == end
        assert not os.path.exists(tmp_path / "consumequeue" / "U" / "0" / f"{0:020d}")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert not s.running_flags.is_disk_full()
    assert s.put_message(make_msg(102, topic="U")).status is PutMessageStatus.PUT_OK
    g = s.get_message("g", "U", 0, 0, 32)
    assert g.status is GetMessageStatus.FOUND and g.message_queue_offsets == [0]
    g.release()
    s.shutdown()


def test_transient_store_pool_commits_before_readers_see_data(tmp_path):
    s = DefaultMessageStore(small_config(tmp_path, transientStorePoolEnable=True, transientStorePoolSize=3,
                                         commitIntervalCommitLog=20), HOST)
    assert s.load()
    s.start()
    try:
        for i in range(200):
            assert s.put_message(make_msg(i)).is_ok()
        deadline = time.monotonic() + 10
        while s.get_max_offset_in_queue("T", 0) < 200 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _all_offsets(s, 0) == list(range(200))
        assert s.remain_transient_store_buffer_numbs() >= 1
    finally:
        s.shutdown()
    s = _reopen(tmp_path)
    assert _all_offsets(s, 0) == list(range(200))
    s.shutdown()


def test_dispatch_stops_at_a_partly_committed_file_of_the_transient_pool(tmp_path):
    """A transient-pool file committed only in part while appends already went
    on into the next file: dispatch must stop at its committed end and wait for
    the next commit (it used to spin there for ever, on the commit thread, so
    nothing was committed again)."""
    s = DefaultMessageStore(small_config(tmp_path, transientStorePoolEnable=True, transientStorePoolSize=3,
                                         commitIntervalCommitLog=600_000), HOST)
    assert s.load()
    s.start()
    try:
        mfq = s.commit_log.mfq
        for i in range(20):
            assert s.put_message(make_msg(i)).is_ok()
        mfq.commit(0)  # the commit thread sleeps: commit a first part by hand
        committed = mfq.mapped_files[0].committed_position
        assert 0 < committed < FILE and len(mfq.mapped_files) == 1
        i = 20
        while len(mfq.mapped_files) < 2:
            assert s.put_message(make_msg(i)).is_ok()
            i += 1
        assert mfq.mapped_files[0].committed_position == committed  # still partly committed
        assert mfq.mapped_files[0].select(committed) is None
        worker = threading.Thread(target=s.do_reput, daemon=True)
        worker.start()
        worker.join(5)
        assert not worker.is_alive(), "dispatch spun at the committed end of the first file"
        assert s.reput_from_offset == committed and s.get_max_offset_in_queue("T", 0) == 20
        while not mfq.commit(0):
            pass
        s.do_reput()
        assert _all_offsets(s, 0) == list(range(i))
    finally:
        s.shutdown()


def test_ha_hooks_copy_a_master_into_a_slave(tmp_path):
    master, _ = _fill(tmp_path / "m", n=200, clean=False)
    slave = DefaultMessageStore(small_config(tmp_path / "s", brokerRole="SLAVE"), HOST)
    assert slave.load()
    slave.start()
    offset = 0
    while offset < master.get_max_phy_offset():
        data = master.get_commit_log_data(offset)
        chunk = bytes(data[:5000])  # odd chunk sizes split records
        data.release()
        assert slave.append_to_commit_log(offset, chunk)
        offset += len(chunk)
    assert not slave.append_to_commit_log(offset + 1, b"x")
    assert slave.get_max_phy_offset() == master.get_max_phy_offset()
    assert _all_offsets(slave, 1) == list(range(100))
    assert slave.query_message_by_unique_key("T", f"{33:032X}").queue_offset == 16
    slave.shutdown()
    master.shutdown()


def test_clean_unused_and_delete_topics(tmp_path):
    s, _ = _fill(tmp_path, n=10, clean=False)
    s.put_message(make_msg(1, topic="Other"))
    assert s.clean_unused_topic({"T"}) == 1
    assert s.get_max_offset_in_queue("Other", 0) == 0
    assert not os.path.exists(tmp_path / "consumequeue" / "Other")
    assert s.delete_topics({"T"}) == 2
    assert s.get_message("g", "T", 0, 0, 1).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    s.shutdown()


@pytest.mark.parametrize("args,code", [(["/nonexistent-dir"], 2)])
def test_inspect_bad_arguments(args, code):
    assert inspect_main(args) == code
