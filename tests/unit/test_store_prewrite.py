"""Commit-log files whose blocks are written before use (``MappedFile.write_blocks``,
``rmqPrewriteCommitLogEnable`` under SYNC_FLUSH): the file is zeros, the same
length, and none of its blocks is left reserved-but-unwritten (FIEMAP), so a
flush never has to change the file's block map; stores with and without it
hold the same records, and only SYNC_FLUSH stores do it."""

from __future__ import annotations

import fcntl
import os
import struct

import pytest

from rmq.store import DefaultMessageStore, MessageStoreConfig, PutMessageStatus
from rmq.store.config import FlushDiskType
from rmq.store.mapped_file import MappedFile, offset_to_file_name
from rmq.testing.store import commit_log_records
from tests.unit.test_store_zero_fill import HOST, _message

pytestmark = pytest.mark.timeout(60)

MiB = 1024 * 1024
FS_IOC_FIEMAP = 0xC020660B
FIEMAP_EXTENT_LAST = 0x1
FIEMAP_EXTENT_UNWRITTEN = 0x800
_HEAD = struct.Struct("=QQIIII")  # start, length, flags, mapped extents, extent count, reserved
_EXTENT = struct.Struct("=QQQQQIIII")  # logical, physical, length, 2 reserved, flags, 3 reserved
MAX_EXTENTS = 256


def _extents(path: str) -> list[tuple[int, int, int]]:
    """(logical offset, length, flags) of every extent of ``path`` on disk
    (FIEMAP, without syncing the file first: dirty pages count as they are)."""
    out = []
    start = 0
    with open(path, "rb") as f:
        while True:
            buf = bytearray(_HEAD.pack(start, 2**64 - 1 - start, 0, 0, MAX_EXTENTS, 0)
                            + bytes(_EXTENT.size * MAX_EXTENTS))
            fcntl.ioctl(f.fileno(), FS_IOC_FIEMAP, buf)
            mapped = _HEAD.unpack_from(buf)[3]
            for i in range(mapped):
                logical, _, length, _, _, flags, *_ = _EXTENT.unpack_from(
                    buf, _HEAD.size + i * _EXTENT.size)
                out.append((logical, length, flags))
            if not mapped or out[-1][2] & FIEMAP_EXTENT_LAST:
                return out
            start = out[-1][0] + out[-1][1]


def _unwritten(path: str) -> int:
    """Bytes of ``path`` in reserved, unwritten extents."""
    return sum(length for _, length, flags in _extents(path) if flags & FIEMAP_EXTENT_UNWRITTEN)


def test_write_blocks_leaves_zeros_and_no_unwritten_block(tmp_path):
    size = 3 * MiB + 5 * 4096 + 100  # a direct-I/O part and a plain tail
    mf = MappedFile(str(tmp_path / offset_to_file_name(0)), size)
    try:
        assert _unwritten(mf.file_name) > 0  # reserved by posix_fallocate: what a flush converts
        mf.write_blocks()
        assert os.path.getsize(mf.file_name) == size
        assert _unwritten(mf.file_name) == 0
        assert sum(length for _, length, _ in _extents(mf.file_name)) >= size
        assert not mf.view.tobytes().strip(b"\0")
        # the file works as any other afterwards
        mf.view[:5] = b"hello"
        mf.wrote_position = 5
        assert mf.flush(0) == 5
        with open(mf.file_name, "rb") as f:
            assert f.read(6) == b"hello\0"
    finally:
        mf.close()


def _store(root, flush: FlushDiskType, prewrite: bool) -> DefaultMessageStore:
    cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=2 * MiB,
                             mappedFileSizeConsumeQueue=20 * 4096, flushDiskType=flush,
                             rmqPrewriteCommitLogEnable=prewrite, syncFlushTimeout=10_000)
    store = DefaultMessageStore(cfg, HOST)
    assert store.load()
    store.start()
    return store


@pytest.mark.parametrize(("flush", "prewrite", "written"), [
    (FlushDiskType.SYNC_FLUSH, True, True),
    (FlushDiskType.SYNC_FLUSH, False, False),
    (FlushDiskType.ASYNC_FLUSH, True, False),
])
def test_sync_flush_stores_write_their_files_blocks_first(tmp_path, flush, prewrite, written):
    store = _store(tmp_path / "s", flush, prewrite)
    plain = _store(tmp_path / "plain", FlushDiskType.ASYNC_FLUSH, False)
    try:
        mfq = store.commit_log.mfq
        # a file roll, then 64 KiB into the second file: most of it never touched
        for i in range(20_000):
            m = _message(i)
            assert store.put_message(m).status is PutMessageStatus.PUT_OK
            assert plain.put_message(m).status is PutMessageStatus.PUT_OK
            if len(mfq.mapped_files) == 2 and mfq.mapped_files[-1].wrote_position >= 64 * 1024:
                break
        files = mfq.mapped_files
        assert len(files) == 2
        # what was never written by an append or before use is still reserved
        unwritten = [_unwritten(f.file_name) for f in files]
        assert (max(unwritten) == 0) is written, unwritten
        assert commit_log_records(store) == commit_log_records(plain)
    finally:
        store.shutdown()
        plain.shutdown()
