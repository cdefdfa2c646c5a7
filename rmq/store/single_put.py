"""One ordinary message in its own append session (the timer's delivery).

``put_single`` stores one ordinary message (no transaction, no delay, not in
SCHEDULE_TOPIC_XXXX) when nothing unusual stands in the way: a writable
master store without a transient store pool, the record fits in the current
commit-log file, the message is the next one to dispatch and its consume
queue has room for the entry in its current file.  It then writes the record
and the consume-queue entry in one call (``append_single``), does the same
bookkeeping as ``CommitLog.put_message`` + ``DefaultMessageStore._dispatch_put``
(queue offset, positions, checkpoint, index, arrival notification, stats,
flush wake-up) and returns ``(queue offset, offset message id, wrote offset,
size)``.  Anything else returns ``None`` before touching the store, and the
caller takes the general path, which handles every case.

The general put brackets its write with ``begin_time_in_lock`` so that other
threads see a slow append; here the whole put runs on the loop's thread
without blocking, so no other reader can observe the bracket and it is left
out.

``append_single`` (the record and its entry) and ``put_single`` (the whole
session) have their pure-Python twins here and their compiled ones in
``rmq._fast.store_put``; both write the same bytes and leave the store in
the same state.
"""

from __future__ import annotations

import logging
from typing import Any

from rmq._fast import compiled
from rmq.store.config import BrokerRole, FlushDiskType
from rmq.store.consume_queue import _cq_write
from rmq.store.mapped_file import ZERO_AHEAD
from rmq.store.message_codec import (
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    _record_size,
    _write_record,
)
from rmq.store.running_flags import NOT_WRITEABLE_MASK

log = logging.getLogger("store")

_CQ_UNIT = 20


def _append_single(buf, pos: int, limit: int, max_body: int, queue_id: int, flag: int,
                   queue_offset: int, phy: int, sys_flag: int, born_ts: int, born_host: bytes,
                   store_ts: int, store_host: bytes, reconsume: int, body, topic: bytes,
                   props: str, cq_buf, cq_pos: int, tags_code: int,
                   host_hex: str) -> tuple[int, str] | None:
    """Write the record at ``buf[pos:]`` and its consume-queue entry at
    ``cq_buf[cq_pos:]``; (size, offset message id), or None when the record is
    too big, would not end by ``limit`` or a field is too long."""
    props_b = props.encode("utf-8")
    if len(born_host) != (20 if sys_flag & 0x10 else 8) or \
            len(store_host) != (20 if sys_flag & 0x20 else 8):
        raise ValueError("host field length does not match the sysFlag")
    if len(topic) > MAX_TOPIC_LENGTH or len(props_b) > MAX_PROPERTIES_LENGTH:
        return None
    body_len = len(memoryview(body))
    size = _record_size(sys_flag, body_len, len(topic), len(props_b))
    if body_len > max_body or size > max_body + 65536 or pos < 0 or pos + size > limit:
        return None
    if pos + size > len(buf) or cq_pos < 0 or cq_pos + _CQ_UNIT > len(cq_buf):
        raise ValueError("record or consume queue entry out of range")
    _write_record(buf, pos, queue_id, flag, queue_offset, phy, sys_flag, born_ts, born_host,
                  store_ts, store_host, reconsume, 0, body, topic, props_b)
    _cq_write(cq_buf, cq_pos, phy, size, tags_code)
    return size, host_hex + (phy & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big").hex().upper()


def _put_single(store: Any, topic: str, topic_b: bytes, queue_id: int, flag: int, body,
                keys: str | None, uniq: str | None, stored: str, tags_code: int, sys_flag: int,
                born_ts: int, born_host: bytes, reconsume: int) -> tuple[int, str, int, int] | None:
    """Store one ordinary message in one append session, or None (nothing done).

    ``stored`` is the property string to store, ``keys`` and ``uniq`` its
    KEYS and UNIQ_KEY values (for the index; None when absent), ``born_host``
    the 8/20-byte host field, ``topic_b`` the topic in UTF-8."""
    cfg = store.config
    cl = store.commit_log
    if (keys or uniq) and cfg.messageIndexEnable and \
            not store.index_service.keys_fit(_key_bound(keys, uniq)):
        return None  # the general put makes the next index file first (DispatchRoom)
    run = cl.open_run(False)
    if run is None:
        return None
    try:
        q = run.queue(topic, queue_id)
        phy = run.phy
        r = None if q is None else run.append_one(
            q, queue_id, flag, cl.fast_sys_flag(sys_flag, born_host), born_ts, born_host,
            reconsume, body, topic, topic_b, stored, tags_code)
        if r is None:
            return None
        size, msg_id = r
        now = run.store_ts
        run.publish_queue(q)
        run.publish()
        # index keys (which may move the dispatch position back), statistics
        # and the arrival notice under the locks, as the dispatch does them
        _after_put(store, cfg, topic, queue_id, q.qoff - 1, phy, size, now, tags_code, keys,
                   uniq)
    finally:
        run.release()
    return q.qoff - 1, msg_id, phy, size


def _key_bound(keys: str | None, uniq: str | None) -> int:
    """At least the index entries of a message (KEYS tokens counted by their
    separators: empty ones too), without splitting the string."""
    return (1 if uniq else 0) + (keys.count(" ") + 1 if keys else 0)


def _after_put(store: Any, cfg: Any, topic: str, queue_id: int, queue_offset: int, phy: int,
               size: int, now: int, tags_code: int, keys: str | None, uniq: str | None) -> None:
    """Index keys, stats, arrival notification and flush wake-up of a stored
    message, as the general put and its dispatch do them."""
    if (keys or uniq) and cfg.messageIndexEnable:
        if not store.index_service.build_index(topic, phy, now, keys, uniq):
            if store.index_service.no_space:
                # dispatched again (the consume-queue entry is idempotent) once there is room
                store.mark_no_space("index")
                store.reput_from_offset = phy
            else:
                store.running_flags.make_index_file_error()
    store.stats.on_put_one(topic, size)
    listener = store.message_arriving_listener
    if listener is not None:  # on the loop's thread: no hand-over needed (see _notify)
        try:
            listener(topic, queue_id, queue_offset + 1, tags_code, now, 1, size)
        except Exception:  # noqa: BLE001 - a listener bug must not fail the stored send
            log.exception("message arriving listener failed")
    if cfg.flushDiskType is FlushDiskType.ASYNC_FLUSH and not cfg.flushCommitLogTimed:
        store.flush_service.wake_for(phy + size, now)


def wait_flush(store: Any, end: int, wait: bool, token: object, done: Any) -> bool:
    """SYNC_FLUSH after ``put_single``: True when ``done(token, status)`` will
    run on the loop once the group commit covered ``end`` (PUT_OK) or
    syncFlushTimeout passed (FLUSH_DISK_TIMEOUT); False when there is nothing
    to wait for (ASYNC_FLUSH, or the sender does not wait: the flush is only
    woken), as ``DefaultMessageStore.put_message_then`` decides."""
    cfg = store.config
    if cfg.flushDiskType is not FlushDiskType.SYNC_FLUSH:
        return False
    if not wait:
        store.flush_service.wakeup()
        return False
    loop = store._loop
    if loop is None:
        loop = store._bind_loop()
    store.flush_service.wait_on_loop(loop, end, cfg.syncFlushTimeout, token, done)
    return True


append_single = _append_single
put_single = _put_single
_c = compiled("store_put")
if _c is not None:
    _c.bind(BrokerRole.SLAVE, FlushDiskType.ASYNC_FLUSH, NOT_WRITEABLE_MASK, ZERO_AHEAD)
    append_single = _c.append_single
    put_single = _c.put_single
