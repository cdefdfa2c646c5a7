"""A deleted store file a reader still maps: it is unlinked at once, unmapped
when the reader lets go, and reported once when held past
destroyMapedFileIntervalForcibly (rmq never unmaps under a reader)."""

from __future__ import annotations

import logging
import os

import pytest

from rmq.store.allocate import AllocateMappedFileService
from rmq.store.mapped_file import MappedFileQueue

pytestmark = pytest.mark.timeout(30)
SIZE = 64 * 1024


def test_a_held_file_is_reported_then_unmapped(tmp_path, caplog):
    mfq = MappedFileQueue(str(tmp_path), SIZE, AllocateMappedFileService(False))
    first = mfq.get_last_mapped_file(0, need_create=True)
    first.wrote_position = SIZE
    mfq.get_last_mapped_file(0, need_create=True)
    reader = first.view[0:128]  # a pull response being written, say
    deleted = mfq.delete_expired_file_by_time(0, 0, True)
    assert deleted == 1 and not os.path.exists(first.file_name)
    assert not first.closed
    with caplog.at_level(logging.WARNING, logger="store"):
        assert mfq.retry_hanged(interval_forcibly_ms=60_000) == 1
        assert not [r for r in caplog.records if "still maps it" in r.message]
        assert mfq.retry_hanged(interval_forcibly_ms=0) == 1
        assert mfq.retry_hanged(interval_forcibly_ms=0) == 1
    warned = [r for r in caplog.records if "still maps it" in r.message]
    assert len(warned) == 1 and first.file_name in warned[0].message
    reader.release()
    assert mfq.retry_hanged() == 0 and first.closed
    mfq.shutdown()
